"""Agents against hostile content (audit): an agent's result and the project's path never reach tmux as a format,
and session files that are symlinks, FIFOs or folders are never read through, block nothing, and are named.
Real parts: the command line in subprocesses, a private tmux server, the official MCP client.
"""
import json, os, subprocess, sys, time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)
HNB_ARGV = [sys.executable, '-m', 'headlesnb.fronts.cli']
AG = '[agents.hi]\ncommand = ["sh", "-c", "echo hi"]\n[agents.forever]\ncommand = ["sleep", "3600"]\n'


def hnb(*args, cwd, env=None, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run(HNB_ARGV + list(args), cwd=cwd, capture_output=True, text=True, env=env or os.environ.copy(),
                          timeout=timeout, stdin=subprocess.DEVNULL)


def wait_for(cond, timeout=20, what='condition'):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (v := cond()): return v
        time.sleep(0.05)
    raise AssertionError(f'timed out waiting for {what}')


@pytest.fixture
def tmux_env(tmp_path, monkeypatch):
    "A private tmux server (its own TMUX_TMPDIR) holding session fxg-spawner, the terminal the agents are spawned from"
    d = tmp_path / 'tmux'
    d.mkdir()
    monkeypatch.setenv('TMUX_TMPDIR', str(d))
    for k in ('TMUX', 'TMUX_PANE', 'SCOPE_SESSION_ID'): monkeypatch.delenv(k, raising=False)
    subprocess.run(['tmux', 'new-session', '-d', '-s', 'fxg-spawner', 'sleep', '600'], check=True)
    sock = subprocess.run(['tmux', 'display-message', '-p', '-t', '=fxg-spawner:', '#{socket_path},#{pid},0'], capture_output=True, text=True).stdout.strip()
    pane = subprocess.run(['tmux', 'display-message', '-p', '-t', '=fxg-spawner:', '#{pane_id}'], capture_output=True, text=True).stdout.strip()
    yield dict(os.environ, TMUX=sock, TMUX_PANE=pane)  # (as inside that pane)
    out = subprocess.run(['tmux', 'list-sessions', '-F', '#{session_name}'], capture_output=True, text=True).stdout.split()
    for name in out:  # (all on our private server: ours)
        subprocess.run(['tmux', 'kill-session', '-t', f'={name}'], capture_output=True)


def test_result_text_is_never_a_tmux_format(tmp_path, tmux_env):
    "An agent's result (or the project's folder name) holding #(...) runs nothing when tmux shows it"
    pwned = tmp_path / 'PWNED'
    root = tmp_path / f'proj #(touch {tmp_path}/PWNED_DIR)'  # tmux expands new-session's -c as a format too
    (root / '.scope').mkdir(parents=True)
    (root / '.scope' / 'agents.toml').write_text(AG + f'[agents.inj]\ncommand = ["sh", "-c", "echo \'ok #(touch {pwned}) #{{pane_id}}\'"]\n')
    r = hnb('spawn', 't', '--agent', 'inj', cwd=root, env=tmux_env)
    assert r.returncode == 0, r.stderr
    i = r.stdout.strip()
    res = wait_for(lambda: (p := json.loads(hnb('poll', i, cwd=root, env=tmux_env).stdout))['status'] == 'done' and p, what='the agent to end')
    assert res['result'] == f'ok #(touch {pwned}) #{{pane_id}}'
    wait_for(lambda: (root / '.scope/sessions' / i / 'notified').exists(), what='the announcement')
    time.sleep(0.5)  # (a #() job of tmux runs in the background)
    assert not pwned.exists() and not (tmp_path / 'PWNED_DIR').exists()
