"""`headlesnb hook activity`, which Claude Code runs and waits for before every tool call once `headlesnb setup` has
installed the hooks: its wall time against a bare Python start-up (the floor of any hook written in Python),
measured in the same run, and against loading the agents' front end (what the hook cost when it loaded the managers).
Medians of 30 runs each, interleaved; the hook is given a live session, so it does its whole work (a state read and
an activity write). Run from the repo root: `python bench/bench_hook.py`."""
import json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's headlesnb, whatever is installed
from headlesnb.agents.store import SessionStore

root = Path(tempfile.mkdtemp())
sid = SessionStore(root).create('', dict(task='bench', state='running', agent='claude-code'))
env = dict(os.environ, SCOPE_SESSION_ID=sid, HEADLESNB_ROOT=str(root), PYTHONPATH=str(Path(__file__).resolve().parents[1]))
event = json.dumps(dict(hook_event_name='PreToolUse', tool_name='Read', tool_input=dict(file_path=f'{root}/a.py'), cwd=str(root)))
cmds = dict(python=[sys.executable, '-c', 'pass'],
            hook=[sys.executable, '-m', 'headlesnb.fronts.cli', 'hook', 'activity'],
            managers=[sys.executable, '-c', 'import headlesnb.fronts.agents_ui'])
times = {k: [] for k in cmds}
for _ in range(30):
    for k, c in cmds.items():
        t = time.perf_counter()
        subprocess.run(c, input=event, text=True, env=env, cwd=root, check=True, capture_output=True)
        times[k].append(time.perf_counter() - t)
assert SessionStore(root).read(sid, 'activity') == 'reading a.py'
m = {k: statistics.median(v) * 1e3 for k, v in times.items()}
print(f"baseline: a bare Python start-up:               median {m['python']:.0f} ms")
print(f"headlesnb hook activity (a live session):       median {m['hook']:.0f} ms  ({m['hook'] / m['python']:.1f}x baseline)")
print(f"loading the agents' front end and managers:     median {m['managers']:.0f} ms  ({m['managers'] / m['python']:.1f}x baseline)")
