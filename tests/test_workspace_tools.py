"""The workspace's shell tool (`Workspace.run_shell`) and the processes it starts: a timeout kills the command and
everything it started (not only bash), and a command that leaves a background job is answered when the shell exits,
not when the job lets go of the output. Real bash processes, watched through /proc."""
import os, signal, sys, time
from pathlib import Path

import pytest

from headlesnb.workspace import WorkspaceManager

pytestmark = pytest.mark.skipif(not sys.platform.startswith('linux'), reason='watches processes through /proc')


@pytest.fixture
def ws(tmp_path):
    return WorkspaceManager(tmp_path, code_map=False).open_workspace('w')


def alive(pid: int) -> bool:
    "Whether process `pid` still runs (a zombie, killed and waiting to be reaped, does not)"
    try: state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except FileNotFoundError: return False
    return state not in 'ZX'


def gone_within(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > end: return False
        time.sleep(0.05)
    return True


def test_timeout_kills_the_command_and_what_it_started(ws, tmp_path):
    # the sleep is bash's child: the old run_shell killed bash only, and the sleep ran on, reparented to PID 1
    t = time.monotonic()
    r = ws.run_shell("echo before; sh -c 'echo $$ > sleep.pid; exec sleep 30'; echo done", timeout=1)
    took = time.monotonic() - t
    pid = int((tmp_path / 'sleep.pid').read_text())
    try:
        assert r['exit'] is None and r['is_error'] and took < 10, (r, took)
        assert gone_within(pid, 5), f'sleep {pid} still runs after the timeout'
        out = ws.tool_windows[r['id']].output
        assert out == 'before\n[timed out after 1s: the command and all it started were killed]', out
    finally:
        if alive(pid): os.kill(pid, signal.SIGKILL)


def test_background_job_answered_at_the_shell_exit(ws, tmp_path):
    # the job keeps the output pipe open: the old run_shell waited for its end, and called the command timed out
    t = time.monotonic()
    r = ws.run_shell('sleep 30 & echo $! > bg.pid; echo started', timeout=20)
    took = time.monotonic() - t
    pid = int((tmp_path / 'bg.pid').read_text())
    try:
        out = ws.tool_windows[r['id']].output
        assert r['exit'] == 0 and not r['is_error'] and took < 10, (r, took, out)
        assert out.startswith('started\n[exit 0]\n[a background job it started still runs: its later output is not captured'), out
        assert alive(pid)  # a job started on purpose (a server, say) is left running, and the answer says so
    finally:
        os.kill(pid, signal.SIGKILL)


def test_output_of_a_quick_command_in_order(ws):
    r = ws.run_shell('echo out; echo err >&2; echo out2; exit 4', timeout=10)
    assert (r['exit'], r['is_error'], ws.tool_windows[r['id']].output) == (4, True, 'out\nerr\nout2\n[exit 4]')
