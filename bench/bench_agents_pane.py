"""`n` or Enter to the agent visible in the right pane within 500 ms (target); baseline: tmux itself showing a split.

The tree runs in a tmux session of a private tmux server (TMUX_TMPDIR), with 100 agents. Timed until `tmux capture-pane`
of the right pane shows the agent, 5 rounds each: Enter on a command agent (its session attached beside the tree), Enter
on a dialog agent (its transcript), and `n` (from the Enter that submits the one-line task to the new agent shown).
Baseline: `tmux split-window` of `echo` from a shell, until capture-pane shows it."""
import json, os, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path
from headlesnb.agents.tree import AgentManager, SessionStore

CLI = [sys.executable, '-m', 'headlesnb.fronts.cli']

def tmx(*a): return subprocess.run(['tmux', *a], capture_output=True, text=True)
def panes(): return tmx('list-panes', '-t', '=ui:', '-F', '#{pane_id}').stdout.split()
def cap(p): return tmx('capture-pane', '-p', '-t', p).stdout

def until(cond, timeout=20):
    t = time.monotonic()
    while not cond():
        if time.monotonic() - t > timeout: raise AssertionError('not shown in 20 s: ' + ' | '.join(cap(p) for p in panes()))
        time.sleep(0.003)
    return time.monotonic() - t

def shown(tree, text): return lambda: any(text in cap(p) for p in panes() if p != tree)

def baseline(tree):
    t = time.monotonic()
    p = tmx('split-window', '-h', '-d', '-t', tree, '-P', '-F', '#{pane_id}', 'sh', '-c', 'echo BASELINE; exec sleep 60').stdout.strip()
    until(lambda: 'BASELINE' in cap(p))
    dt = time.monotonic() - t
    tmx('kill-pane', '-t', p)
    return dt

def enter_on(tree, row, n_rows, text):
    tmx('select-pane', '-t', tree)
    tmx('send-keys', '-t', tree, *(['k'] * n_rows), *(['j'] * row))
    time.sleep(0.5)  # (the cursor moved: only the Enter is timed)
    t = time.monotonic()
    tmx('send-keys', '-t', tree, 'Enter')
    until(shown(tree, text))
    return time.monotonic() - t

def new_agent(tree, k):
    tmx('select-pane', '-t', tree)
    tmx('send-keys', '-t', tree, 'n')
    until(lambda: 'New agent: what should it do?' in cap(tree))
    time.sleep(0.3)  # (typing starts as a person's would, once the prompt has the focus)
    tmx('send-keys', '-t', tree, '-l', f'bench round {k} --agent shell')
    time.sleep(0.3)
    t = time.monotonic()
    tmx('send-keys', '-t', tree, 'Enter')
    until(shown(tree, f'AGENT READY {100 + k}'))  # (ids 0-99 are taken)
    return time.monotonic() - t

if __name__ == '__main__':
    tmp = Path(tempfile.mkdtemp())
    os.environ['TMUX_TMPDIR'] = str(tmp)
    for k in ('TMUX', 'TMUX_PANE', 'COLUMNS', 'LINES'): os.environ.pop(k, None)
    root = tmp / 'proj'; (root / '.scope').mkdir(parents=True)
    (root / '.scope' / 'agents.toml').write_text('[agents.shell]\ncommand = ["sh", "-c", "echo AGENT READY $0; exec sleep 600", "{id}"]\n')
    try:
        am = AgentManager(root, tmux=True)
        cmd = am.spawn('attach me', agent='shell')
        st = SessionStore(root)
        dlg = st.create('', dict(task='a dialog agent', state='done', agent='dialog', runner='dialog', result='DIALOG RESULT', created_at='2026-01-01T00:00:00'))
        for k in range(98): st.create('', dict(task=f'task {k}', state='done', agent='claude-code', result='ok', created_at='2026-01-01T00:00:00'))
        tmx('new-session', '-d', '-s', 'ui', '-x', '200', '-y', '50', *CLI, 'agents', '--root', str(root))
        until(lambda: 'a dialog agent' in cap('=ui:'), 60)
        tree = panes()[0]
        base = [baseline(tree) for _ in range(5)]
        rows = 100
        att = [enter_on(tree, 0, rows, 'AGENT READY') if i % 2 == 0 else enter_on(tree, 1, rows, 'DIALOG RESULT') for i in range(10)]
        news = [new_agent(tree, k) for k in range(5)]
    finally:
        tmx('kill-server')
        shutil.rmtree(tmp, ignore_errors=True)
    b = statistics.median(base) * 1e3
    for name, xs in [('Enter on a command agent (attach)', att[0::2]), ('Enter on a dialog agent (transcript)', att[1::2]), ('n, the task, Enter: the new agent', news)]:
        m = statistics.median(xs) * 1e3
        print(f'{name:<40} median {m:4.0f} ms, max {max(xs) * 1e3:4.0f} ms  ({m / b:.1f}x baseline)  -> {"ok" if max(xs) <= 0.5 else "OVER"} (target 500 ms)')
    print(f'baseline: tmux split-window of echo, shown:  median {b:4.0f} ms, max {max(base) * 1e3:4.0f} ms  (load {os.getloadavg()[0]:.1f})')
