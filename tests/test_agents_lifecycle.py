"""Agents that never lose work (issue 29), with real parts: the real Claude Code CLI in tmux against the fake Messages
API (tests/fake_anthropic.py), a private tmux server and a fresh HOME, detached headlesnb processes killed with
SIGKILL, git worktrees holding every kind of file, and the notifications as a terminal sees them.
"""
import json, os, signal, subprocess, sys, threading, time
from pathlib import Path

import pytest

from headlesnb.agents.tree import AgentManager, SessionStore
from headlesnb.agents.store import tmux_name
from headlesnb.agents.runners import tmux_sessions, proc_start, git, trust_agents_file
from fake_anthropic import FakeAnthropic
from test_agents import hnb, wait_for, FAKE, HNB_ARGV

pytestmark = pytest.mark.timeout(240)
CC_VERSION = '2.1.332'
CC = Path(os.environ.get('HEADLESNB_CLAUDE_CODE') or Path.home() / f'.cache/headlesnb/claude-code-{CC_VERSION}/node_modules/.bin/claude')
KEY = 'sk-ant-api03-TESTKEY-do-not-log-0123456789'
PY = json.dumps(sys.executable)


def tm(*args) -> subprocess.CompletedProcess:
    return subprocess.run(['tmux', *args], capture_output=True, text=True)


def pane(name) -> str:
    return tm('capture-pane', '-p', '-t', f'={name}:').stdout


@pytest.fixture
def tmux_server(tmp_path, monkeypatch):
    "A private tmux server (TMUX_TMPDIR), no tmux of the caller's; killed at the end"
    d = tmp_path / 'tmux'
    d.mkdir()
    monkeypatch.setenv('TMUX_TMPDIR', str(d))
    for k in ('TMUX', 'TMUX_PANE', 'SCOPE_SESSION_ID'): monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'xdg'))  # (no agents.toml of the user's)
    monkeypatch.setenv('FAKE_AGENT_HOOK', json.dumps(HNB_ARGV + ['hook']))
    yield d
    tm('kill-server')


def repo(path, agents_toml='') -> Path:
    "A git repository with one commit, `.scope/agents.toml` holding `agents_toml` (trusted: the user read it)"
    path.mkdir(parents=True)
    (path / 'app.py').write_text('print("hello")\n')
    (path / '.gitignore').write_text('*.log\n')
    env = dict(os.environ, GIT_AUTHOR_NAME='T', GIT_AUTHOR_EMAIL='t@x', GIT_COMMITTER_NAME='T', GIT_COMMITTER_EMAIL='t@x')
    for args in (['init', '-q', '-b', 'main'], ['add', '-A'], ['commit', '-q', '-m', 'start']):
        subprocess.run(['git', *args], cwd=path, check=True, env=env)
    (path / '.scope').mkdir()
    (path / '.scope' / 'agents.toml').write_text(agents_toml)
    trust_agents_file(path)
    return path


def explain(am, id) -> str:
    "What a failing test shows: the agent's poll, its pane and its minder's log"
    s = am.store.load(id)
    return (f"poll: {am.poll(id)}\npane:\n{pane(s['tmux']) if s['tmux'] else ''}\nminder.log:\n"
            f"{(am.store.path(id) / 'minder.log').read_text() if (am.store.path(id) / 'minder.log').exists() else ''}")


def watch(am, id, cond, what, timeout=60):
    "wait_for `cond`, else fail with `explain`"
    try: return wait_for(cond, timeout=timeout, what=what)
    except AssertionError as e: raise AssertionError(f'{e}\n{explain(am, id)}') from None


