"""Agents audit (D1, D2, D7, D8, D11, D13, D16, D20, D21): hostile `.scope` files (a symlinked worktrees folder, a tmux
name planted in a session, an agents file that is a FIFO or /dev/zero), an abort killed half-way, a finished CLI left
open, a slow notify command and a task too long for a command line.
Real parts: the command line in subprocesses, git, a private tmux server (its own TMUX_TMPDIR).
"""
import json, os, resource, signal, subprocess, sys, time
from pathlib import Path

import pytest

from headlesnb.agents import runners
from headlesnb.agents.store import SessionStore, tmux_name
from headlesnb.agents.tree import AgentManager
from test_agents_guard import wait_for

pytestmark = pytest.mark.timeout(180)
HNB_ARGV = [sys.executable, '-m', 'headlesnb.fronts.cli']
AG = '[agents.hi]\ncommand = ["sh", "-c", "echo hi"]\n[agents.forever]\ncommand = ["sleep", "3600"]\n' \
     '[agents.echo]\ncommand = ["echo", "{prompt}"]\n' \
     '[agents.writer]\ncommand = ["sh", "-c", "echo work > wip.txt; sleep 3600"]\n'


def hnb(*args, cwd, env, timeout=60, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run(HNB_ARGV + list(args), cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)


def sessions() -> set:
    r = subprocess.run(['tmux', 'list-sessions', '-F', '#{session_name}'], capture_output=True, text=True)
    return set(r.stdout.split()) if r.returncode == 0 else set()


def alive(pid:int) -> bool:
    try: return Path(f'/proc/{pid}/stat').read_text().split(') ')[1][0] not in 'ZX'
    except OSError: return False


@pytest.fixture
def env(tmp_path, monkeypatch):
    "A private tmux server and config folder (AG is the user's own agents file: no trust needed); a terminal outside tmux"
    d = tmp_path / 'tmux'
    d.mkdir()
    monkeypatch.setenv('TMUX_TMPDIR', str(d))
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'xdg'))
    for k in ('TMUX', 'TMUX_PANE', 'SCOPE_SESSION_ID', 'HEADLESNB_ROOT'): monkeypatch.delenv(k, raising=False)
    (tmp_path / 'xdg' / 'headlesnb').mkdir(parents=True)
    (tmp_path / 'xdg' / 'headlesnb' / 'agents.toml').write_text(AG)
    subprocess.run(['tmux', 'new-session', '-d', '-s', 'keep', 'sleep', '600'], check=True)  # (the server stays up between agents)
    yield dict(os.environ)
    for name in sessions(): subprocess.run(['tmux', 'kill-session', '-t', f'={name}'], capture_output=True)  # (our private server)


def repo(path:Path) -> Path:
    path.mkdir(parents=True)
    for args in (['init', '-q', '-b', 'main'], ['config', 'user.email', 't@t'], ['config', 'user.name', 't']):
        subprocess.run(['git', *args], cwd=path, check=True)
    (path / 'a.py').write_text('a\n')
    subprocess.run(['git', 'add', '-A'], cwd=path, check=True)
    subprocess.run(['git', 'commit', '-qm', 's'], cwd=path, check=True)
    return path


def spawned(r, env, *args) -> str:
    p = hnb('spawn', 't', *args, cwd=r, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_symlinked_worktrees_folder_is_refused(tmp_path, env):
    "D20: a repository that commits .scope/worktrees as a symlink gets no checkout and no agent outside the project: spawn refuses, naming it"
    victim = tmp_path / 'victim'
    victim.mkdir()
    (victim / 'data.txt').write_text('keep\n')
    r = repo(tmp_path / 'p')
    (r / '.scope').mkdir()
    (r / '.scope' / 'worktrees').symlink_to(victim)
    subprocess.run(['git', 'add', '-f', '.scope/worktrees'], cwd=r, check=True)
    subprocess.run(['git', 'commit', '-qm', 'ship link'], cwd=r, check=True)
    p = hnb('spawn', 'x', '--agent', 'hi', '--worktree', cwd=r, env=env)
    assert p.returncode == 1 and p.stderr.strip().count('\n') == 0, (p.stdout, p.stderr)
    assert f"{r / '.scope' / 'worktrees'} is a symlink (to {victim})" in p.stderr, p.stderr
    assert sorted(os.listdir(victim)) == ['data.txt']  # nothing made there
    assert len(subprocess.run(['git', 'worktree', 'list'], cwd=r, capture_output=True, text=True).stdout.splitlines()) == 1
    assert not (r / '.scope' / 'sessions').exists() or not os.listdir(r / '.scope' / 'sessions')  # (no session either)


def plant(r:Path, id:str, tmux:str, state='running'):
    "A session folder as a repository (or an agent) can write it, naming tmux session `tmux`"
    d = r / '.scope' / 'sessions' / id
    d.mkdir(parents=True)
    for name, text in dict(task='hostile', task_type='implement', agent='forever', state=state, runner='command', tmux=tmux,
                           parent='', activity='', result='', created_at='2026-11-29T09:00:00.000000').items():
        (d / name).write_text(text)


def test_planted_tmux_name_is_never_killed(tmp_path, env):
    "D21: abort, the dead-agent check, merge --stop's end of a CLI and the minder act only on the session named scope-HASH-ID for this root and id"
    r = tmp_path / 'p'
    plant(r, '0', 'victim')
    subprocess.run(['tmux', 'new-session', '-d', '-s', 'victim', 'sleep', '600'], check=True)
    a = hnb('abort', '0', cwd=r, env=env)
    assert a.returncode == 0, a.stderr
    assert 'victim' in sessions()  # the user's own session lives on
    p = json.loads(hnb('poll', '0', cwd=r, env=env).stdout)
    assert p['status'] == 'aborted' and "its tmux file names session 'victim', not scope-" in p['result'], p
    # a finished agent whose CLI is ended (merge --stop, the minder): the planted name is not touched either
    plant(r, '1', 'victim', state='done')
    AgentManager(r)._end_cli(SessionStore(r).load('1'))
    assert 'victim' in sessions()
    # the minder types nothing into it and ends nothing: the agent is seen gone, saying why
    plant(r, '2', 'victim')
    subprocess.run([sys.executable, '-m', 'headlesnb.agents.minder', str(r), '2'], env=env, timeout=30, capture_output=True)
    assert 'victim' in sessions()
    assert "its tmux file names session 'victim'" in SessionStore(r).load('2')['result']
    assert subprocess.run(['tmux', 'capture-pane', '-p', '-t', '=victim:'], capture_output=True, text=True).stdout.strip() == ''


def test_agents_file_fifo_or_dev_zero_is_refused_at_once(tmp_path, env):
    "D1, D2: a project's .scope/agents.toml that is a FIFO or a link to /dev/zero: spawn and trust answer at once, one line naming it"
    r = tmp_path / 'p'
    (r / '.scope').mkdir(parents=True)
    f = r / '.scope' / 'agents.toml'
    os.mkfifo(f)
    for args in (('spawn', 'x'), ('spawn', 'x', '--agent', 'hi'), ('trust',)):
        p = hnb(*args, cwd=r, env=env, timeout=20)  # (the old code waited for a writer forever)
        assert p.returncode == 1 and p.stderr.strip().count('\n') == 0 and f'{f} is not a regular file' in p.stderr, (args, p.stderr)
    f.unlink(); f.symlink_to('/dev/zero')
    cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))  # (the old code read it until memory ran out)
    for args in (('spawn', 'x', '--agent', 'hi'), ('trust',)):
        p = hnb(*args, cwd=r, env=env, timeout=60, preexec_fn=cap)
        assert p.returncode == 1 and 'Traceback' not in p.stderr and f'{f} is not a regular file' in p.stderr, (args, p.stderr[-500:])


