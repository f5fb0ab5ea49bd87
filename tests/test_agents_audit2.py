"""The agents audit's defects that cross processes (D3, D4, D5, D6, D12, D14, D15, D19, D22, D25):
the command line in subprocesses, the TUI in a real tmux pane, git worktrees. Each test's tmux server is its own
(TMUX_TMPDIR in a temp folder), and the agents come from the user's agents.toml in a private XDG_CONFIG_HOME."""
import json, os, resource, subprocess, sys, time
from pathlib import Path

import pytest

from headlesnb.agents.runners import tmux_available, trust_agents_file
from test_agents_ui_guard import tui_in_tmux

pytestmark = pytest.mark.timeout(180)
CLI = [sys.executable, '-m', 'headlesnb.fronts.cli']
AG = '[agents.hi]\ncommand = ["sh", "-c", "echo hi"]\n[agents.slow]\ncommand = ["sleep", "60"]\n'
needs_tmux = pytest.mark.skipif(not tmux_available(), reason='needs tmux')


@pytest.fixture
def env(tmp_path, monkeypatch):
    "The environment of the commands: the user's agents.toml (hi, slow), a private tmux server (killed at the end), no agent's variables"
    xdg = tmp_path / 'xdg'
    (xdg / 'headlesnb').mkdir(parents=True)
    (xdg / 'headlesnb' / 'agents.toml').write_text(AG)
    (tmp_path / 'tmux').mkdir()
    monkeypatch.setenv('XDG_CONFIG_HOME', str(xdg))
    e = {k: v for k, v in os.environ.items() if k not in ('TMUX', 'TMUX_PANE', 'SCOPE_SESSION_ID', 'HEADLESNB_ROOT')}
    e |= dict(XDG_CONFIG_HOME=str(xdg), TMUX_TMPDIR=str(tmp_path / 'tmux'))
    yield e
    subprocess.run(['tmux', 'kill-server'], env=e, capture_output=True)


def hnb(*args, cwd, env, limit=None, timeout=60) -> subprocess.CompletedProcess:
    "`headlesnb ARGS` in `cwd` (`limit`: its address space at most, in bytes)"
    pre = (lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))) if limit else None
    return subprocess.run(CLI + list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=pre)


def spawn_done(r, env, n=1) -> list:
    "Spawn agent `hi` `n` times in `r`, and wait until they are done; their ids"
    ids = []
    for _ in range(n):
        p = hnb('spawn', 't', '--agent', 'hi', cwd=r, env=env)
        assert p.returncode == 0, p.stderr
        ids.append(p.stdout.strip())
    w = hnb('wait', *ids, '--timeout', '60', cwd=r, env=env, timeout=90)
    assert w.returncode == 0, w.stdout + w.stderr
    return ids


def git_repo(path:Path, files:dict) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items(): (path / name).parent.mkdir(parents=True, exist_ok=True); (path / name).write_text(text)
    for args in (['init', '-q', '-b', 'main'], ['add', '-f', '.'], ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 's']):
        subprocess.run(['git', *args], cwd=path, check=True, capture_output=True)
    return path


def test_huge_session_file_is_refused_not_read(tmp_path, env):
    "D15: a 2 GB `result` or `task` is never read whole: poll and wait answer at once, the agent shown damaged, no MemoryError traceback"
    r = tmp_path / 'p'; (r / '.scope').mkdir(parents=True)
    a, b = spawn_done(r, env, 2)
    for i, name in ((a, 'result'), (b, 'task')):
        f = r / '.scope' / 'sessions' / i / name
        f.unlink()
        with open(f, 'wb') as fh: fh.truncate(2 << 30)  # (sparse: no disk used)
    t = time.monotonic()
    p = hnb('poll', a, cwd=r, env=env, limit=1536 << 20)
    assert p.returncode == 0 and 'Traceback' not in p.stderr, p.stderr[-2000:]
    assert f'damaged: in .scope/sessions/{a}/, result is larger than' in json.loads(p.stdout)['activity']
    w = hnb('wait', b, '--timeout', '1', cwd=r, env=env, limit=1536 << 20)
    assert 'Traceback' not in w.stderr and 'task is larger than' in w.stdout, (w.returncode, w.stderr[-2000:])
    assert time.monotonic() - t < 30


def test_damaged_next_id_makes_no_orphan(tmp_path, env):
    "D4: a `.scope/next_id` of 100 digits (or 20) is counted again from the folders: spawn works, no folder that is no session is left"
    r = tmp_path / 'p'; (r / '.scope').mkdir(parents=True)
    spawn_done(r, env)
    for bad, want in (('9' * 100, '1'), ('8' * 20, '2')):
        (r / '.scope' / 'next_id').write_text(bad + '\n')
        p = hnb('spawn', 'x', '--agent', 'hi', cwd=r, env=env)
        assert p.returncode == 0 and p.stdout.strip() == want, (p.stdout, p.stderr)
    assert sorted(n for n in os.listdir(r / '.scope' / 'sessions') if not n.startswith('.')) == ['0', '1', '2']
    assert (r / '.scope' / 'next_id').read_text() == '3'