def orchestrator(tmp_path, monkeypatch):
    "A tmux session standing for the user's (a client attached through `script`, its pane's output piped to a file); the spawner's TMUX/TMUX_PANE point at it"
    tm('new-session', '-d', '-s', 'orch', '-x', '160', '-y', '30', 'sleep 600')
    pane_id = tm('display-message', '-p', '-t', 'orch', '#{pane_id}').stdout.strip()
    sock = tm('display-message', '-p', '-t', 'orch', '#{socket_path}').stdout.strip()
    piped, screen = tmp_path / 'orch.bytes', tmp_path / 'orch.client'
    tm('pipe-pane', '-o', '-t', pane_id, f'cat >> {piped}')
    client = subprocess.Popen(['script', '-qfc', f'tmux -S {sock} attach -t orch', '/dev/null'], stdin=subprocess.PIPE,
                              stdout=open(screen, 'wb'), stderr=subprocess.STDOUT)
    wait_for(lambda: tm('list-clients').stdout.strip(), what='the client to attach')
    monkeypatch.setenv('TMUX', f'{sock},1,0')
    monkeypatch.setenv('TMUX_PANE', pane_id)
    return piped, screen, client


# ---------------------------------------------------------------- the real Claude Code
@pytest.mark.skipif(os.environ.get('HEADLESNB_NO_CLAUDE_CODE') == '1', reason='HEADLESNB_NO_CLAUDE_CODE=1')
def test_claude_code_screens_then_task_then_done_without_hooks(tmp_path, tmux_server, monkeypatch):
    """Claude Code in a worktree of a project the user trusts in Claude Code (no trust dialog: Claude Code 2.1.332 counts
    the main folder's trust for its worktrees; one shown would be answered), its API key question is the user's
    (needs input, the screen in poll, no request sent); once answered, the task goes in byte for byte; with no hooks
    installed the agent is done from its screen; everyone is told: tmux message, OSC 9/777 on the spawner's pane,
    the notify command"""
    assert CC.exists(), f'Claude Code {CC_VERSION} is not installed at {CC}: run tests/setup.sh (or set HEADLESNB_NO_CLAUDE_CODE=1 to skip)'
    home = tmp_path / 'home'
    home.mkdir()
    # (a first run's onboarding starts with a connectivity check of api.anthropic.com, which this machine cannot
    #  reach: Claude Code then exits; the onboarding is marked done so that the screens after it are met)
    told = tmp_path / 'told.txt'
    notify = [sys.executable, '-c', 'import sys; open(sys.argv[1], "a").write(" | ".join(sys.argv[2:]) + "\\n")', str(told)]
    root = repo(tmp_path / 'proj', f'notify = {json.dumps(notify)}\n')
    (home / '.claude.json').write_text(json.dumps({'hasCompletedOnboarding': True, 'projects': {str(root): {'hasTrustDialogAccepted': True}}}))
    piped, screen, client = orchestrator(tmp_path, monkeypatch)
    task = 'Answer with the word DONE.\n  "double" and \'single\' quotes, $HOME `date` $(true) && | > < ; \\ backslash\nlast line: ünïcode ✓'

    def reply(body):
        if not body.get('tools'): return 'ok'  # (a side request)
        return 'All done: DONE'
    with FakeAnthropic([reply] * 10, validate=False) as fake:
        for k, v in dict(HOME=str(home), ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY=KEY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC='1',
                         DISABLE_TELEMETRY='1', DISABLE_AUTOUPDATER='1', PATH=f"{CC.parent}:{os.environ['PATH']}").items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv('CLAUDE_CONFIG_DIR', raising=False)
        r = hnb('spawn', task, '--agent', 'claude-code', '--worktree', root=root)
        assert r.returncode == 0 and r.stdout == '0\n', r.stderr
        assert "hooks are not installed" in r.stderr and 'headlesnb setup' in r.stderr  # warned: done will come from the screen
        am = AgentManager(root)
        name = am.poll('0')['tmux']
        assert name == tmux_name('0', root) and name in tmux_sessions()
        s = watch(am, '0', lambda: (p := am.poll('0'))['activity'] == 'needs input' and p, what='the API key question')
        assert 'Detected a custom API key' in s['screen'] and s['status'] == 'running' and s['delivered'] == ''
        assert not [b for b in fake.requests if b.get('tools')], 'no task before the user answered'
        wait_for(lambda: told.exists() and '0 | needs_input | ' in told.read_text(), what='the notify command (needs input)')
        polled = json.loads(hnb('poll', '0', root=root, check=True).stdout)  # (the command line shows the same)
        assert 'Detected a custom API key' in polled['screen'] and 'delivered' not in polled
        tm('send-keys', '-t', f'={name}:', 'Up', 'Enter')  # the user: "Yes", use this key
        r = hnb('wait', '0', '--timeout', '90', root=root)
        assert r.returncode == 0, (r.stdout, r.stderr)
        res = json.loads(r.stdout)['results'][0]
        assert (res['status'], res['result'], res['error']) == ('done', 'All done: DONE', False), res
        first = next(b for b in fake.requests if b.get('tools'))
        texts = [blk['text'] for m in first['messages'] if m['role'] == 'user' for blk in (m['content'] if isinstance(m['content'], list) else [dict(type='text', text=m['content'])])
                 if blk.get('type') == 'text']
        assert any(task in t for t in texts), texts  # byte for byte
        assert am.poll('0')['delivered']
        wait_for(lambda: '0 | done | All done: DONE' in told.read_text(), what='the notify command (done)')
        wait_for(lambda: b'agent 0 done: All done: DONE' in screen.read_bytes(), what="the tmux message on the user's client")
        wait_for(lambda: b'\x1b\x1b]9;headlesnb: agent 0 done: All done: DONE\x07' in piped.read_bytes(), what='OSC 9 on the pane')
        assert b'\x1b\x1b]777;notify;headlesnb;headlesnb: agent 0 done' in piped.read_bytes()
        wait_for(lambda: am.poll('0').get('notify', '').endswith('notify done: exit 0'), what='the notify log in poll')  # (written once the command returned, in the background)
        # Claude Code still runs at its prompt: merge refuses (--stop ends it first); abort of a done agent ends its CLI, keeping its state and result
        r = hnb('merge', '0', root=root)
        assert r.returncode == 1 and 'still runs' in r.stderr, r.stderr
        assert hnb('abort', '0', root=root, check=True).stdout.strip() == 'aborted nothing (already finished: 0)'
        assert name not in tmux_sessions() and (am.poll('0')['status'], am.poll('0')['result']) == ('done', 'All done: DONE')
        assert 'merged scope/0 into main' in hnb('merge', '0', root=root, check=True).stdout
    client.kill()


