"""Abort stops a whole subtree within 2 s of the abort command (target); baseline: the same command line polling one agent.

The subtree, as in tests/test_agents.py: a dialog agent (run in this process, answered by tests/fake_anthropic.py) with a
dialog child whose model request is held, and two command agents in tmux, each a python process with a child process.
`headlesnb abort 0` runs in another process; we time from its start until every process is gone, the held request's
connection is closed and the dialog runs have ended. 5 rounds."""
import json, os, statistics, subprocess, sys, tempfile, threading, time
from pathlib import Path
import psutil
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
from fake_anthropic import FakeAnthropic
from headlesnb.agents.tree import AgentManager
from headlesnb.agents.runners import proc_start, tmux_sessions
from headlesnb.llm import AnthropicClient

CLI = [sys.executable, '-m', 'headlesnb.fronts.cli']
FAKE = HERE.parent / 'tests' / 'agents_fake_agent.py'

def wait_for(cond, timeout=30):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end: raise AssertionError('timed out')
        time.sleep(0.005)

def one_round(k):
    root = Path(tempfile.mkdtemp()); (root / '.scope').mkdir()
    pids = root / 'pids'; pids.mkdir()
    os.environ['FAKE_AGENT_PIDS'] = str(pids)
    (root / '.scope' / 'agents.toml').write_text(f'[agents.sleeper]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))}, "sleep"]\n')
    release = threading.Event()
    replies = {'0': [dict(tool_calls=[('spawn_agent', dict(task='child')), ('spawn_agent', dict(task='sleeper', agent='sleeper'))]),
                     dict(tool_calls=[('wait_agents', dict(ids='0.0,0.1'))])],
               '0.0': [dict(tool_calls=[('spawn_agent', dict(task='grandchild', agent='sleeper'))]), lambda b: release.wait(60) and 'late']}
    def script(body):
        who = '0.0' if 'You are agent 0.0' in body['system'][0]['text'] else '0'
        r = replies[who].pop(0)
        return r(body) if callable(r) else r
    with FakeAnthropic([script] * 4) as fake:
        am = AgentManager(root, llm=AnthropicClient(api_key='test', base_url=fake.url), tmux=True)
        am.spawn('coordinate')
        wait_for(lambda: len(fake.requests) == 4 and len(list(pids.iterdir())) == 2)
        procs = [int(p) for f in pids.iterdir() for p in f.read_text().split()]
        runners = list(am.runners.values())
        conns = lambda: [c for c in psutil.Process().net_connections('tcp') if c.raddr and c.raddr.port == fake.port and c.status == 'ESTABLISHED']
        t0 = time.monotonic()
        subprocess.run(CLI + ['abort', '0', '--root', str(root)], check=True, capture_output=True)
        wait_for(lambda: not any(proc_start(p) for p in procs) and not conns() and not any(r.thread.is_alive() for r in runners))
        t = time.monotonic() - t0
        release.set()
        t1 = time.monotonic()
        subprocess.run(CLI + ['poll', '0', '--root', str(root)], check=True, capture_output=True)
        base = time.monotonic() - t1
    return t, base

if __name__ == '__main__':
    d = tempfile.mkdtemp()
    os.environ.update(TMUX_TMPDIR=d, FAKE_AGENT_HOOK=json.dumps(CLI + ['hook']))
    os.environ.pop('TMUX', None); os.environ.pop('TMUX_PANE', None)
    try:
        res = [one_round(k) for k in range(5)]
    finally:
        subprocess.run(['tmux', 'kill-server'], capture_output=True)
    ts, bs = [r[0] for r in res], [r[1] for r in res]
    b, m = statistics.median(bs), statistics.median(ts)
    print(f'baseline: `headlesnb poll` in a new process:            median {b:.2f} s')
    print(f'`headlesnb abort` of a 4-agent subtree, until all stopped: median {m:.2f} s, max {max(ts):.2f} s  ({m / b:.1f}x baseline)')
    print(f'target: within 2 s -> {"ok" if max(ts) <= 2 else "OVER"}  (machine shared with other work; load {os.getloadavg()[0]:.1f})')