@needs_tmux
def test_one_damaged_session_leaves_tree_and_cleanup_usable(tmp_path, env):
    "D19: a session whose `state` is a symlink: `cleanup` works, and the TUI shows it damaged among the others, without a traceback, until q"
    r = tmp_path / 'p'; (r / '.scope').mkdir(parents=True)
    spawn_done(r, env, 2)
    st = r / '.scope' / 'sessions' / '1' / 'state'
    st.unlink(); st.symlink_to('/etc/hostname')
    c = hnb('cleanup', cwd=r, env=env)
    assert c.returncode == 0 and c.stdout == 'no worktrees\n', (c.returncode, c.stdout, c.stderr)
    name = 'hnbtest-audit2-tui'
    tm, screen = tui_in_tmux(name, r, env, 'damaged', 200)
    assert 'damaged' in screen, screen
    time.sleep(5)  # (the TUI checks for dead workers every 2 s: the damaged session is checked too)
    dead = tm('display-message', '-p', '-t', f'={name}:', '#{pane_dead}').stdout.strip()
    screen = tm('capture-pane', '-p', '-t', f'={name}:').stdout
    assert dead == '0' and 'Traceback' not in screen and 'damaged' in screen and '✓ done' in screen, screen
    tm('kill-session', '-t', f'={name}')


@needs_tmux
def test_worktree_agent_spawns_into_its_project(tmp_path, env):
    "D25: in an agent's worktree of a project that ships .scope/agents.toml, `headlesnb spawn` adds to the project's tree, under the agent"
    r = git_repo(tmp_path / 'p', {'a.py': 'a\n', '.scope/agents.toml': '[agents.local]\ncommand = ["true"]\n'})
    trust_agents_file(r)
    p = hnb('spawn', 'parent', '--agent', 'slow', '--worktree', cwd=r, env=env)
    assert p.returncode == 0 and p.stdout.strip() == '0', p.stderr
    wt = r / '.scope' / 'worktrees' / '0'
    assert (wt / '.scope' / 'agents.toml').exists()  # (the checkout holds the project's agents file, as the audit found)
    try:
        c = hnb('spawn', 'child', '--agent', 'hi', cwd=wt, env=env | dict(SCOPE_SESSION_ID='0', HEADLESNB_ROOT=str(r)))
        assert c.returncode == 0 and c.stdout.strip() == '0.0', c.stderr
        c = hnb('spawn', 'child', '--agent', 'hi', cwd=wt / '.scope', env=env | dict(SCOPE_SESSION_ID='0'))  # (found from the folder alone)
        assert c.returncode == 0 and c.stdout.strip() == '0.1', c.stderr
        assert not (wt / '.scope' / 'sessions').exists()
        assert json.loads(hnb('poll', '0.1', cwd=r, env=env).stdout)['parent'] == '0'
    finally: hnb('abort', '0', cwd=r, env=env)


def test_scope_session_id_of_another_root_is_no_parent(tmp_path, env):
    "D22: an agent of project A (its HEADLESNB_ROOT) spawning in project B: a top-level agent of B, not a child of B's agent with its id"
    a, b = tmp_path / 'a', tmp_path / 'b'
    for x in (a, b): (x / '.scope').mkdir(parents=True); spawn_done(x, env)
    p = hnb('spawn', 'from a', '--agent', 'hi', cwd=b, env=env | dict(SCOPE_SESSION_ID='0', HEADLESNB_ROOT=str(a)))
    assert p.returncode == 0 and p.stdout.strip() == '1', (p.stdout, p.stderr)
    p = hnb('spawn', 'from b', '--agent', 'hi', cwd=b, env=env | dict(SCOPE_SESSION_ID='0', HEADLESNB_ROOT=str(b)))
    assert p.returncode == 0 and p.stdout.strip() == '0.0', (p.stdout, p.stderr)


