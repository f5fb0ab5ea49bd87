"""The agents' re-audit defects that cross processes (E1, E5, E6, E7, E8, E10): session files under `.scope/` are plain
files a repository can commit, so no value read from them reaches git as an option, chooses where git writes, or makes
headlesnb act on anything it did not make. The command line in subprocesses, real git worktrees, a private tmux server."""
import json, subprocess, time
from pathlib import Path

import pytest

from test_agents_audit2 import env, hnb, git_repo, needs_tmux  # (env: the user's agents.toml with `hi` and `slow`, a private tmux server)

pytestmark = pytest.mark.timeout(180)


def spawn(r, env, agent, *args) -> str:
    p = hnb('spawn', 't', '--agent', agent, *args, cwd=r, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def poll(r, env, id) -> dict:
    p = hnb('poll', id, cwd=r, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def wait_done(r, env, *ids):
    w = hnb('wait', *ids, '--timeout', '60', cwd=r, env=env, timeout=90)
    assert w.returncode == 0, w.stdout + w.stderr


def until(cond, timeout=20, what='it'):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (v := cond()): return v
        time.sleep(0.1)
    raise AssertionError(f'timed out waiting for {what}')


def plant(r:Path, id:str, **files) -> Path:
    "A session folder as a repository could commit it"
    d = r / '.scope' / 'sessions' / id
    d.mkdir(parents=True)
    for k, v in (dict(task='planted', runner='command', created_at='2026-11-29T09:00:00.000000') | files).items(): (d / k).write_text(v)
    return d


def git(r, *args) -> str:
    return subprocess.run(['git', *args], cwd=r, check=True, capture_output=True, text=True).stdout


def test_session_values_are_no_git_options(tmp_path, env):
    "E7: a `base` file `--output=FILE` truncated FILE at every poll; a `branch` file is merged only when it is scope/ID"
    r = git_repo(tmp_path / 'p', {'a.py': 'a\n'})
    precious = tmp_path / 'precious.txt'; precious.write_text('precious\n')
    id = spawn(r, env, 'hi', '--worktree')
    wait_done(r, env, id)
    d = r / '.scope' / 'sessions' / id
    (d / 'base').write_text(f'--output={precious}')
    assert poll(r, env, id)['diff'] == 'no changes'
    assert precious.read_text() == 'precious\n'
    (d / 'branch').write_text(f'-F{precious}')
    m = hnb('merge', id, '--stop', cwd=r, env=env)
    assert m.returncode != 0 and f"its branch file names '-F{precious}', not scope/{id}" in m.stderr, m.stdout + m.stderr
    assert git(r, 'log', '--format=%s') == 's\n'  # nothing merged


def test_planted_aborted_session_commits_nothing_of_the_user(tmp_path, env):
    "E1: a committed aborted session whose folder .scope/worktrees/ID is a plain folder of the checkout: abort never commits on the user's branch"
    evil = git_repo(tmp_path / 'evil', {'a.py': 'a\n'})
    plant(evil, '0.7', state='aborted', agent='slow', parent='0', worktree='.scope/worktrees/0.7', branch='main', result='aborted')
    (evil / '.scope' / 'worktrees' / '0.7').mkdir(parents=True)
    (evil / '.scope' / 'worktrees' / '0.7' / 'notes.txt').write_bytes(b'line one\r\nline two\r\n')
    (evil / '.scope' / '.gitignore').write_text('next_id*\n')
    git(evil, 'add', '-f', '.scope'); git(evil, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'ship scope')
    (evil / '.gitattributes').write_text('*.txt text eol=lf\n')  # (a fresh index sees notes.txt changed)
    git(evil, 'add', '.gitattributes'); git(evil, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'attrs')
    r = tmp_path / 'clone'
    subprocess.run(['git', 'clone', '-q', str(evil), str(r)], check=True)
    (r / 'mine.py').write_text('user work\n'); (r / 'a.py').write_text('a\nmore\n'); git(r, 'add', 'mine.py', 'a.py')
    head, staged = git(r, 'rev-parse', 'main'), git(r, 'diff', '--cached', '--name-status')
    id = spawn(r, env, 'hi')
    wait_done(r, env, id)
    a = hnb('abort', id, cwd=r, env=env)
    assert a.returncode == 0, a.stderr
    assert (git(r, 'rev-parse', 'main'), git(r, 'diff', '--cached', '--name-status')) == (head, staged)  # no commit on main, the staging kept
    assert "its work was not committed: its branch file names 'main', not scope/0.7" in poll(r, env, '0.7')['result']


def test_new_files_are_counted_without_reading_through_links(tmp_path, env):
    "E8: a /dev/zero link and a 2 GB file in a worktree: poll answers in a small address space, saying +?"
    r = git_repo(tmp_path / 'p', {'a.py': 'a\n'})
    id = spawn(r, env, 'slow', '--worktree')
    wt = r / '.scope' / 'worktrees' / id
    until(lambda: wt.is_dir(), what='the worktree')
    (wt / 'zero').symlink_to('/dev/zero')
    with open(wt / 'dataset.bin', 'wb') as f: f.truncate(2 << 30)
    (wt / 'new.txt').write_text('1\n2\n3\n')
    p = hnb('poll', id, cwd=r, env=env, limit=1_500_000_000)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout)['diff'] == '3 files changed, +? -0'
    (wt / 'dataset.bin').unlink(); (wt / 'zero').unlink()
    assert poll(r, env, id)['diff'] == '1 file changed, +3 -0'
    hnb('abort', id, cwd=r, env=env)


@needs_tmux
def test_scope_named_session_is_never_acted_on(tmp_path, env):
    "E5: a planted session naming `scope-0_1` (scope's name for another project's agent) is aborted, that session left alone"
    r = tmp_path / 'p'; (r / '.scope').mkdir(parents=True)
    spawn(r, env, 'slow')
    plant(r, '0.1', state='running', agent='slow', parent='0', tmux='scope-0_1', pid='1 1')
    subprocess.run(['tmux', 'new-session', '-d', '-s', 'scope-0_1', 'sleep 600'], env=env, check=True)
    s = poll(r, env, '0.1')
    assert s['status'] == 'aborted' and "its tmux file names session 'scope-0_1'" in s['result'] and 'left alone' in s['result'], s
    assert not (r / '.scope' / 'sessions' / '0.1' / 'minder.log').exists()  # no minder: nothing typed into it
    assert hnb('abort', '0', cwd=r, env=env).returncode == 0
    assert subprocess.run(['tmux', 'has-session', '-t', '=scope-0_1'], env=env).returncode == 0


@needs_tmux
def test_moved_project_says_how_to_stop_its_agents(tmp_path, env):
    "E10: a project moved with a running agent: not called aborted; its result names the session and how to stop it"
    r = tmp_path / 'm1'; (r / '.scope').mkdir(parents=True)
    id = spawn(r, env, 'slow')
    until(lambda: poll(r, env, id)['status'] == 'running', what='the agent to run')
    name = (r / '.scope' / 'sessions' / id / 'tmux').read_text().strip()
    assert name.startswith('scope-')
    r2 = tmp_path / 'm1b'; r.rename(r2)
    s = poll(r2, env, id)
    assert s['result'].startswith('not watched any more') and f'tmux kill-session -t ={name}' in s['result'], s
    assert subprocess.run(['tmux', 'has-session', '-t', f'={name}'], env=env).returncode == 0


def test_worktree_link_is_said_and_cleanup_goes_on(tmp_path, env):
    "E6: abort says the work of a worktree that became a link was not committed; cleanup keeps that one and removes the merged one"
    r = git_repo(tmp_path / 'p', {'a.py': 'a\n'})
    done = spawn(r, env, 'hi', '--worktree')
    wait_done(r, env, done)
    m = hnb('merge', done, '--stop', cwd=r, env=env)
    assert m.returncode == 0, m.stderr
    id = spawn(r, env, 'slow', '--worktree')
    wt = r / '.scope' / 'worktrees' / id
    until(lambda: wt.is_dir(), what='the worktree')
    (wt / 'wip.txt').write_text('work\n')
    wt.rename(tmp_path / 'moved'); wt.symlink_to(tmp_path / 'moved')
    assert hnb('abort', id, cwd=r, env=env).returncode == 0
    res = poll(r, env, id)['result']
    assert 'its work was not committed' in res and 'is a symlink' in res, res
    c = hnb('cleanup', cwd=r, env=env)
    assert c.returncode == 0, c.stderr
    assert f'removed .scope/worktrees/{done} (agent {done}' in c.stdout and f'kept .scope/worktrees/{id} (agent {id})' in c.stdout, c.stdout
    assert 'is a symlink' in c.stdout, c.stdout
    assert not (r / '.scope' / 'worktrees' / done).exists()