@pytest.mark.skipif(os.environ.get('HEADLESNB_NO_CLAUDE_CODE') == '1', reason='HEADLESNB_NO_CLAUDE_CODE=1')
def test_claude_code_trust_dialog_is_the_users_in_a_project_not_trusted(tmp_path, tmux_server, monkeypatch):
    """A worktree is a checkout of the project: for a user who has not trusted the project in Claude Code itself (only a
    folder above its repository, which Claude Code does not count either), its "trust this folder?" dialog is theirs:
    the agent needs input with the dialog in poll, nothing is answered, no request is sent, the project's own Claude
    Code hook does not run; once the user says yes, Claude Code goes on to its next question"""
    assert CC.exists(), f'Claude Code {CC_VERSION} is not installed at {CC}: run tests/setup.sh (or set HEADLESNB_NO_CLAUDE_CODE=1 to skip)'
    home, ran = tmp_path / 'home', tmp_path / 'hook-ran'
    home.mkdir()
    root = repo(tmp_path / 'proj')
    (root / '.claude').mkdir()  # (the project's own hook, in the checkout: it runs in any folder Claude Code trusts)
    (root / '.claude' / 'settings.json').write_text(json.dumps({'hooks': {'SessionStart': [{'hooks': [{'type': 'command', 'command': f'touch {ran}'}]}]}}))
    env = dict(os.environ, GIT_AUTHOR_NAME='T', GIT_AUTHOR_EMAIL='t@x', GIT_COMMITTER_NAME='T', GIT_COMMITTER_EMAIL='t@x')
    for args in (['add', '.claude'], ['commit', '-q', '-m', 'hooks']): subprocess.run(['git', *args], cwd=root, check=True, env=env)
    (home / '.claude.json').write_text(json.dumps({'hasCompletedOnboarding': True, 'projects': {str(tmp_path): {'hasTrustDialogAccepted': True}}}))
    with FakeAnthropic(['ok'] * 10, validate=False) as fake:
        for k, v in dict(HOME=str(home), ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY=KEY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC='1',
                         DISABLE_TELEMETRY='1', DISABLE_AUTOUPDATER='1', PATH=f"{CC.parent}:{os.environ['PATH']}").items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv('CLAUDE_CONFIG_DIR', raising=False)
        r = hnb('spawn', 'Answer with the word DONE.', '--agent', 'claude-code', '--worktree', root=root)
        assert r.returncode == 0 and r.stdout == '0\n', r.stderr
        am = AgentManager(root)
        s = watch(am, '0', lambda: (p := am.poll('0'))['activity'] == 'needs input' and p, what='the trust dialog, asked')
        assert 'Yes, I trust this folder' in s['screen'] and s['delivered'] == '', s['screen']
        time.sleep(3)  # (a minder that answered would have by now)
        assert 'Yes, I trust this folder' in am.poll('0')['screen'], explain(am, '0')
        assert 'answered with' not in (root / '.scope/sessions/0/minder.log').read_text(), explain(am, '0')
        assert not ran.exists() and not [b for b in fake.requests if b.get('tools')]
        tm('send-keys', '-t', f"={s['tmux']}:", 'Down'); time.sleep(0.5); tm('send-keys', '-t', f"={s['tmux']}:", 'Enter')  # the user: "Yes"
        watch(am, '0', lambda: 'Detected a custom API key' in am.poll('0').get('screen', ''), what='the next question, asked')
        assert hnb('abort', '0', root=root, check=True).stdout.strip() == 'aborted 0'


