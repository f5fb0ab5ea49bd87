"""The agents re-audit's defects E2, E3, E9 that cross processes: session files a repository can commit (a `.lock` or
`.scope/next_id.lock` that is a symlink or a FIFO, an interrupted dialog agent's `worktree` file naming a folder outside
the project) never make the command line hang, end in a traceback, or run anything outside the project."""
import os, subprocess, time
from pathlib import Path

import pytest

from test_agents_audit2 import env, hnb, needs_tmux, spawn_done
from test_agents_ui_guard import tui_in_tmux

pytestmark = pytest.mark.timeout(180)


def plant(r:Path, id:str, **files) -> Path:
    "A session folder `id` in `r` as a repository can commit it"
    d = r / '.scope' / 'sessions' / id
    d.mkdir(parents=True)
    for name, text in (dict(task='hostile', agent='slow', state='running', runner='command', created_at='2026-11-29T09:00:00.000000') | files).items():
        (d / name).write_text(text)
    return d


def one_line_error(p, *words):
    "`p` failed with one line naming `words` (no traceback)"
    assert p.returncode == 1 and 'Traceback' not in p.stderr and len(p.stderr.strip().splitlines()) == 1, (p.returncode, p.stderr[-2000:])
    for w in words: assert w in p.stderr, p.stderr


@pytest.mark.parametrize('kind', ['symlink', 'fifo'])
def test_session_lock_that_is_no_file_shows_damaged(tmp_path, env, kind):
    "E2: a session's `.lock` that is a symlink (or a FIFO): cleanup, poll of the others work; its poll is one line naming it, no hang"
    r = tmp_path / 'p'; (r / '.scope').mkdir(parents=True)
    spawn_done(r, env)
    lock = plant(r, '3') / '.lock'
    if kind == 'symlink': lock.symlink_to('/etc/passwd')
    else: os.mkfifo(lock)
    t = time.monotonic()
    c = hnb('cleanup', cwd=r, env=env, timeout=20)
    assert c.returncode == 0 and c.stdout == 'no worktrees\n', (c.returncode, c.stdout, c.stderr[-2000:])
    assert hnb('poll', '0', cwd=r, env=env, timeout=20).returncode == 0
    one_line_error(hnb('poll', '3', cwd=r, env=env, timeout=20), f'.scope/sessions/3/.lock is a {"symlink" if kind == "symlink" else "FIFO"}', 'remove it')
    assert time.monotonic() - t < 30
    assert (r / '.scope' / 'sessions' / '3' / 'state').read_text() == 'running'  # (nothing changed through it)


@needs_tmux
def test_session_lock_symlink_leaves_the_tree_usable(tmp_path, env):
    "E2: the TUI shows the session whose `.lock` is a symlink damaged among the others, no traceback"
    r = tmp_path / 'p'; (r / '.scope').mkdir(parents=True)
    spawn_done(r, env)
    (plant(r, '3') / '.lock').symlink_to('nowhere')
    name = 'hnbtest-audit4-tui'
    tm, screen = tui_in_tmux(name, r, env, 'damaged', 200)
    time.sleep(3)  # (the TUI checks for dead workers every 2 s: the damaged session too)
    dead = tm('display-message', '-p', '-t', f'={name}:', '#{pane_dead}').stdout.strip()
    screen = tm('capture-pane', '-p', '-t', f'={name}:').stdout
    assert dead == '0' and 'Traceback' not in screen and '.lock is a symlink' in screen and '✓ done' in screen, screen
    tm('kill-session', '-t', f'={name}')


@pytest.mark.parametrize('kind', ['symlink', 'fifo'])
def test_next_id_lock_that_is_no_file(tmp_path, env, kind):
    "E3: `.scope/next_id.lock` as a symlink or FIFO: spawn fails at once in one line naming it, 'remove it'; nothing is made"
    r = tmp_path / 'p'; (r / '.scope').mkdir(parents=True)
    lock = r / '.scope' / 'next_id.lock'
    if kind == 'symlink': lock.symlink_to('/etc/passwd')
    else: os.mkfifo(lock)
    one_line_error(hnb('spawn', 'x', '--agent', 'hi', cwd=r, env=env, timeout=20), f'{r}/.scope/next_id.lock is a', 'remove it')
    assert os.listdir(r / '.scope' / 'sessions') == []
    lock.unlink()
    spawn_done(r, env)  # (once it is removed, spawn works)


def test_planted_worktree_file_is_not_resumed_outside(tmp_path, env):
    "E9: an interrupted dialog agent whose `worktree` file names `../outside`: resume is refused in one line, nothing runs, it stays interrupted"
    r, out = tmp_path / 'p', tmp_path / 'outside'
    out.mkdir()
    d = plant(r, '3', agent='dialog', runner='dialog', state='interrupted', worktree='../outside')
    p = hnb('resume', '3', cwd=r, env=env | dict(ANTHROPIC_API_KEY='sk-test-not-used'), timeout=30)
    one_line_error(p, ".scope/sessions/3/worktree names '../outside'", 'fix or remove it')
    assert (d / 'state').read_text() == 'interrupted' and not (d / 'pid').exists() and os.listdir(out) == []