def test_second_abort_commits_what_a_killed_abort_left(tmp_path, env):
    "D11: an abort killed after it marked the agent aborted (before its WIP commit and its kill): a later abort ends the CLI and commits the work"
    r = repo(tmp_path / 'p')
    i = spawned(r, env, '--agent', 'writer', '--worktree')
    wt = r / '.scope' / 'worktrees' / i
    wait_for(lambda: (wt / 'wip.txt').exists(), what='the agent to write')
    st = SessionStore(r)
    assert st.transition(i, 'aborted', frm=('pending', 'running'))  # (what the killed abort had done)
    name = tmux_name(i, r)
    assert name in sessions()
    a = hnb('abort', i, cwd=r, env=env)
    assert a.returncode == 0, a.stderr
    assert name not in sessions()
    log = subprocess.run(['git', 'log', '-1', '--format=%s', f'scope/{i}'], cwd=r, capture_output=True, text=True).stdout.strip()
    assert log == 'wip (aborted): t', log
    assert subprocess.run(['git', 'show', f'scope/{i}:wip.txt'], cwd=r, capture_output=True, text=True).stdout == 'work\n'


def test_abort_ends_the_open_cli_of_a_done_agent(tmp_path, env):
    "D16: an agent seen done (a Stop hook) whose CLI stays open, without a worktree: abort ends the CLI, keeping its done state and result"
    r = tmp_path / 'p'
    r.mkdir()
    i = spawned(r, env, '--agent', 'forever')
    name = tmux_name(i, r)
    wait_for(lambda: name in sessions(), what='its tmux session')
    assert SessionStore(r).transition(i, 'done', activity='', result='ok answer')  # (as Claude Code's Stop hook does)
    a = hnb('abort', i, cwd=r, env=env)
    assert a.returncode == 0, a.stderr
    assert name not in sessions()
    p = json.loads(hnb('poll', i, cwd=r, env=env).stdout)
    assert (p['status'], p['result']) == ('done', 'ok answer'), p


def test_slow_notify_runs_in_the_background_and_is_killed_with_its_children(tmp_path, env, monkeypatch):
    "D7, D8: announcing never waits for the notify command; one that runs too long is killed with the processes it started"
    r = tmp_path / 'p'
    r.mkdir()
    st = SessionStore(r)
    i = st.create('', dict(task='t', state='done', result='fine', agent='x'))
    pidf = tmp_path / 'child'
    monkeypatch.setattr(runners, 'NOTIFY_TIMEOUT', 2, raising=False)  # (the old code had no such setting)
    t = time.monotonic()
    assert runners.announce(r, st.load(i), notify=['sh', '-c', f'sleep 300 & echo $! > {pidf}; wait', 'x']) == 'done'
    assert time.monotonic() - t < 5  # (the old code waited 30 s for it)
    child = int(wait_for(lambda: pidf.exists() and pidf.read_text().strip(), what="the notify command's child"))
    log = wait_for(lambda: 'timed out' in (t := runners.read_text(st.path(i) / 'notify.log')) and t, timeout=30, what='the timeout in notify.log')
    assert "'sh' timed out after 2 s: it was killed with its process group" in log, log
    wait_for(lambda: not alive(child), timeout=5, what='its child to be killed')


def test_task_too_long_for_the_command_line(tmp_path, env):
    "D13: a task longer than a command line takes: the error says so and what to do"
    r = tmp_path / 'p'
    r.mkdir()
    p = hnb('spawn', 'abcdefgh ' * 2000, '--agent', 'echo', cwd=r, env=env)
    assert p.returncode == 1 and "the task is too long for agent echo's command line" in p.stderr and '--input FILE' in p.stderr, p.stderr