# ---------------------------------------------------------------- two projects, one tmux server
def test_two_roots_on_one_tmux_server(tmp_path, tmux_server):
    "Agent 0 of two folders: two tmux sessions, each polled and aborted in its own folder only; a taken name is an error, never adopted"
    toml = f'[agents.sleeper]\ncommand = [{PY}, {json.dumps(str(FAKE))}, "sleep"]\n'
    a, b = repo(tmp_path / 'a', toml), repo(tmp_path / 'b', toml)
    assert hnb('spawn', 'sleep in a', '--agent', 'sleeper', root=a, check=True).stdout == '0\n'
    assert hnb('spawn', 'sleep in b', '--agent', 'sleeper', root=b, check=True).stdout == '0\n'
    pa, pb = (json.loads(hnb('poll', '0', root=r, check=True).stdout) for r in (a, b))
    sa, sb = (SessionStore(r).load('0') for r in (a, b))
    assert sa['tmux'] != sb['tmux'] and {sa['tmux'], sb['tmux']} <= tmux_sessions()
    assert sa['pid'] != sb['pid'] and pa['status'] == pb['status'] == 'running'
    wait_for(lambda: 'SLEEPING' in pane(sa['tmux']) and 'SLEEPING' in pane(sb['tmux']), what='both agents to run')
    assert hnb('abort', '0', root=b, check=True).stdout.strip() == 'aborted 0'
    assert sb['tmux'] not in tmux_sessions() and sa['tmux'] in tmux_sessions()
    assert json.loads(hnb('poll', '0', root=a, check=True).stdout)['status'] == 'running'
    # a session already holding the next name (left by an old tree of this folder) is not adopted
    taken = tmux_name('1', a)
    tm('new-session', '-d', '-s', taken, 'sleep 600')
    r = hnb('spawn', 'sleep again', '--agent', 'sleeper', root=a)
    assert r.returncode == 1 and f'tmux session {taken} already exists' in r.stderr, r.stderr
    s = SessionStore(a).load('1')
    assert s['status'] == 'done' and s['result'].startswith('error: could not start') and not s['pid']
    assert hnb('abort', '0', root=a, check=True).stdout.strip() == 'aborted 0'
    assert taken in tmux_sessions()  # the stranger's session was never touched


