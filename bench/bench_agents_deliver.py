"""Spawn to task delivered, for a CLI that is ready at once: at most 0.5 s above the CLI's own start (target).

The CLI is a stand-in that shows its prompt as soon as it runs (bracketed paste on, as Claude Code) and writes the
time it got its task. Baseline, measured in the same run: the CLI's own start, from `tmux new-session` running it
directly to its prompt on the screen (tmux and the interpreter's start included). Measured: from `spawn()` (the
Python API) to the CLI holding the whole task (typed in by the minder once it saw the prompt). Medians of 7 rounds.
"""
import json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path
from headlesnb.agents.tree import AgentManager
from headlesnb.agents.runners import tmux

CLI = r'''
import sys, time
print("\033[?2004h> ", end="", flush=True)
data = ""
while "\033[201~" not in data: data += sys.stdin.readline()
open(sys.argv[1], "w").write(repr(time.time()))
time.sleep(60)
'''


def wait(cond, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (v := cond()): return v
        time.sleep(0.002)
    raise TimeoutError


if __name__ == '__main__':
    d = Path(tempfile.mkdtemp())
    os.environ['TMUX_TMPDIR'] = str(d)
    for k in ('TMUX', 'TMUX_PANE'): os.environ.pop(k, None)
    (d / 'cli.py').write_text(CLI)
    root = d / 'proj'
    (root / '.scope').mkdir(parents=True)
    (root / '.scope' / 'agents.toml').write_text(f'[agents.ready]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(d / "cli.py"))}, "{{id}}.got"]\nready = \'(?m)^>$\'\n')
    tmux('new-session', '-d', '-s', 'keep', 'sleep 600')  # (the server is up, as for a user already in tmux)
    base, spawn = [], []
    try:
        for k in range(7):
            t = time.perf_counter()
            tmux('new-session', '-d', '-s', f'direct{k}', '-x', '200', '-y', '50', sys.executable, str(d / 'cli.py'), str(d / 'direct.got'))
            wait(lambda: tmux('capture-pane', '-p', '-t', f'=direct{k}:').stdout.strip() == '>')
            base.append(time.perf_counter() - t)
            tmux('kill-session', '-t', f'=direct{k}')
            am = AgentManager(root, tmux=True)
            t0 = time.time()
            i = am.spawn(f'task {k}\nwith "quotes" and $SHELL chars', agent='ready')
            got = wait(lambda: (root / f'{i}.got').exists() and (root / f'{i}.got').read_text())
            spawn.append(float(got) - t0)
            am.abort(i)
    finally: tmux('kill-server')
    b, m = statistics.median(base), statistics.median(spawn)
    print(f"baseline: the CLI's own start (tmux new-session to its prompt):  median {b * 1e3:.0f} ms")
    print(f"spawn() to the task in the CLI (prompt seen, task pasted):      median {m * 1e3:.0f} ms  ({m / b:.2f}x baseline, +{(m - b) * 1e3:.0f} ms)")
    print(f"target: at most 500 ms above the CLI's own start -> {'ok' if m - b <= 0.5 else 'OVER'}")