def test_root_that_is_missing_or_a_file(tmp_path, env):
    "D12: spawn makes no root: a mistyped --root is refused (nothing made); a root that is a file is said to be one, without a Python repr"
    (tmp_path / 'f.sh').write_text('x')
    p = hnb('spawn', 'x', '--agent', 'hi', '--root', 'typo/dir', cwd=tmp_path, env=env)
    assert p.returncode == 1 and p.stdout == '' and p.stderr.strip() == f"headlesnb spawn: root {tmp_path.resolve()}/typo/dir does not exist: create it or fix --root", p.stderr
    assert not (tmp_path / 'typo').exists()
    for args in (('spawn', 'x', '--agent', 'hi'), ('poll', '0')):
        p = hnb(*args, '--root', 'f.sh', cwd=tmp_path, env=env)
        assert p.returncode == 1 and p.stderr.strip() == f"headlesnb {args[0]}: root {tmp_path.resolve()}/f.sh is a file, not a folder: fix --root", p.stderr


def test_wait_exit_codes_are_those_its_help_gives(tmp_path, env):
    "D5: a bad or unknown id is an error (exit 1, no JSON), told apart from a timeout (2), and `wait --help` says so"
    r = tmp_path / 'p'; (r / '.scope').mkdir(parents=True)
    spawn_done(r, env)
    h = ' '.join(hnb('wait', '--help', cwd=r, env=env).stdout.split())
    assert 'an error, such as a bad or unknown id: exit 1, no JSON' in h and 'a bad argument: exit 2' not in h, h
    for args in (('../x',), ('99',), ('0', '99')):
        p = hnb('wait', *args, cwd=r, env=env)
        assert p.returncode == 1 and p.stdout == '', (args, p.returncode, p.stdout, p.stderr)


def test_committed_scope_symlink_is_named(tmp_path, env):
    "D6: a repository's `.scope` that is a symlink: the error names the link and where it goes, and says to remove it (no race, no reload)"
    (tmp_path / 'elsewhere').mkdir()
    q = tmp_path / 'q'; q.mkdir(); (q / '.scope').symlink_to('../elsewhere')
    p = hnb('spawn', 'x', '--agent', 'hi', cwd=q, env=env)
    err = p.stderr.strip()
    assert p.returncode == 1 and f"{q.resolve()}/.scope is a symlink (to ../elsewhere)" in err and 'remove it' in err, err
    assert 'reload' not in err and 'since it was opened' not in err, err
    assert os.listdir(tmp_path / 'elsewhere') == []


def test_scope_in_a_parent_folder(tmp_path, env):
    "D14: a git repository below a stray .scope/ has its own tree; an error in a folder the stray .scope/ captures names that root and how it was found"
    outer = tmp_path / 'outer'; (outer / '.scope').mkdir(parents=True)
    proj = git_repo(outer / 'proj', {'a.py': 'a\n'})
    p = hnb('spawn', 'y', '--agent', 'hi', cwd=proj, env=env)
    assert p.returncode == 0 and (proj / '.scope' / 'sessions' / p.stdout.strip()).is_dir(), p.stderr
    assert not (outer / '.scope' / 'sessions').exists()
    plain = outer / 'plain'; plain.mkdir()
    p = hnb('spawn', 'x', '--agent', 'hi', '--worktree', cwd=plain, env=env)
    assert p.returncode == 1 and p.stderr.strip().endswith(
        f"(root {outer.resolve()}: the nearest folder upwards holding .scope/; give --root for another)"), p.stderr
    hnb('wait', '0', '--timeout', '30', cwd=proj, env=env)


@needs_tmux
def test_ctrl_c_in_the_tree_outside_tmux_exits_130(tmp_path, env):
    "D3: `headlesnb agents` run outside tmux (it attaches to a tmux session of its own): Ctrl-C ends it with 130, as the README says"
    r = tmp_path / 'p'; (r / '.scope').mkdir(parents=True)
    spawn_done(r, env)
    rc = tmp_path / 'rc'
    term = lambda *a: subprocess.run(['tmux', '-L', 'hnbaudit2term', *a], env=env, capture_output=True, text=True, timeout=30)
    script = f'{" ".join(CLI)} agents --root {r}; echo $? > {rc}'
    try:  # a terminal: a pane of another tmux server, with TMUX unset in it, as in a plain terminal
        assert term('new-session', '-d', '-s', 'term', '-x', '160', '-y', '20', 'env', '-u', 'TMUX', '-u', 'TMUX_PANE', 'sh', '-c', script).returncode == 0
        screen, end = '', time.monotonic() + 60
        while time.monotonic() < end and 'headlesnb agents' not in screen:
            time.sleep(0.3)
            screen = term('capture-pane', '-p', '-t', '=term:').stdout
        assert 'headlesnb agents' in screen, screen
        time.sleep(1)
        end = time.monotonic() + 30
        while time.monotonic() < end and not rc.exists():
            term('send-keys', '-t', '=term:', 'C-c')
            time.sleep(1)
        assert rc.exists() and rc.read_text().strip() == '130', (rc.read_text() if rc.exists() else None, term('capture-pane', '-p', '-t', '=term:').stdout)
    finally: term('kill-server')