# ---------------------------------------------------------------- SIGKILL, restart, resume
def test_dialog_host_killed_then_resumed(tmp_path, tmux_server):
    """A dialog agent's host process SIGKILLed mid-request: the agent is interrupted (not aborted), wait exits 3;
    resume continues it from its last message in a new host; resume of a running, done or unknown agent is refused"""
    root = repo(tmp_path / 'p')
    (root / 'notes.txt').write_text('the answer is 42\n')
    release = threading.Event()
    seen = []

    def first(body): return {'tool_calls': [('file_windows', {'operation': 'open_range', 'file_path': 'notes.txt'}, 'toolu_fw1')]}
    def hang(body): seen.append(body); release.wait(60); return 'too late'
    def after(body): seen.append(body); return 'The answer is 42.'
    with FakeAnthropic([first, hang, after, after], validate=False) as fake:
        env = dict(os.environ, ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY='test')
        assert hnb('spawn', 'What is the answer in notes.txt?', '--type', 'explore', root=root, env=env, check=True).stdout == '0\n'
        wait_for(lambda: len(seen) == 1, timeout=60, what='the second request')
        am = AgentManager(root)
        host = int(am.store.read('0', 'pid').split()[0])
        os.kill(host, signal.SIGKILL)
        s = wait_for(lambda: (p := am.poll('0'))['status'] != 'running' and p, what='interrupted')
        assert s['status'] == 'interrupted' and 'headlesnb resume 0' in s['result'], s
        r = hnb('wait', '0', root=root)
        assert r.returncode == 3 and json.loads(r.stdout)['results'][0]['status'] == 'interrupted'
        for bad, why in (('7', 'no agent 7'),):
            r = hnb('resume', bad, root=root, env=env)
            assert r.returncode == 1 and why in r.stderr
        r = hnb('resume', '0', root=root, env=env)
        assert r.returncode == 0 and r.stdout.startswith('resumed agent 0'), r.stderr
        r = hnb('resume', '0', root=root, env=env)  # (pending or running now)
        assert r.returncode == 1 and 'cannot be resumed' in r.stderr
        res = json.loads(hnb('wait', '0', '--timeout', '60', root=root, check=True).stdout)['results'][0]
        assert (res['status'], res['result']) == ('done', 'The answer is 42.')
        resumed = seen[-1]['messages']
        assert any(b.get('type') == 'tool_use' and b.get('id') == 'toolu_fw1' for m in resumed if m['role'] == 'assistant' for b in m['content'])
        assert any(b.get('type') == 'tool_result' and b.get('tool_use_id') == 'toolu_fw1' for m in resumed if m['role'] == 'user' and isinstance(m['content'], list) for b in m['content'])
        r = hnb('resume', '0', root=root, env=env)
        assert r.returncode == 1 and 'it is done' in r.stderr
        release.set()


REPL = r'''
import sys, time
print("\033[?2004h> ", end="", flush=True)  # (bracketed paste on, as Claude Code asks)
data = ""
while "\033[201~" not in data: data += sys.stdin.readline()
time.sleep(1)
print("\033[2J\033[H● got it\n> ", end="", flush=True)
time.sleep(600)
'''


def repl_agent(tmp_path) -> tuple:
    "A command agent in tmux whose CLI (`REPL`) has been typed its task: its project, manager and id"
    (tmp_path / 'repl.py').write_text(REPL)
    root = repo(tmp_path / 'p', f'''[agents.repl]
command = [{PY}, {json.dumps(str(tmp_path / 'repl.py'))}]
ready = '(?m)^>$'
reply = '● '
''')
    am = AgentManager(root, tmux=True)
    i = am.spawn('one line task', agent='repl')
    wait_for(lambda: am.poll(i)['delivered'], what='the task delivered')
    return root, am, i


def test_minder_killed_is_restarted(tmp_path, tmux_server):
    "The minder of a command agent SIGKILLed: the next read of the tree starts a new one, which still sees the agent done"
    root, am, i = repl_agent(tmp_path)
    old = am.store.read(i, 'minder').split()[0]
    os.kill(int(old), signal.SIGKILL)
    wait_for(lambda: not proc_start(int(old)), what='the minder to die')
    wait_for(lambda: am.list() and am.store.read(i, 'minder').split()[0] != old, what='a new minder (started by a read of the tree)')
    r = am.wait([i], timeout=30)['results'][0]
    assert (r['status'], r['result']) == ('done', 'got it')


