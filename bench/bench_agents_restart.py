"""Restarting the tree over 100 agents, 20 of them running: at most 1.5x the first render (target).

100 agents (10 top-level, children and grandchildren): 20 command agents running in tmux, each with its minder, the
rest finished. Restart = every headlesnb process is gone (the minders SIGKILLed, as by a crash), then the terminal UI
starts again: from creating the app to its first paint of the 100 rows plus the first look for dead workers
(`list(check=True)`: one tmux list-sessions, /proc for each running agent, and a new minder for each of the 20).
Baseline, measured in the same run: the same first render on the same tree before any minder was killed
(their minders alive: nothing to start). Medians of 5 rounds, headless (Textual's pilot).
"""
import asyncio, json, os, signal, statistics, sys, tempfile, time
from pathlib import Path
from headlesnb.agents.tree import AgentManager, SessionStore
from headlesnb.fronts.agents_ui import agents_app
from headlesnb.agents.runners import tmux, proc_start

HERE = Path(__file__).resolve().parent


def build(root) -> list:
    "80 finished agents written to the store, 20 running command agents in tmux; the ids of the running ones"
    st, am = SessionStore(root), AgentManager(root, tmux=True)
    running = []
    for top in range(10):
        p = am.spawn(f'top-level task {top}', agent='sleeper')
        running.append(p)
        for c in range(3):
            q = st.create(p, dict(task=f'child {c} of {p}', parent=p, state='done', result='ok', agent='dialog', created_at='2026-01-01T00:00:00'))
            for g in range(2):
                if c == 0 and g == 0: running.append(am.spawn(f'grandchild of {q}', agent='sleeper', parent=q))
                else: st.create(q, dict(task=f'grandchild {g}', parent=q, state='done', result='ok', agent='dialog', created_at='2026-01-01T00:00:00'))
    return running


async def first_render(root) -> float:
    t = time.perf_counter()
    am = AgentManager(root, tmux=True)
    app = agents_app(am, check_every=0)
    async with app.run_test(size=(140, 120)) as pilot:
        while len(app.rows) < 100: await pilot.pause(0.001)
        await pilot.pause()
        am.list(check=True)  # (what the UI's first check does, in its worker)
        return time.perf_counter() - t


def minders(st, ids) -> list: return [int(st.read(i, 'minder').split()[0]) for i in ids]


if __name__ == '__main__':
    d = Path(tempfile.mkdtemp())
    os.environ['TMUX_TMPDIR'] = str(d)
    for k in ('TMUX', 'TMUX_PANE'): os.environ.pop(k, None)
    root = d / 'proj'
    (root / '.scope').mkdir(parents=True)
    (root / '.scope' / 'agents.toml').write_text(f'[agents.sleeper]\ncommand = ["sleep", "600"]\n')
    try:
        running = build(root)
        st = SessionStore(root)
        assert len(st.ids()) == 100 and len(running) == 20, (len(st.ids()), len(running))
        time.sleep(2.5)  # (the agents are no longer young: a dead minder is started again)
        asyncio.run(first_render(root))  # (warm: Textual and the modules loaded once, as in a process that restarts the tree)
        base, restart = [], []
        for _ in range(5):
            base.append(asyncio.run(first_render(root)))
            for p in minders(st, running): os.kill(p, signal.SIGKILL)
            end = time.monotonic() + 10
            while any(proc_start(p) for p in minders(st, running)) and time.monotonic() < end: time.sleep(0.01)
            old = set(minders(st, running))
            restart.append(asyncio.run(first_render(root)))
            assert not old & set(minders(st, running)), 'every minder was started again'
            assert all(s['status'] == 'running' for s in AgentManager(root).list() if s['id'] in running)
    finally: tmux('kill-server')
    b, r = statistics.median(base), statistics.median(restart)
    print(f'baseline: first render of the tree of 100 agents (20 running, their minders alive): median {b * 1e3:.0f} ms')
    print(f'restart after every minder was killed (20 started again by the first check):       median {r * 1e3:.0f} ms  ({r / b:.2f}x baseline)')
    print(f"target: at most 1.5x -> {'ok' if r / b <= 1.5 else 'OVER'}  (machine shared with other work)")
