"""A tree of 100 agents renders in under 100 ms (target); baseline: reading the 100 sessions from disk alone.

Render = re-read the sessions and rebuild the Textual tree from scratch (`refresh_tree` with its shape forgotten), then
let the app paint (pilot.pause); medians of 20 rounds, headless."""
import asyncio, statistics, tempfile, time
from pathlib import Path
from headlesnb.agents import AgentManager, SessionStore
from headlesnb.agents_ui import agents_app

def build(st):
    for top in range(10):
        p = st.create('', dict(task=f'top-level task {top} with a longer description', state='running', agent='claude-code', created_at='2026-01-01T00:00:00'))
        for c in range(3):
            q = st.create(p, dict(task=f'child {c} of {p}', parent=p, state='done' if c else 'running', activity='editing src/x.py', agent='dialog', created_at='2026-01-01T00:00:00'))
            for g in range(2):
                st.create(q, dict(task=f'grandchild {g}', parent=q, state='running', activity='reading a.py', agent='dialog', created_at='2026-01-01T00:00:00'))

async def render(am, rounds):
    app = agents_app(am, check_every=0)
    ts = []
    async with app.run_test(size=(140, 120)) as pilot:
        await pilot.pause(0.3)
        assert len(app.rows) == 100, len(app.rows)
        for _ in range(rounds):
            t = time.perf_counter()
            app.shape = None
            app.refresh_tree()
            await pilot.pause()
            ts.append(time.perf_counter() - t)
        t = time.perf_counter(); app.refresh_tree(); await pilot.pause(); inplace = time.perf_counter() - t
    return ts, inplace

if __name__ == '__main__':
    root = Path(tempfile.mkdtemp())
    st = SessionStore(root); build(st)
    am = AgentManager(root, tmux=False)
    assert len(am.list(check=False)) == 100
    base = []
    for _ in range(20):
        t = time.perf_counter(); am.tree(check=False); base.append(time.perf_counter() - t)
    ts, inplace = asyncio.run(render(am, 20))
    b, m = statistics.median(base) * 1e3, statistics.median(ts) * 1e3
    print(f'baseline: read 100 sessions into a tree:      median {b:.1f} ms')
    print(f'render the tree of 100 agents (full rebuild): median {m:.1f} ms, max {max(ts) * 1e3:.1f} ms  ({m / b:.1f}x baseline)')
    print(f'refresh with the same shape (labels only):    {inplace * 1e3:.1f} ms')
    print(f'target: under 100 ms -> {"ok" if m < 100 else "OVER"}  (machine shared with other work)')