def test_a_minder_whose_tmux_cannot_tell_keeps_watching(tmp_path, tmux_server, monkeypatch):
    """A moment when tmux cannot answer (here: its socket path too long to use; under load: a timeout) does not end a
    command agent's minder: it used to take the agent's pane for gone and stop, and nothing saw the agent's end until a poll"""
    from headlesnb.agents.minder import Minder
    root, am, i = repl_agent(tmp_path)
    m = Minder(root, i)
    blind = tmp_path / ('x' * 120); blind.mkdir()
    with monkeypatch.context() as mp:
        mp.setenv('TMUX_TMPDIR', str(blind))
        assert m._step() is True  # watching on
        assert am.store.load(i)['status'] == 'running'
    assert m._step() is True  # tmux answers again: the agent's screen is read as before
    r = am.wait([i], timeout=30)['results'][0]
    assert (r['status'], r['result']) == ('done', 'got it')


def test_minder_sees_the_end_of_a_cli_whose_pid_was_never_read(tmp_path, tmux_server):
    """A CLI that exits before its pane's pid is read (a fast failure on a loaded machine) leaves no pid: its minder
    then watches its tmux session, sees it gone, records the end and stops (it used to take the agent for running, for ever)"""
    root = repo(tmp_path / 'p', f'[agents.brief]\ncommand = [{PY}, "-c", "import sys, time; time.sleep(1.5); sys.exit(3)"]\n')
    am = AgentManager(root, tmux=True)
    i = am.spawn('a task', agent='brief')
    wait_for(lambda: am.store.read(i, 'state') == 'running' and am.store.read(i, 'minder'), what='the agent running')
    am.store.write(i, 'pid', '')  # as when the pane had closed before the pid was read
    minder = int(am.store.read(i, 'minder').split()[0])
    wait_for(lambda: am.store.read(i, 'state') == 'done', timeout=20, what=f'its end recorded by the minder\n{explain(am, i)}')
    wait_for(lambda: not proc_start(minder), timeout=10, what='the minder to stop')
    p = am.poll(i)
    assert p['error'] and 'exited with status 3' in p['result'], p

# ---------------------------------------------------------------- nothing deleted
WRITER = r'''
import os, subprocess, sys, time
open("committed.txt", "w").write("committed\n")
subprocess.run(["git", "add", "committed.txt"], check=True); subprocess.run(["git", "commit", "-q", "-m", "agent commit"], check=True)
open("app.py", "a").write("# uncommitted\n")
open("untracked.txt", "w").write("untracked\n")
open("notes.log", "w").write("ignored\n")
print("WROTE", flush=True)
if sys.argv[1] == "sleep": time.sleep(600)
'''


def test_abort_and_merge_keep_every_file(tmp_path, tmux_server, monkeypatch):
    """Worktrees holding committed, uncommitted, untracked and ignored files: abort keeps them all (wip commit with the
    user's identity), abort again changes nothing; merge keeps the worktree; cleanup removes only what is merged and
    holds nothing more, and lists the rest with why"""
    (tmp_path / 'writer.py').write_text(WRITER)
    w = json.dumps(str(tmp_path / 'writer.py'))
    root = repo(tmp_path / 'p', f'notify = ["no-such-notify-program"]\n[agents.writer]\ncommand = [{PY}, {w}, "sleep"]\n[agents.writer-exit]\ncommand = [{PY}, {w}, "exit"]\n')
    for k, v in dict(GIT_AUTHOR_NAME='Ada User', GIT_AUTHOR_EMAIL='ada@example.org', GIT_COMMITTER_NAME='Ada User', GIT_COMMITTER_EMAIL='ada@example.org').items():
        monkeypatch.setenv(k, v)
    am = AgentManager(root, tmux=True)
    i = am.spawn('write things', agent='writer', worktree=True)
    wt = root / am.poll(i)['worktree']
    wait_for(lambda: (wt / 'notes.log').exists() and 'WROTE' in pane(am.poll(i)['tmux']), what='the files written')
    assert am.abort(i) == dict(aborted=[i], finished=[])
    files = {f: (wt / f).read_text() for f in ('committed.txt', 'app.py', 'untracked.txt', 'notes.log')}
    assert files == {'committed.txt': 'committed\n', 'app.py': 'print("hello")\n# uncommitted\n', 'untracked.txt': 'untracked\n', 'notes.log': 'ignored\n'}
    log = git('log', '--format=%an <%ae>|%s', 'scope/0', cwd=root).splitlines()
    assert log[0] == 'Ada User <ada@example.org>|wip (aborted): write things' and log[1].endswith('|agent commit')
    assert git('show', 'scope/0:untracked.txt', cwd=root) == 'untracked' and 'uncommitted' in git('show', 'scope/0:app.py', cwd=root)
    assert git('status', '--porcelain', cwd=wt) == ''  # (the index follows the branch; the ignored file stays, ignored)
    p = am.poll(i)
    assert p['status'] == 'aborted' and p['worktree']
    assert am.abort(i) == dict(aborted=[], finished=[i])  # abort of a finished agent: nothing changes
    assert {f: (wt / f).read_text() for f in files} == files
    # merge: the worktree stays; cleanup keeps it while it holds the ignored file, then removes it
    j = am.spawn('write and exit', agent='writer-exit', worktree=True)
    r = am.wait([j], timeout=30)['results'][0]
    assert r['status'] == 'done', r
    wait_for(lambda: 'not found' in am.poll(j).get('notify', ''), what='the notify log')  # a missing notify program is logged; the agent is unaffected
    wj = root / am.poll(j)['worktree']
    m = am.merge(j)
    assert m['worktree'] == am.poll(j)['worktree'] and (wj / 'notes.log').exists()
    assert (root / 'untracked.txt').read_text() == 'untracked\n' and not (root / 'notes.log').exists()
    c = am.cleanup()
    kept = {k['id']: k['why'] for k in c['kept']}
    assert c['removed'] == [] and 'not merged' in kept['0'] and 'notes.log' in kept['1'], c
    (wj / 'notes.log').unlink()
    r = hnb('cleanup', root=root, check=True).stdout
    assert f"removed .scope/worktrees/{j}" in r and 'kept .scope/worktrees/0 (agent 0): not merged' in r, r
    assert not wj.exists() and wt.exists() and git('rev-parse', '--verify', '-q', 'refs/heads/scope/1', cwd=root)  # no branch deleted


def done_while_its_cli_runs(tmp_path) -> tuple:
    "A command agent with a worktree, marked done (its Stop hook) while its CLI still runs in tmux: root, manager, id, session"
    root = repo(tmp_path / 'p', f'[agents.sleeper]\ncommand = [{PY}, {json.dumps(str(FAKE))}, "sleep"]\n')
    am = AgentManager(root, tmux=True)
    i = am.spawn('sleep', agent='sleeper', worktree=True)
    name = am.poll(i)['tmux']
    wait_for(lambda: 'SLEEPING' in pane(name), what='the agent to run')
    assert am.store.transition(i, 'done', result='finished, says the hook')
    return root, am, i, name


def test_merge_waits_for_the_cli(tmp_path, tmux_server):
    "An agent marked done (its Stop hook) while its CLI still runs: merge refuses, changing nothing; --stop ends it, then merges"
    root, am, i, name = done_while_its_cli_runs(tmp_path)
    head = git('rev-parse', 'HEAD', cwd=root)
    r = hnb('merge', i, root=root)
    assert r.returncode == 1 and 'its CLI still runs' in r.stderr and git('rev-parse', 'HEAD', cwd=root) == head
    r = hnb('merge', i, '--stop', root=root, check=True)
    assert name not in tmux_sessions() and 'merged scope/0 into main' in r.stdout


def test_a_tmux_that_cannot_tell_never_lets_a_running_clis_files_be_merged_or_removed(tmp_path, tmux_server, monkeypatch):
    """Whether a finished agent's CLI still runs is asked of tmux. When tmux cannot answer (here: its socket path is too long to
    use; under load: a timeout), merge (even with --stop) and cleanup refuse, saying so, and change nothing: the CLI may still
    write files. Before, a tmux that could not answer counted as no session, and the merge went ahead"""
    root, am, i, name = done_while_its_cli_runs(tmp_path)
    head = git('rev-parse', 'HEAD', cwd=root)
    blind = tmp_path / ('x' * 120); blind.mkdir()
    for stop in ([], ['--stop']):
        r = hnb('merge', i, *stop, root=root, env={**os.environ, 'TMUX_TMPDIR': str(blind)})
        assert r.returncode == 1 and f"cannot tell whether agent {i}'s CLI still runs (tmux session {name})" in r.stderr, r.stderr
        assert 'tmux could not list its sessions' in r.stderr and 'Traceback' not in r.stderr
        assert git('rev-parse', 'HEAD', cwd=root) == head and not am.poll(i)['merged'] and name in tmux_sessions()
    am.store.write(i, 'merged', head)  # (marked merged while its CLI runs: cleanup must keep the worktree it may still write in)
    wt = root / am.poll(i)['worktree']
    monkeypatch.setenv('TMUX_TMPDIR', str(blind))
    kept = {k['id']: k['why'] for k in am.cleanup()['kept']}
    assert 'cannot tell whether' in kept[i] and wt.exists(), kept
    monkeypatch.setenv('TMUX_TMPDIR', str(tmux_server))
    kept = {k['id']: k['why'] for k in am.cleanup()['kept']}
    assert kept[i] == f'its CLI still runs (tmux session {name})' and wt.exists(), kept
    am.abort(i)


def test_mcp_server_killed_then_resumed(tmp_path, tmux_server):
    """`headlesnb mcp` SIGKILLed while a dialog agent it spawned waits on the model and a command agent runs: the command
    agent goes on; the dialog agent is interrupted (whether the server hosted it or a process of its own did, once the
    server's host is gone, or goes on) and `headlesnb resume` finishes it"""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    root = repo(tmp_path / 'p', f'[agents.sleeper]\ncommand = [{PY}, {json.dumps(str(FAKE))}, "sleep"]\n')
    release, seen = threading.Event(), []
    def hang(body): seen.append(body); release.wait(60); return 'too late'
    def after(body): seen.append(body); return 'Finished after the restart.'
    with FakeAnthropic([hang, after, after], validate=False) as fake:
        env = dict(os.environ, ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY='test')
        pid = {}
        async def main():
            params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.mcp', '--root', str(root)], env=env)
            with open(os.devnull, 'w') as errlog:
                async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                    await s.initialize()
                    await s.call_tool('spawn_agent', dict(task='Think about it', task_type='explore', agent='dialog'))
                    await s.call_tool('spawn_agent', dict(task='Sleep', agent='sleeper'))
                    await anyio.to_thread.run_sync(lambda: wait_for(lambda: len(seen) == 1, timeout=60, what='the dialog agent to ask'))
                    server = [p for p in __import__('psutil').Process().children(recursive=True) if 'headlesnb.fronts.mcp' in ' '.join(p.cmdline())]
                    pid['server'] = server[0].pid
                    os.kill(server[0].pid, signal.SIGKILL)
        try: anyio.run(main)
        except BaseException: pass  # (the client sees its server die)
        am = AgentManager(root)
        host = am.store.load('0')['pid'].split()[0]
        if host == str(pid['server']):  # hosted by the server: interrupted with it
            s = wait_for(lambda: (p := am.poll('0'))['status'] != 'running' and p, what='interrupted')
            assert s['status'] == 'interrupted', s
            assert hnb('resume', '0', root=root, env=env, check=True).stdout.startswith('resumed agent 0')
        else: release.set()  # hosted by a process of its own: it goes on by itself
        res = json.loads(hnb('wait', '0', '--timeout', '60', root=root, env=env, check=True).stdout)['results'][0]
        assert res['status'] == 'done' and res['result'] in ('Finished after the restart.', 'too late'), res
        assert am.poll('1')['status'] == 'running' and am.poll('1')['tmux'] in tmux_sessions()  # the command agent went on
        release.set()
        am.abort('1')
