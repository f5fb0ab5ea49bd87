"""Agents (issue 16) across process boundaries, with real parts: the command line in subprocesses, tmux (send-keys,
capture-pane), a fake agent CLI (tests/agents_fake_agent.py) reporting through Claude Code's hook JSON, git worktrees,
dialog agents answered through the anthropic SDK by tests/fake_anthropic.py, and the official MCP client.
"""
import json, os, re, subprocess, sys, threading, time
from datetime import datetime
from pathlib import Path

import anyio, psutil, pytest
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

from headlesnb.agents.tree import AgentManager, SessionStore
from headlesnb.agents.store import tmux_name
from headlesnb.agents.runners import tmux_sessions, proc_start, trust_agents_file
from headlesnb.llm import AnthropicClient
from fake_anthropic import FakeAnthropic

HERE = Path(__file__).resolve().parent
FAKE = HERE / 'agents_fake_agent.py'
pytestmark = pytest.mark.timeout(180)

# The one place that says how the `headlesnb` agent commands are run (after the merge: ['headlesnb'])
HNB_ARGV = [sys.executable, '-m', 'headlesnb.fronts.cli']


def hnb(*args, root=None, input=None, env=None, check=False, timeout=60) -> subprocess.CompletedProcess:
    "Run `headlesnb ARGS...` (with --root ROOT when given) in a subprocess"
    argv = HNB_ARGV + list(args) + (['--root', str(root)] if root is not None else [])
    r = subprocess.run(argv, input=input, capture_output=True, text=True, env=env or os.environ.copy(), timeout=timeout)
    if check: assert r.returncode == 0, (argv, r.returncode, r.stdout, r.stderr)
    return r


@pytest.fixture
def tmux_env(tmp_path, monkeypatch):
    "A private tmux server for the test (killed at the end); FAKE_AGENT_HOOK pointing at our hook command"
    d = tmp_path / 'tmux'
    d.mkdir()
    monkeypatch.setenv('TMUX_TMPDIR', str(d))
    monkeypatch.delenv('TMUX', raising=False)
    monkeypatch.delenv('TMUX_PANE', raising=False)
    monkeypatch.delenv('SCOPE_SESSION_ID', raising=False)
    monkeypatch.setenv('FAKE_AGENT_HOOK', json.dumps(HNB_ARGV + ['hook']))
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'xdg'))  # (no agents.toml of the user's; the trust the tests give is recorded there)
    yield d
    subprocess.run(['tmux', 'kill-server'], capture_output=True)


@pytest.fixture
def root(tmp_path, tmux_env):
    "A project folder with notes.txt and the fake agents configured in .scope/agents.toml"
    r = tmp_path / 'proj'
    (r / '.scope').mkdir(parents=True)
    (r / 'notes.txt').write_text('the answer is 42\n')
    py, fake = json.dumps(sys.executable), json.dumps(str(FAKE))
    (r / '.scope' / 'agents.toml').write_text(f'''
[agents.fake]
command = [{py}, {fake}, "interactive", "{{prompt}}"]
[agents.sleeper]
command = [{py}, {fake}, "sleep"]
[agents.failing]
command = [{py}, {fake}, "fail"]
[agents.noop]
command = ["true"]
[agents.edit-b]
command = [{py}, {fake}, "edit", "app.py", "3", "line three, by B"]
[agents.edit-c]
command = [{py}, {fake}, "edit", "app.py", "3", "line three, by C"]
''')
    trust_agents_file(r)  # (the user read it)
    return r


def wait_for(cond, timeout=10, every=0.02, what='condition'):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v: return v
        time.sleep(every)
    raise AssertionError(f'timed out waiting for {what}')


def pane(name) -> str:
    return subprocess.run(['tmux', 'capture-pane', '-p', '-t', f'={name}:'], capture_output=True, text=True).stdout


# ---------------------------------------------------------------- the command line across processes
def test_cli_spawn_poll_wait_abort(root):
    r = hnb('spawn', 'Say hello', '--agent', 'noop', '--type', 'explore', root=root, check=True)
    assert r.stdout == '0\n'
    done = json.loads(wait_for(lambda: (p := hnb('poll', '0', root=root)).returncode == 0 and '"done"' in p.stdout and p.stdout, what='done'))
    assert datetime.fromisoformat(done.pop('delivered'))  # (when the task reached it: here, on its command line)
    assert done == dict(id='0', status='done', activity='', result='(the agent exited without output)', task='Say hello', task_type='explore',
                       parent='', agent='noop', model='', error=False)
    # wait: all finished -> 0; a timeout -> 2 with the JSON still printed
    assert json.loads(hnb('wait', '0', root=root, check=True).stdout)['results'][0]['status'] == 'done'
    assert hnb('spawn', 'Sleep', '--agent', 'sleeper', root=root, check=True).stdout == '1\n'
    r = hnb('wait', '0', '1', '--timeout', '0.3', root=root)
    assert r.returncode == 2 and [x['status'] for x in json.loads(r.stdout)['results']] == ['done', 'running']
    # errors: one line, exit 1, nothing changed (a bad argument is argparse's exit 2: test_bad_arguments_exit_2_naming_the_subcommand)
    for args in [('poll', '7'), ('abort', '7'), ('wait', '1', '7'), ('poll', '../x'), ('spawn', 'x', '--agent', 'nope'),
                 ('spawn', 'x', '--input', '../outside'), ('merge', '0')]:
        r = hnb(*args, root=root)
        assert r.returncode == 1 and r.stdout == '' and r.stderr.strip().count('\n') <= 1 and r.stderr.strip(), (args, r.stderr)
    assert 'no agent 7' in hnb('poll', '7', root=root).stderr
    assert SessionStore(root).ids() == ['0', '1']
    # a failing agent ends done, with an error result
    i = hnb('spawn', 'Fail', '--agent', 'failing', root=root, check=True).stdout.strip()
    r = hnb('wait', i, '--timeout', '20', root=root)
    assert r.returncode == 3, (r.returncode, r.stderr)  # a failed agent: non-zero, so `wait && merge` stops
    res = json.loads(r.stdout)['results'][0]
    assert res['result'].startswith('error: failing exited with status 3') and 'something went wrong' in res['result']
    assert res['error'] is True  # never a plain success
    assert hnb('abort', '1', root=root, check=True).stdout.strip() == 'aborted 1'
    assert json.loads(hnb('poll', '1', root=root).stdout)['status'] == 'aborted'
    assert not tmux_sessions()


def test_root_found_upwards_and_parent_from_env(root):
    sub = root / 'deep' / 'er'
    sub.mkdir(parents=True)
    env = dict(os.environ)
    r = subprocess.run(HNB_ARGV + ['spawn', 'top', '--agent', 'noop'], cwd=sub, capture_output=True, text=True, env=env)
    assert r.stdout == '0\n', r.stderr
    env['SCOPE_SESSION_ID'] = '0'  # as inside agent 0
    r = subprocess.run(HNB_ARGV + ['spawn', 'child', '--agent', 'noop'], cwd=sub, capture_output=True, text=True, env=env)
    assert r.stdout == '0.0\n', r.stderr
    assert json.loads(hnb('poll', '0.0', root=root).stdout)['parent'] == '0'
    assert (root / '.scope' / '.gitignore').read_text() == '*\n'


def test_state_written_by_one_process_read_by_another(root):
    am = AgentManager(root, tmux=False)
    i = am.spawn('Sleep a while', agent='sleeper')  # written here...
    p = json.loads(hnb('poll', i, root=root, check=True).stdout)  # ...read there
    assert (p['status'], p['task']) == ('running', 'Sleep a while')
    # a hook in a third process writes the activity; we read it here
    env = dict(os.environ, SCOPE_SESSION_ID=i, HEADLESNB_ROOT=str(root))
    ev = dict(session_id='s', transcript_path='/nonexistent', cwd=str(root), hook_event_name='PreToolUse', tool_name='Grep',
              tool_input=dict(pattern='def main'), tool_use_id='toolu_x')
    assert hnb('hook', 'activity', input=json.dumps(ev), env=env).returncode == 0
    assert am.poll(i)['activity'] == 'searching: def main'
    hnb('abort', i, root=root, check=True)  # aborted there, seen here
    assert am.poll(i)['status'] == 'aborted'


def test_50_concurrent_spawns_get_50_distinct_ids(root):
    am = AgentManager(root, tmux=False)
    am.spawn('parent', agent='noop')
    ids, procs = [], []
    def spawn(k): ids.append((am.spawn(f'thread task {k}', agent='noop', parent='0' if k % 2 else ''), f'thread task {k}'))
    for k in range(25):
        procs.append((subprocess.Popen(HNB_ARGV + ['spawn', f'process task {k}', '--agent', 'noop', '--root', str(root)],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       env=dict(os.environ, SCOPE_SESSION_ID='0' if k % 2 else '')), f'process task {k}'))
    ts = [threading.Thread(target=spawn, args=(k,)) for k in range(25)]
    for t in ts: t.start()
    for t in ts: t.join()
    for p, task in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        ids.append((out.strip(), task))
    assert len(ids) == 50 and len({i for i, _ in ids}) == 50
    st = SessionStore(root)
    for i, task in ids: assert st.read(i, 'task') == task
    assert sum(i.startswith('0.') for i, _ in ids) == 24  # odd k under 0, from both threads and processes
    assert len(st.ids()) == 51


# ---------------------------------------------------------------- Claude Code's hooks
def test_hook_handler_with_claude_code_json(root, tmp_path):
    am = AgentManager(root, tmux=False)
    i = am.spawn('', agent='sleeper')  # no task yet: the first prompt fills it
    env = dict(os.environ, SCOPE_SESSION_ID=i)
    env.pop('HEADLESNB_ROOT', None)
    transcript = tmp_path / 'transcript.jsonl'
    common = dict(session_id='8c35adc1-6c1b-4d0e-9a55-0c3e5d6b1f10', transcript_path=str(transcript), cwd=str(root), permission_mode='default')
    def hook(event, **fields):
        r = subprocess.run(HNB_ARGV + ['hook', event], input=json.dumps(common | fields), capture_output=True, text=True, env=env, cwd=root)
        assert (r.returncode, r.stdout, r.stderr) == (0, '', '')
        return am.store.load(i)
    assert hook('task', hook_event_name='UserPromptSubmit', prompt='Refactor auth to use JWT\n\nDetails follow.')['task'] == 'Refactor auth to use JWT'
    assert hook('task', hook_event_name='UserPromptSubmit', prompt='something else')['task'] == 'Refactor auth to use JWT'  # only an empty task
    s = hook('activity', hook_event_name='PreToolUse', tool_name='Edit', tool_use_id='toolu_01',
             tool_input=dict(file_path=str(root / 'src' / 'auth.ts'), old_string='a', new_string='b', replace_all=False))
    assert s['activity'] == 'editing src/auth.ts'
    assert hook('activity', hook_event_name='PreToolUse', tool_name='Bash', tool_use_id='toolu_02',
                tool_input=dict(command='pytest -x tests/test_auth.py -k "jwt and not slow"', description='run the tests', timeout=120000)
                )['activity'] == 'running: pytest -x tests/test_auth.py -k "jwt and'
    assert hook('activity', hook_event_name='PreToolUse', tool_name='Task', tool_use_id='toolu_03',
                tool_input=dict(description='explore', prompt='look around', subagent_type='general-purpose'))['activity'] == 'spawning subtask'
    assert hook('activity', hook_event_name='PreToolUse', tool_name='WebFetch', tool_use_id='toolu_04', tool_input=dict(url='https://x'))['activity'] == 'WebFetch'
    # attention: a permission prompt marks it; the person answering clears it
    assert hook('notify', hook_event_name='Notification', message='Claude needs your permission to use Bash', notification_type='permission_prompt')['activity'] == 'needs input'
    assert hook('task', hook_event_name='UserPromptSubmit', prompt='yes, go on')['activity'] == ''
    # Stop: done, activity cleared, result = the last assistant message of the transcript (JSON lines as Claude Code writes them)
    hook('activity', hook_event_name='PreToolUse', tool_name='Read', tool_use_id='toolu_05', tool_input=dict(file_path=str(root / 'notes.txt')))
    transcript.write_text('\n'.join(json.dumps(e) for e in [
        dict(parentUuid=None, isSidechain=False, type='user', sessionId=common['session_id'], message=dict(role='user', content='Refactor auth')),
        dict(type='assistant', sessionId=common['session_id'], message=dict(id='msg_1', role='assistant', model='claude', content=[
            dict(type='text', text='Looking.'), dict(type='tool_use', id='toolu_05', name='Read', input=dict(file_path='notes.txt'))])),
        dict(type='user', message=dict(role='user', content=[dict(type='tool_result', tool_use_id='toolu_05', content='42')])),
        dict(type='assistant', isSidechain=True, message=dict(role='assistant', content=[dict(type='text', text='a sidechain, not the answer')])),
        dict(type='assistant', sessionId=common['session_id'], message=dict(id='msg_2', role='assistant', model='claude', content=[
            dict(type='text', text='Files changed: src/auth.ts\nApproach: JWT.')]))]) + '\n')
    s = hook('stop', hook_event_name='Stop', stop_hook_active=False)
    assert (s['status'], s['activity'], s['result']) == ('done', '', 'Files changed: src/auth.ts\nApproach: JWT.')
    # nothing is written without a known SCOPE_SESSION_ID, and bad input never makes it fail or print
    for e in [dict(os.environ, SCOPE_SESSION_ID='42'), {k: v for k, v in os.environ.items() if k != 'SCOPE_SESSION_ID'},
              dict(os.environ, SCOPE_SESSION_ID='../../etc')]:
        for stdin in ['{not json', '', json.dumps(common | dict(hook_event_name='PreToolUse', tool_name='Read', tool_input={}))]:
            r = subprocess.run(HNB_ARGV + ['hook', 'activity'], input=stdin, capture_output=True, text=True, env=e, cwd=root)
            assert (r.returncode, r.stdout) == (0, '')
    assert am.store.load(i)['activity'] == '' and SessionStore(root).ids() == [i]


def test_hook_help_shows_its_usage_without_reading_stdin(tmp_path):
    "`headlesnb hook --help` (or -h) prints the hook's usage and exits 0 at once, its stdin left open (it took --help for an event and read stdin)"
    for flag in ('--help', '-h'):
        p = subprocess.Popen(HNB_ARGV + ['hook', flag], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        try: p.wait(15)  # (not communicate: it would close stdin)
        except subprocess.TimeoutExpired: p.kill(); p.wait(); pytest.fail(f'hook {flag}: still running (reading stdin) after 15 s')
        finally: p.stdin.close()
        out, err = p.stdout.read(), p.stderr.read()
        assert p.returncode == 0 and out.startswith('usage: headlesnb hook') and 'stdin' in out and err == '', (flag, p.returncode, out, err)
    for args in [('--bogus',), ('stop', '--bogus')]:  # an option is the parser's (Claude Code gives an event only): a usage error
        r = hnb('hook', *args, input='')
        assert r.returncode == 2 and r.stdout == '' and r.stderr.startswith('headlesnb hook: ') and r.stderr.count('\n') == 1, r
    assert 'unrecognized arguments: --bogus' in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments_exit_2_naming_the_subcommand(tmp_path):
    "A usage error is argparse's exit status 2 (as for run, mcp, serve), one line naming the subcommand and its --help; nothing is made"
    for args in [('cleanup', '--no-such-flag'), ('agents', '--no-such-flag'), ('setup', '--no-such-flag'), ('poll', '0', '--no-such-flag'),
                 ('spawn', '--no-such-flag'), ('spawn', 'x', '--type', 'wrong'), ('wait',), ('wait', '0', '--timeout', 'x'), ('poll',)]:
        r = subprocess.run(HNB_ARGV + list(args), capture_output=True, text=True, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=60)
        err = r.stderr.strip()
        assert r.returncode == 2 and r.stdout == '' and '\n' not in err, (args, r.returncode, r.stderr)
        assert err.startswith(f'headlesnb {args[0]}: ') and err.endswith(f'(see headlesnb {args[0]} --help)'), (args, err)
        if args[-1] == '--no-such-flag' and args[0] != 'spawn': assert 'unrecognized arguments: --no-such-flag' in err, err
    assert list(tmp_path.iterdir()) == []


def test_hook_loads_only_the_session_store(root):
    "Claude Code waits for the hook on every tool call: the command loads no manager, kernel, dialog, UI or SDK"
    probe = ('import runpy, sys\nsys.argv = ["headlesnb", "hook", "activity"]\n'
             'try: runpy.run_module("headlesnb.fronts.cli", run_name="__main__")\n'
             'except SystemExit as e: code = e.code\n'
             'print(code, sorted(m for m in sys.modules if m.split(".")[0] in ("headlesnb", "anthropic", "textual", "IPython", "mcp")))')
    i = SessionStore(root).create('', dict(task='t', state='running', agent='claude-code'))
    ev = dict(hook_event_name='PreToolUse', tool_name='Read', tool_input=dict(file_path=f'{root}/a.py'), cwd=str(root))
    r = subprocess.run([sys.executable, '-c', probe], input=json.dumps(ev), capture_output=True, text=True, cwd=root,
                       env=dict(os.environ, SCOPE_SESSION_ID=i, HEADLESNB_ROOT=str(root)), timeout=60)
    assert r.stdout.split(' ', 1) == ['0', "['headlesnb', 'headlesnb.agents', 'headlesnb.agents.hooks', 'headlesnb.agents.store', 'headlesnb.errors', "
           "'headlesnb.fronts', 'headlesnb.paths', 'headlesnb.startup', 'headlesnb.utils']\n"], r  # (startup: what `import headlesnb` defers, see 00a_startup;
    # paths and utils: the store's checks that a session file is under the root and a regular file)
    assert SessionStore(root).read(i, 'activity') == 'reading a.py'


def test_setup_merges_into_claude_settings(tmp_path):
    cfg = tmp_path / 'claude'
    cfg.mkdir()
    (cfg / 'settings.json').write_text(json.dumps(dict(model='opus', permissions=dict(allow=['Bash(ls:*)']),
        hooks=dict(PreToolUse=[dict(matcher='Bash', hooks=[dict(type='command', command='audit.sh')])]))))
    env = dict(os.environ, CLAUDE_CONFIG_DIR=str(cfg))
    proj = ['--project', str(tmp_path)]  # its CLAUDE.md goes here, not into the checkout the tests run from
    r = hnb('setup', *proj, env=env, check=True)
    assert (tmp_path / 'CLAUDE.md').exists()
    assert 'added PreToolUse, Stop, UserPromptSubmit, Notification' in r.stdout and 'tmux: found' in r.stdout
    s = json.loads((cfg / 'settings.json').read_text())
    assert s['model'] == 'opus' and s['permissions'] == dict(allow=['Bash(ls:*)'])
    assert [h['hooks'][0]['command'] for h in s['hooks']['PreToolUse']] == ['audit.sh', 'headlesnb hook activity']
    assert {e: [h['hooks'][0]['command'] for h in s['hooks'][e]][-1] for e in ('Stop', 'UserPromptSubmit', 'Notification')} == \
        dict(Stop='headlesnb hook stop', UserPromptSubmit='headlesnb hook task', Notification='headlesnb hook notify')
    before = (cfg / 'settings.json').read_text()
    assert 'already installed' in hnb('setup', *proj, env=env, check=True).stdout
    assert (cfg / 'settings.json').read_text() == before
    (cfg / 'settings.json').write_text('{"hooks": ')
    r = hnb('setup', *proj, env=env)
    assert r.returncode == 1 and 'not valid JSON' in r.stderr and (cfg / 'settings.json').read_text() == '{"hooks": '


# ---------------------------------------------------------------- tmux
def test_command_agent_in_tmux(root):
    "A real run in tmux: the fake agent reports through the hooks, asks for input (needs input), gets it by send-keys, stops"
    am = AgentManager(root, tmux=True)
    i = am.spawn('Say hello to the user', agent='fake')
    name = tmux_name('0', root)  # (the root's hash in it: another folder's agent 0 is another session)
    assert am.poll(i)['tmux'] == name
    wait_for(lambda: 'waiting for input>' in pane(name), what='the agent to ask')
    assert 'FAKE AGENT 0 READY: # Task' in pane(name)
    s = wait_for(lambda: (p := am.poll(i))['activity'] == 'needs input' and p, what='needs input')
    assert s['status'] == 'running'
    subprocess.run(['tmux', 'send-keys', '-t', f'={name}:', 'use the formal greeting', 'Enter'], check=True)
    s = am.wait([i], timeout=20)['results'][0]
    assert (s['status'], s['activity'], s['result']) == ('done', '', 'fake result: use the formal greeting')
    wait_for(lambda: name not in tmux_sessions(), what='the agent to exit')
    assert am.poll(i)['status'] == 'done'  # its exit after the Stop hook changes nothing
    contract = (root / '.scope/sessions/0/contract.md').read_text()
    assert contract.startswith('# Task\n\nSay hello to the user') and '`headlesnb spawn' in contract


def test_dead_tmux_session_is_marked_aborted(root):
    am = AgentManager(root, tmux=True)
    i = am.spawn('Sleep', agent='sleeper')
    name = tmux_name('0', root)
    wait_for(lambda: 'SLEEPING' in pane(name), what='the agent to start')
    pids = [int(x) for x in pane(name).split('SLEEPING', 1)[1].split()[:2]]
    subprocess.run(['tmux', 'kill-session', '-t', f'={name}'], check=True)  # someone kills it behind our back
    s = json.loads(hnb('poll', i, root=root, check=True).stdout)  # (at once: its minder may mark it aborted first, see below)
    assert (s['status'], s['activity']) == ('aborted', '') and s['result'] == f'aborted: its tmux session {name} is gone', s
    for p in pids:  # (tmux hung them up)
        wait_for(lambda: not proc_start(p), what=f'process {p} to end')


def test_a_poll_racing_the_minder_to_an_agents_end_says_it_ended(root):
    """The check of a poll finds the agent's worker gone, but its minder (another process) marked it aborted a moment
    before: the poll answers aborted, not the running it read before its check (it did in CI, and here in 3 of 30 polls run
    beside the MCP tests)"""
    am = AgentManager(root, tmux=False)
    p = subprocess.Popen(['sleep', '30']); spec = f'{p.pid} {proc_start(p.pid)}'
    i = am.store.create('', dict(task='Sleep', agent='sleeper', runner='command', state='running', task_type='implement',
                                 created_at='2026-01-01T00:00:00'))
    am.store.write(i, 'pid', spec)
    read = am.get(i)  # (what the poll read: running, its worker alive)
    p.kill(); p.wait()
    am.store.transition(i, 'aborted', activity='', result='aborted: its process is gone')  # (the minder, first)
    assert am._check_alive([read]) is True  # the poll's check: what it read is stale, so it reads again
    assert am.get(i)['status'] == 'aborted'


def test_a_tmux_that_cannot_tell_never_aborts_a_running_agent(root):
    "A poll whose tmux fails (here: its socket path is too long to use; under load: a timeout) leaves the agent running"
    am = AgentManager(root, tmux=True)
    i = am.spawn('Sleep', agent='sleeper')
    name = tmux_name('0', root)
    wait_for(lambda: 'SLEEPING' in pane(name), what='the agent to start')
    blind = root / ('x' * 120); blind.mkdir()
    s = json.loads(hnb('poll', i, root=root, check=True, env={**os.environ, 'TMUX_TMPDIR': str(blind)}).stdout)
    assert (s['status'], s['result']) == ('running', ''), s
    assert json.loads(hnb('poll', i, root=root, check=True).stdout)['status'] == 'running' and name in tmux_sessions()
    am.abort(i)


def test_tui_in_tmux(root):
    "The terminal UI running in a real terminal (tmux): it shows the tree; x, y aborts the agent under the cursor"
    am = AgentManager(root, tmux=False)
    a = am.spawn('Refactor auth to JWT', agent='sleeper')
    b = am.spawn('Extract JWT helpers', agent='sleeper', parent=a)
    am.spawn('Done already', agent='noop')
    wait_for(lambda: am.poll('1')['status'] == 'done')
    legacy = am.store.create('', dict(task='Written by scope', parent='', state='running'))  # (scope's own files: its session named scope-ID)
    am.store.write(legacy, 'tmux_session', f'scope-{legacy}')  # (a name headlesnb does not give: maybe another project's agent)
    subprocess.run(['tmux', 'new-session', '-d', '-s', f'scope-{legacy}', 'sh', '-c', 'exec sleep 600'], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ('TMUX', 'TMUX_PANE')}
    subprocess.run(['tmux', 'new-session', '-d', '-s', 'ui', '-x', '120', '-y', '20', '--', *HNB_ARGV, 'agents', '--root', str(root)],
                   check=True, env=env)
    screen = wait_for(lambda: '2 running' in (s := pane('ui')) and 'Extract JWT helpers' in s and 'q quit' in s and s, timeout=60, what=f"the tree ({pane('ui')})")
    assert 'Refactor auth to JWT' in screen and '● running' in screen and '✓ done' in screen
    assert all(k in screen for k in ('n new', '↵ open', 'x abort', 'd hide done')), screen
    subprocess.run(['tmux', 'send-keys', '-t', '=ui:', 'j'], check=True)  # cursor: first row -> 0.0
    subprocess.run(['tmux', 'send-keys', '-t', '=ui:', 'x'], check=True)
    wait_for(lambda: 'Abort agent 0.0?' in pane('ui'), what='the question')
    subprocess.run(['tmux', 'send-keys', '-t', '=ui:', 'y'], check=True)
    wait_for(lambda: am.store.load(b)['status'] == 'aborted', what='the abort')
    wait_for(lambda: '1 running' in pane('ui') and '✗ aborted' in pane('ui'), what='the tree to show it')
    assert am.poll(a)['status'] == 'running'
    # the row scope wrote: aborted, its tmux session (not one headlesnb names) left alone, its result saying so
    s = am.store.load(legacy)
    assert s['status'] == 'aborted' and f"session 'scope-{legacy}'" in s['result'] and 'left alone' in s['result'], s
    assert f'scope-{legacy}' in tmux_sessions()
    subprocess.run(['tmux', 'kill-session', '-t', f'=scope-{legacy}'], check=True)
    subprocess.run(['tmux', 'send-keys', '-t', '=ui:', 'q'], check=True)
    wait_for(lambda: 'ui' not in tmux_sessions(), what='the UI to quit')
    am.abort(a)


# ---------------------------------------------------------------- the split view (tmux), every kind of row
def tmx(*args, sock=None) -> subprocess.CompletedProcess:
    return subprocess.run(['tmux', *(['-L', sock] if sock else []), *args], capture_output=True, text=True)


def window_panes(session) -> list:
    return tmx('list-panes', '-t', f'={session}:', '-F', '#{pane_id}').stdout.split()


def rows_of_every_kind(root, fake_url, release):
    "Agents of every kind the tree shows; returns {kind: id}"
    am = AgentManager(root, llm=AnthropicClient(api_key='test', base_url=fake_url, max_retries=0), tmux=True)
    ids = dict(dialog=am.spawn('Say hi'))
    wait_for(lambda: am.poll(ids['dialog'])['status'] == 'done', timeout=120, what='the dialog agent')
    ids['command'] = am.spawn('Talk to me', agent='fake')
    ids['gone'] = am.spawn('Sleep', agent='sleeper')
    wait_for(lambda: 'SLEEPING' in pane(tmux_name(ids['gone'], root)), timeout=30, what='the sleeper')
    tmx('kill-session', '-t', f"={tmux_name(ids['gone'], root)}")
    ids['live'] = am.spawn('Answer slowly')  # its model request is held until `release`
    # written by scope itself (its UX redesign's tmux_session file; no agent, runner or created_at), and a folder of one file
    for kind, files in [('scope', dict(task='Legacy task from scope', parent='', state='running', activity='editing a.ts')),
                        ('bare', dict(task='Only a task file'))]:
        ids[kind] = am.store.create('', files)
    am.store.write(ids['scope'], 'tmux_session', f"scope-{ids['scope']}")  # (scope names its sessions scope-ID: not a name headlesnb gives, never attached)
    tmx('new-session', '-d', '-s', f"scope-{ids['scope']}", 'sh', '-c', 'echo LEGACY SESSION; exec sleep 600')
    return am, ids


def open_row(ui_target, tree_pane, n_rows, k, sock=None):
    "Select the tree's pane, move to row `k` and press Enter"
    tmx('select-pane', '-t', tree_pane)
    tmx('send-keys', '-t', ui_target, *(['k'] * n_rows), *(['j'] * k), 'Enter', sock=sock)


def check_rows(am, ids, session, ui_target, release, sock=None):
    "Enter on every row shows the agent on the right, one pane at a time"
    order = sorted(ids, key=lambda k: [int(x) for x in ids[k].split('.')])
    wait_for(lambda: len(window_panes(session)) == 1 and 'Legacy task from scope' in pane(session), timeout=60, what='the tree')
    tree_pane = window_panes(session)[0]
    tree = lambda: tmx('capture-pane', '-p', '-t', tree_pane).stdout
    expect = dict(dialog=['▶ Say hi', 'Hello from the dialog agent'], command=[f"FAKE AGENT {ids['command']} READY"],
                  gone=[f"agent {ids['gone']} · sleeper", f"tmux session {tmux_name(ids['gone'], am.root)} is gone"], live=['▶ Answer slowly'], scope=['Legacy task from scope', "session 'scope-", 'left alone'], bare=['Only a task file'])
    for kind in ['dialog', 'command', 'gone', 'scope', 'bare', 'live']:
        open_row(ui_target, tree_pane, len(order), order.index(kind), sock)
        right = lambda: [p for p in window_panes(session) if p != tree_pane]
        shown = wait_for(lambda: len(right()) == 1 and all(x in (t := tmx('capture-pane', '-p', '-t', right()[0]).stdout) for x in expect[kind]) and t,
                         timeout=20, what=f'the {kind} agent on the right ({[tmx("capture-pane", "-p", "-t", p).stdout for p in right()]})')
        assert len(window_panes(session)) == 2, 'a second Enter replaces the pane'
    # the live view follows new messages
    release.set()
    wait_for(lambda: 'Live reply arrived' in tmx('capture-pane', '-p', '-t', right()[0]).stdout, timeout=20, what='the view to follow')
    # closing the right pane detaches: the agent goes on
    open_row(ui_target, tree_pane, len(order), order.index('command'), sock)
    wait_for(lambda: len(right()) == 1 and 'FAKE AGENT' in tmx('capture-pane', '-p', '-t', right()[0]).stdout, timeout=20, what='the command agent')
    tmx('kill-pane', '-t', right()[0])
    wait_for(lambda: window_panes(session) == [tree_pane], what='the pane to close')
    assert tmux_name(ids['command'], am.root) in tmux_sessions() and am.poll(ids['command'])['status'] == 'running'
    # n: one line, the agent given in it; the new agent opens on the right
    tmx('select-pane', '-t', tree_pane)
    tmx('send-keys', '-t', ui_target, 'n', sock=sock)
    wait_for(lambda: 'New agent: what should it do?' in tree(), timeout=20, what='the prompt')
    time.sleep(0.3)  # (typing starts once the prompt has the focus, as a person's would)
    tmx('send-keys', '-t', ui_target, '-l', 'say more --agent fake', sock=sock)
    tmx('send-keys', '-t', ui_target, 'Enter', sock=sock)
    new = wait_for(lambda: (s := [x for x in am.list() if x['task'] == 'say more']) and s[0], timeout=20, what='the new agent')
    assert (new['agent'], new['task_type']) == ('fake', 'implement')
    wait_for(lambda: len(right()) == 1 and f"FAKE AGENT {new['id']} READY" in tmx('capture-pane', '-p', '-t', right()[0]).stdout, timeout=20,
             what='the new agent on the right')
    return tree_pane, new['id']


def dialog_script(release):
    def held(body):
        release.wait(60)
        return 'Live reply arrived'
    return ['Hello from the dialog agent', held]


@pytest.mark.timeout(300)
def test_tui_split_view_from_outside_tmux(root, tmp_path):
    "Outside tmux, `headlesnb agents` starts a tmux session with the tree; Enter on every kind of row opens it on the right; q leaves agents running"
    sock = f'out{os.getpid()}'  # the terminal the user sees: a tmux server of its own (a short name: a socket's path holds 107 bytes)
    release = threading.Event()
    try:
        with FakeAnthropic(dialog_script(release)) as fake:
            am, ids = rows_of_every_kind(root, fake.url, release)
            tmx('new-session', '-d', '-s', 'term', '-x', '200', '-y', '45', 'env', '-u', 'TMUX', *HNB_ARGV, 'agents', '--root', str(root),
                ';', 'set-option', '-w', '-t', 'term', 'remain-on-exit', 'on', sock=sock)  # (if it fails, what it printed stays to be seen)
            try: session = wait_for(lambda: [s for s in tmux_sessions() if s.startswith('headlesnb-agents-')], timeout=120, what='the tree session')[0]
            except AssertionError as e: raise AssertionError(f"{e}; the terminal shows:\n{tmx('capture-pane', '-p', '-t', 'term', sock=sock).stdout}") from None
            tmx('set-option', '-w', '-t', 'term', 'remain-on-exit', 'off', sock=sock)
            tree_pane, new = check_rows(am, ids, session, f'={session}:', release)
            assert 'Legacy task from scope' in tmx('capture-pane', '-p', '-t', 'term', sock=sock).stdout, 'the user sees the tree'
            # q: the tree (and its view) go, the user's terminal is back; every agent goes on
            tmx('select-pane', '-t', tree_pane)
            tmx('send-keys', '-t', f'={session}:', 'q')
            wait_for(lambda: session not in tmux_sessions(), timeout=20, what='the tree to quit')
            wait_for(lambda: tmx('has-session', '-t', 'term', sock=sock).returncode != 0, timeout=20, what='the terminal to get back')
            assert {tmux_name(ids['command'], root), tmux_name(new, root)} <= tmux_sessions()
            assert am.poll(ids['command'])['status'] == 'running' and am.poll(new)['status'] == 'running'
            am.abort(ids['command']); am.abort(new)
    finally:
        release.set()
        tmx('kill-server', sock=sock)


@pytest.mark.timeout(300)
def test_tui_split_view_inside_tmux(root):
    "Inside tmux the tree runs in place: the same rows, the split in its own window; q leaves agents running"
    release = threading.Event()
    try:
        with FakeAnthropic(dialog_script(release)) as fake:
            am, ids = rows_of_every_kind(root, fake.url, release)
            tmx('new-session', '-d', '-s', 'ui', '-x', '200', '-y', '45', *HNB_ARGV, 'agents', '--root', str(root))
            tree_pane, new = check_rows(am, ids, 'ui', '=ui:', release)
            assert not [s for s in tmux_sessions() if s.startswith('headlesnb-agents-')], 'inside tmux it runs in place'
            tmx('select-pane', '-t', tree_pane)
            tmx('send-keys', '-t', '=ui:', 'q')
            wait_for(lambda: 'ui' not in tmux_sessions(), timeout=20, what='the tree to quit')
            assert am.poll(ids['command'])['status'] == 'running' and am.poll(new)['status'] == 'running'
            am.abort(ids['command']); am.abort(new)
    finally: release.set()


# ---------------------------------------------------------------- dialog agents against the fake Messages API
def agent_of(body) -> str:
    "Which agent sent a Messages API request (its contract, the system prompt, names it)"
    system = ''.join(b['text'] for b in body['system']) if isinstance(body['system'], list) else body['system']
    return re.search(r'You are agent (\d+(?:\.\d+)*)', system).group(1)


class Script:
    "Per-agent replies for FakeAnthropic; an item may be a callable(body) (which may block: a held request)"
    def __init__(self, **by_agent): self.by_agent, self.lock = {k.replace('_', '.').lstrip('a'): list(v) for k, v in by_agent.items()}, threading.Lock()
    def __call__(self, body):
        with self.lock: item = self.by_agent[agent_of(body)].pop(0)
        return item(body) if callable(item) else item


def last_result(body) -> str:
    "The last tool result the model was sent"
    return [b for b in body['messages'][-1]['content'] if b.get('type') == 'tool_result'][-1]['content']


def test_dialog_agent_end_to_end(root):
    "The child opens a file, spawns a grandchild, waits, answers; the activity is seen while each tool call is in flight"
    gate_read, gate_wait = threading.Event(), threading.Event()
    def held(ev, reply):
        def f(body):
            assert ev.wait(30), 'the test never released this request'
            return reply(body) if callable(reply) else reply
        return f
    script = Script(
        a0=[dict(text='Reading the notes first.', tool_calls=[('file_windows', dict(operation='open_range', file_path='notes.txt'))]),
            held(gate_read, dict(tool_calls=[('spawn_agent', dict(task='Double 21 and say only the number', task_type='test'))])),
            dict(tool_calls=[('shell', dict(command=f'while [ ! -e {root}/go ]; do sleep 0.02; done; echo shell ok'))]),
            dict(tool_calls=[('wait_agents', dict(ids='0.0'))]),
            lambda body: f"The notes say 42; my subagent says {json.loads(last_result(body))['results'][0]['result']}."],
        a0_0=[held(gate_wait, '42')])
    with FakeAnthropic([script] * 6) as fake:
        am = AgentManager(root, llm=AnthropicClient(api_key='test', base_url=fake.url, max_retries=0))
        i = am.spawn('Find the answer in notes.txt and check it with a subagent', 'explore', inputs=['notes.txt'])
        # the model holds its second request: the file window's activity stays until the next tool call
        wait_for(lambda: len(fake.requests) >= 2, what='the second request')
        assert am.poll(i)['activity'] == 'reading notes.txt'
        gate_read.set()
        # the shell command is in flight
        wait_for(lambda: am.poll(i)['activity'].startswith('running: while [ ! -e'), what='the shell activity')
        assert am.poll('0.0')['status'] in ('pending', 'running')
        (root / 'go').touch()
        # waiting for the grandchild, whose model request is held
        wait_for(lambda: am.poll(i)['activity'] == 'waiting on children', what='waiting on children')
        assert am.poll('0.0')['status'] == 'running'
        gate_wait.set()
        r = am.wait([i], timeout=30)
    res = r['results'][0]
    assert (r['timed_out'], res['status'], res['activity']) == (False, 'done', '')
    assert res['result'] == 'The notes say 42; my subagent says 42.'
    assert am.poll('0.0')['result'] == '42' and am.poll('0.0')['task_type'] == 'test'
    first = fake.requests[0]
    contract = (root / '.scope/sessions/0/contract.md').read_text()
    assert first['system'][0]['text'] == contract and '## Task Type: Explore' in contract and '- notes.txt' in contract
    tools = {t['name'] for t in first['tools']}
    assert {'file_windows', 'editor', 'grep', 'shell', 'python', 'spawn_agent', 'wait_agents', 'poll_agent', 'abort_agent', 'list_agents'} <= tools
    assert 'the answer is 42' in json.dumps(first['messages'])  # the input file, opened as a file window
    # the dialog: a Solveit prompt whose reply is the transcript, in the session folder
    nb = json.loads((root / '.scope/sessions/0/dialog.ipynb').read_text())
    assert nb['metadata']['solveit']['ver'] == 2
    reply = ''.join(nb['cells'][0]['outputs'][0]['data']['text/markdown'])
    assert ''.join(nb['cells'][0]['source']).startswith('%%prompt\nFind the answer') and '"name": "spawn_agent"' in reply
    assert reply.rstrip().endswith('my subagent says 42.')


def test_dialog_agent_failures_end_done_with_error(root):
    with FakeAnthropic([FakeAnthropic.error(529)]) as fake:
        am = AgentManager(root, llm=AnthropicClient(api_key='test', base_url=fake.url, max_retries=0))
        r = am.wait([am.spawn('anything')], timeout=20)['results'][0]
    assert r['status'] == 'done' and r['result'].startswith('error: Anthropic API error 529 overloaded_error: Overloaded')


def test_dialog_agent_spawned_from_the_command_line(root):
    "The CLI runs a dialog agent in a detached process of its own (the command itself exits at once)"
    with FakeAnthropic(['Hello from a detached agent.']) as fake:
        env = dict(os.environ, ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY='test')
        i = hnb('spawn', 'Say hello', root=root, env=env, check=True).stdout.strip()
        r = hnb('wait', i, '--timeout', '60', root=root, env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)['results'][0]['result'] == 'Hello from a detached agent.'
    assert SessionStore(root).read(i, 'host') == 'process'


def established(port) -> list:
    return [c for c in psutil.Process().net_connections('tcp') if c.raddr and c.raddr.port == port and c.status == 'ESTABLISHED']


def test_abort_stops_the_whole_subtree(root, tmp_path):
    """Aborting a parent (from another process) kills its tmux children and their processes, and drops its children's held
    model requests. (The 2 s target is checked by bench/bench_agents_abort.py; here: well before anything would end by itself.)"""
    pids_dir = tmp_path / 'pids'
    pids_dir.mkdir()
    os.environ['FAKE_AGENT_PIDS'] = str(pids_dir)
    release = threading.Event()
    def held(body):
        release.wait(60)
        return 'too late'
    script = Script(
        a0=[dict(tool_calls=[('spawn_agent', dict(task='child one, a dialog')), ('spawn_agent', dict(task='child two, in tmux', agent='sleeper'))]),
            dict(tool_calls=[('wait_agents', dict(ids='0.0,0.1'))]), 'never reached'],
        a0_0=[dict(tool_calls=[('spawn_agent', dict(task='grandchild', agent='sleeper'))]), held])
    try:
        with FakeAnthropic([script] * 4) as fake:
            am = AgentManager(root, llm=AnthropicClient(api_key='test', base_url=fake.url, max_retries=2), tmux=True)
            i = am.spawn('Coordinate two children')
            wait_for(lambda: am.poll(i)['activity'] == 'waiting on children' and len(fake.requests) == 4, what='the tree to grow')
            wait_for(lambda: len(list(pids_dir.iterdir())) == 2, what='the sleepers to start')
            procs = [int(p) for f in pids_dir.iterdir() for p in f.read_text().split()]
            assert all(proc_start(p) for p in procs) and {tmux_name('0.1', root), tmux_name('0.0.0', root)} <= tmux_sessions()
            assert established(fake.port), 'the held request should be open'
            runners = list(am.runners.values())
            t0 = time.monotonic()
            r = hnb('abort', '0', root=root, check=True)
            assert r.stdout.strip() == 'aborted 0, 0.0, 0.0.0, 0.1'
            wait_for(lambda: not any(proc_start(p) for p in procs), timeout=10, what='the processes to end')
            try: wait_for(lambda: not established(fake.port), timeout=10, what='the held request to be dropped')
            except AssertionError:
                raise AssertionError(f'still open: {established(fake.port)}; runners: {[(r.id, r.stop.is_set(), r.thread.is_alive()) for r in runners]}; '
                                     f'tracked: {[(r.id, r.llm.backend and len(r.llm.backend.streams)) for r in runners]}') from None
            wait_for(lambda: not any(r.thread.is_alive() for r in runners), timeout=10, what='the dialog runs to stop')
            elapsed = time.monotonic() - t0
            assert not ({tmux_name('0.1', root), tmux_name('0.0.0', root)} & tmux_sessions())
            assert [s['status'] for s in am.list()] == ['aborted'] * 4
            print(f'\nabort of a 4-agent subtree (2 dialog agents, one with a held model request; 2 tmux agents with child processes), from another process: {elapsed:.2f} s')
            assert elapsed < 10, f'the subtree took {elapsed:.2f} s to stop'
            n = len(fake.requests)
            time.sleep(0.5)
            assert len(fake.requests) == n, 'an aborted agent sent another request (a retry?)'
            release.set()
    finally:
        os.environ.pop('FAKE_AGENT_PIDS', None)


# ---------------------------------------------------------------- aborts stop at once, under load
def cpu_hogs(n=2) -> list:
    "Processes keeping the CPUs busy: the issue's failures were seen on a loaded machine"
    return [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(n)]


ABORTER = '''import sys, time
from headlesnb.agents.tree import AgentManager
am = AgentManager(sys.argv[1])
print('ready', flush=True)
id = sys.stdin.readline().strip()
t0, wall = time.monotonic(), time.time()
am.abort(id)
print(t0, wall, wall, flush=True)
print('aborted', flush=True)
'''


def abort_round(root, shape, host, via, hold_for):
    """One tree, aborted; returns what went wrong (empty: nothing). `shape`: 'waiting' (0 waits on 0.0, whose model request is
    held) or 'spawning' (abort as 0.0's folder appears, 0 still in its spawn); `host`: where dialog agents run ('thread' or
    'process'); `via`: abort in this process ('call') or from another ('process', which reports when it called abort)."""
    root.mkdir()
    (root / '.scope').mkdir()
    (root / '.scope' / 'agents.toml').write_text(f'[agents.sleeper]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))}, "sleep"]\n')
    trust_agents_file(root)
    marker, arrivals, release = root / 'shell-ran', [], threading.Event()
    def held(body):
        release.wait(60)
        return 'too late'
    late = dict(tool_calls=[('shell', dict(command=f'date +%s.%N >> {marker}')), ('spawn_agent', dict(task='a late child'))])
    if shape == 'waiting':
        script = Script(a0=[dict(tool_calls=[('spawn_agent', dict(task='child'))]), dict(tool_calls=[('wait_agents', dict(ids='0.0'))]), late, late],
                        a0_0=[held, late, late])
    else:
        script = Script(a0=[dict(tool_calls=[('spawn_agent', dict(task='slow child', agent='sleeper')), ('spawn_agent', dict(task='second child')),
                                             ('shell', dict(command=f'date +%s.%N >> {marker}'))]), late, late],
                        a0_1=[held, late, late])
    def record(body):
        arrivals.append((time.monotonic(), agent_of(body)))
        return script(body)
    problems = []
    with FakeAnthropic([record] * 12) as fake:
        env = dict(ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY='test')
        os.environ.update(env)
        try:
            am = AgentManager(root, llm=None if host == 'process' else AnthropicClient(api_key='test', base_url=fake.url, max_retries=0),
                              tmux=True, dialog_host=host)
            if via == 'process':  # another process, ready to abort (its imports done: the command line's start-up is not timed here)
                other = subprocess.Popen([sys.executable, '-c', ABORTER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                assert other.stdout.readline().strip() == 'ready'
            am.spawn('Coordinate')
            if shape == 'waiting':
                wait_for(lambda: am.store.read('0', 'activity') == 'waiting on children' and any(a == '0.0' for _, a in arrivals),
                         timeout=60, what='0 waiting on its held child')
                time.sleep(hold_for)
            else: wait_for(lambda: (root / '.scope' / 'sessions' / '0.0').is_dir(), timeout=60, every=0.001, what='0.0 being spawned')
            runners = list(am.runners.values())
            t0, t0_wall, t0_epoch = time.monotonic(), datetime.now(), time.time()
            if via == 'call': am.abort('0')
            else:  # (the clocks are the system's, the same in both processes)
                other.stdin.write('0\n'); other.stdin.flush()
                t0, t0_wall, t0_epoch = (float(x) for x in other.stdout.readline().split())
                t0_wall = datetime.fromtimestamp(t0_wall)
                assert other.stdout.readline().strip() == 'aborted', 'the other process failed'
            returned = time.monotonic()
            ss = am.store.load_all()
            # nothing started after abort was called
            problems += [f'a model request of {a} arrived {t - t0:.3f} s after abort was called' for t, a in arrivals if t >= t0]
            problems += [f'agent {s["id"]} was spawned after abort was called' for s in ss if datetime.fromisoformat(s['created_at']) >= t0_wall]
            if marker.exists(): problems += [f'a shell tool call ran {float(x) - t0_epoch:.3f} s after abort was called' for x in marker.read_text().split() if float(x) >= t0_epoch]
            # the whole tree stopped by the time abort returned
            problems += [f'agent {s["id"]} is {s["status"]}' for s in ss if s['status'] != 'aborted']
            for r in runners: r.thread.join(0.5 if via == 'process' else 0)  # (from another process: the runner's last step is what it waits for)
            problems += [f'runner {r.id} still runs' for r in runners if r.thread.is_alive()]
            problems += [f'tmux session {n} of the tree is left' for n in tmux_sessions() if n.startswith(tmux_name('0', root))]
            pids = root / 'pids'
            if host == 'process':
                hosts = [int(s['pid'].split()[0]) for s in ss if s['host'] == 'process' and s['pid']]
                problems += [f'host process {p} still runs' for p in hosts if proc_start(p)]
            n = len(arrivals)
            time.sleep(0.3)
            problems += [f'{len(arrivals) - n} model requests after abort returned'] if len(arrivals) > n else []
            if not problems and returned - t0 > 20: problems.append(f'abort took {returned - t0:.1f} s')
        finally:
            release.set()
            for k in env: os.environ.pop(k, None)
    return problems


@pytest.mark.timeout(900)
def test_abort_stops_at_once_under_load(root, tmp_path):
    """From the moment `abort` is called no model request, tool call or spawn of the aborted tree starts, in any runner: the
    tree waits on a held child, or is in the middle of spawning one; dialog agents in threads of this process or in a host
    process; abort called here or from another process. Each shape many times, the CPUs kept busy."""
    hogs = cpu_hogs()
    failures = []
    try:
        shapes = [('waiting', 'thread', 'call'), ('spawning', 'thread', 'call'), ('waiting', 'thread', 'process'), ('spawning', 'thread', 'process'),
                  ('waiting', 'process', 'process'), ('spawning', 'process', 'call')]
        rounds = int(os.environ.get('ABORT_ROUNDS', '3'))
        for k in range(rounds):
            for j, (shape, host, via) in enumerate(shapes):
                p = abort_round(tmp_path / f'r{k}-{j}', shape, host, via, hold_for=0.02 * (k % 3))
                failures += [f'{shape}/{host}/{via} round {k}: {x}' for x in p]
    finally:
        for h in hogs: h.kill(); h.wait()
    assert not failures, '\n'.join(failures)


# ---------------------------------------------------------------- routing, setup's CLAUDE.md, papercuts
def test_routing_by_task_type(root):
    "[routing.TYPE] in agents.toml: spawn without an agent follows it (agent, and a dialog agent's model); poll and the tree show them"
    with open(root / '.scope' / 'agents.toml', 'a') as f: f.write('\n[routing.test]\nagent = "noop"\n[routing.explore]\nmodel = "claude-haiku-4-5"\n')
    trust_agents_file(root)  # (edited: trusted again)
    t = hnb('spawn', 'Run the tests', '--type', 'test', root=root, check=True).stdout.strip()
    p = json.loads(hnb('wait', t, '--timeout', '30', root=root, check=True).stdout)['results'][0]
    assert (p['agent'], p['model'], p['status'], p['error']) == ('noop', '', 'done', False)
    assert hnb('spawn', 'Run them again', '--type', 'test', '--agent', 'sleeper', root=root, check=True).stdout.strip() == '1'  # named: it wins
    assert json.loads(hnb('poll', '1', root=root, check=True).stdout)['agent'] == 'sleeper'
    hnb('abort', '1', root=root, check=True)
    with FakeAnthropic(['Found it.']) as fake:
        am = AgentManager(root, llm=AnthropicClient(api_key='test', base_url=fake.url, max_retries=0))
        e = am.spawn('Find the auth code', 'explore')
        wait_for(lambda: am.poll(e)['status'] == 'done', timeout=120, what='the explorer')
        assert fake.requests[0]['model'] == 'claude-haiku-4-5', 'the routed model is the one asked'
        assert (am.poll(e)['agent'], am.poll(e)['model']) == ('dialog', 'claude-haiku-4-5')
        from headlesnb.fronts.agents_ui import row_text
        assert row_text(am.get(e))[4] == 'dialog · claude-haiku-4-5'  # what the tree shows


def test_project_agents_file_used_only_once_trusted(root, tmp_path):
    """A cloned repository's .scope/agents.toml (an agent's command, notify, routing) runs nothing until the user trusts
    it: spawn refuses (the CLI and MCP alike), naming the file and `headlesnb trust`; after `headlesnb trust` it runs;
    edited, it is refused again; `--revoke` takes the trust back. The MCP server has no tool that trusts."""
    ran, told = tmp_path / 'ran', tmp_path / 'told'
    f = root / '.scope' / 'agents.toml'
    f.write_text(f'notify = ["sh", "-c", "echo $2 >> {told}"]\n[agents.evil]\ncommand = ["sh", "-c", "touch {ran}; echo done"]\n'
                 '[routing.test]\nagent = "evil"\n')
    for args in (['spawn', 'x', '--agent', 'evil'], ['spawn', 'x', '--type', 'test'], ['spawn', 'x', '--agent', 'dialog']):
        r = hnb(*args, root=root)
        assert r.returncode == 1 and r.stdout == '', (args, r.stdout, r.stderr)
        assert f"{f} is this project's own agents file and you have not trusted it" in r.stderr and 'notify command' in r.stderr, r.stderr
        assert f'run `headlesnb trust` in {root}' in r.stderr, r.stderr
    am = AgentManager(root, tmux=False)
    async def mcp():
        async with Client(agents_server(am)) as cl:
            assert not [t.name for t in (await cl.list_tools()).tools if 'trust' in t.name]
            r = await cl.call_tool('spawn_agent', dict(task='x', agent='evil'))
            assert r.is_error and 'you have not trusted it' in mcp_text(r), mcp_text(r)
    anyio.run(mcp)
    time.sleep(0.5)
    assert not ran.exists() and not told.exists() and not (root / '.scope' / 'sessions').exists()  # nothing spawned, nothing run
    r = hnb('trust', '--project', str(root), check=True)
    assert f.read_text() in r.stdout and f'trusted {f} as shown above' in r.stdout, r.stdout
    i = hnb('spawn', 'x', '--type', 'test', root=root, check=True).stdout.strip()
    res = json.loads(hnb('wait', i, '--timeout', '30', root=root, check=True).stdout)['results'][0]
    assert (res['agent'], res['result']) == ('evil', 'done') and ran.exists()
    wait_for(lambda: told.exists() and told.read_text() == 'done\n', what='the notify command')
    f.write_text(f.read_text() + '# edited\n')
    r = hnb('spawn', 'x', '--agent', 'evil', root=root)
    assert r.returncode == 1 and 'you have not trusted it as it is now (it changed since you did)' in r.stderr, r.stderr
    hnb('trust', '--project', str(root), check=True)
    assert hnb('trust', '--project', str(root), '--revoke', check=True).stdout.startswith(f'{f}: no longer trusted')
    r = hnb('spawn', 'x', '--agent', 'evil', root=root)
    assert r.returncode == 1 and 'you have not trusted it:' in r.stderr, r.stderr
    assert len(am.list()) == 1  # (the one spawned while it was trusted)


def test_setup_writes_spawn_heuristics_into_claude_md(tmp_path):
    "setup: the heuristics go into CLAUDE.md at the git top (made if missing), between the markers; twice: one block, the user's text kept"
    repo = tmp_path / 'repo'
    (repo / 'src' / 'deep').mkdir(parents=True)
    subprocess.run(['git', 'init', '-q', str(repo)], check=True)
    settings = tmp_path / 'settings.json'
    def setup():
        r = subprocess.run(HNB_ARGV + ['setup', '--settings', str(settings)], cwd=repo / 'src' / 'deep', capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout
    assert f"spawn heuristics: written to {repo / 'CLAUDE.md'}" in setup()
    (repo / 'CLAUDE.md').write_text('# Mine\n\nKeep this.\n\n' + (repo / 'CLAUDE.md').read_text() + '\nAnd this.\n')
    assert 'spawn heuristics: already in' in setup()
    text = (repo / 'CLAUDE.md').read_text()
    assert text.count('<!-- headlesnb:begin -->') == 1 and text.count('<!-- headlesnb:end -->') == 1
    assert text.startswith('# Mine\n\nKeep this.\n\n<!-- headlesnb:begin -->') and text.endswith('<!-- headlesnb:end -->\n\nAnd this.\n')
    assert 'headlesnb spawn' in text and 'headlesnb wait' in text and 'headlesnb poll' in text
    assert not (repo / 'src' / 'deep' / 'CLAUDE.md').exists()
    plain = tmp_path / 'plain'; plain.mkdir()  # not a repository: the current folder
    r = subprocess.run(HNB_ARGV + ['setup', '--settings', str(settings)], cwd=plain, capture_output=True, text=True)
    assert r.returncode == 0 and (plain / 'CLAUDE.md').exists()


def test_papercuts_no_key_readonly_help(root, tmp_path):
    "A dialog spawn without an API key fails at once (exit 1, one line, no agent); a read-only command makes no folder; every agent command says what it does"
    env = {k: v for k, v in os.environ.items() if k != 'ANTHROPIC_API_KEY'}
    r = hnb('spawn', 'Say hi', root=root, env=env)
    assert r.returncode == 1 and r.stdout == '' and 'ANTHROPIC_API_KEY' in r.stderr and r.stderr.strip().count('\n') == 0, r
    assert SessionStore(root).ids() == []
    work = tmp_path / 'work'
    for args in [('poll', '0'), ('wait', '0'), ('abort', '0')]:
        r = subprocess.run(HNB_ARGV + list(args) + ['--root', 'work'], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 1 and 'does not exist' in r.stderr and not work.exists(), (args, r.stderr)
    # an agent that ended in an error is never a plain success: poll says error, the tree shows it failed
    i = hnb('spawn', 'Fail', '--agent', 'failing', root=root, check=True).stdout.strip()
    r = hnb('wait', i, '--timeout', '30', root=root)
    p = json.loads(r.stdout)['results'][0]
    assert r.returncode == 3 and p['status'] == 'done' and p['error'] is True and p['result'].startswith('error: ')
    from headlesnb.fronts.agents_ui import row_text
    assert row_text(AgentManager(root).get(i))[2] == 'failed'
    helps = subprocess.run(HNB_ARGV + ['--help'], capture_output=True, text=True).stdout
    from headlesnb.fronts.agents_ui import AGENT_COMMANDS
    assert len(set(AGENT_COMMANDS.values())) == len(AGENT_COMMANDS) == 11 and {'resume', 'cleanup', 'trust'} <= set(AGENT_COMMANDS)
    flat = ' '.join(helps.split())
    assert all(f'{c} {" ".join(what.split())}' in flat for c, what in AGENT_COMMANDS.items()), helps


# ---------------------------------------------------------------- worktrees
def git(*args, cwd):
    return subprocess.run(['git', *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def test_two_implementers_in_worktrees_then_merged(root):
    git('init', '-q', '-b', 'main', cwd=root)
    git('config', 'user.email', 'dev@example.com', cwd=root); git('config', 'user.name', 'Dev', cwd=root)
    (root / 'app.py').write_text('line one\nline two\nline three\n')
    git('add', 'app.py', 'notes.txt', cwd=root); git('commit', '-qm', 'start', cwd=root)
    script = Script(a0=[dict(tool_calls=[('editor', dict(operation='open', file_path='app.py'))]),
                        dict(tool_calls=[('editor', dict(operation='replace', editor_id='e1', old='line one', new='line one, by A'))]),
                        'Files changed: app.py (line 1).'])
    with FakeAnthropic([script] * 3) as fake:
        am = AgentManager(root, llm=AnthropicClient(api_key='test', base_url=fake.url, max_retries=0), tmux=False)
        a = am.spawn('Improve line one', worktree=True)          # a dialog agent
        b = am.spawn('Improve line three', agent='edit-b', worktree=True)  # a command agent
        r = am.wait([a, b], timeout=30)
    assert [x['status'] for x in r['results']] == ['done', 'done'], r
    wa, wb = root / '.scope/worktrees/0', root / '.scope/worktrees/1'
    assert (wa / 'app.py').read_text() == 'line one, by A\nline two\nline three\n'
    assert (wb / 'app.py').read_text() == 'line one\nline two\nline three, by B\n'
    assert (root / 'app.py').read_text() == 'line one\nline two\nline three\n'  # the user's checkout is untouched
    assert git('status', '--porcelain', cwd=root) == ''  # .scope/ never shows
    p = am.poll(a)
    assert (p['branch'], p['worktree'], p['diff']) == ('scope/0', '.scope/worktrees/0', '1 file changed, +1 -1')
    pb = json.loads(hnb('poll', b, root=root, check=True).stdout)
    assert (pb['branch'], pb['diff']) == ('scope/1', '1 file changed, +1 -1')
    # a dirty checkout: refused, nothing changed
    (root / 'notes.txt').write_text('changed\n')
    r = hnb('merge', a, root=root)
    assert r.returncode == 1 and 'uncommitted changes' in r.stderr and r.stderr.count('\n') == 1
    git('checkout', 'notes.txt', cwd=root)
    head = git('rev-parse', 'HEAD', cwd=root)
    assert hnb('merge', a, root=root, check=True).stdout.startswith('merged scope/0 into main (1 file changed, +1 -1)')
    assert hnb('merge', b, root=root, check=True).stdout.startswith('merged scope/1 into main')
    assert (root / 'app.py').read_text() == 'line one, by A\nline two\nline three, by B\n'
    assert wa.exists() and wb.exists() and git('rev-parse', '--verify', 'scope/0', cwd=root)  # (merge keeps the worktrees: cleanup removes them)
    log = git('log', '--format=%s', f'{head}..HEAD', cwd=root).split('\n')
    assert {'Improve line one', 'Improve line three'} <= set(log)  # each worktree's work, committed with its task as the message
    assert am.poll(a)['merged'] and am.poll(a)['worktree']
    # a third implementer changing a line that changed meanwhile: the merge would conflict, so it is refused
    c = AgentManager(root, tmux=False).spawn('Change line three again', agent='edit-c', worktree=True)
    AgentManager(root).wait([c], timeout=20)
    (root / 'app.py').write_text('line one, by A\nline two\nline three, by the user\n')
    git('commit', '-qam', 'user edit', cwd=root)
    head = git('rev-parse', 'HEAD', cwd=root)
    r = hnb('merge', c, root=root)
    assert r.returncode == 1 and 'would conflict in app.py' in r.stderr and 'nothing was changed' in r.stderr
    assert git('rev-parse', 'HEAD', cwd=root) == head and git('status', '--porcelain', cwd=root) == ''
    assert (root / '.scope/worktrees/2/app.py').exists()
    # abort of a finished agent changes nothing; cleanup removes only the merged worktrees, keeps the other, says why
    assert hnb('abort', c, root=root, check=True).stdout.strip() == f'aborted nothing (already finished: {c})'
    assert (root / '.scope/worktrees/2/app.py').read_text().endswith('line three, by C\n')
    out = hnb('cleanup', root=root, check=True).stdout
    assert 'removed .scope/worktrees/0' in out and 'removed .scope/worktrees/1' in out and 'kept .scope/worktrees/2 (agent 2): not merged' in out, out
    assert not wa.exists() and not wb.exists() and (root / '.scope/worktrees/2').exists()


# ---------------------------------------------------------------- MCP
def mcp_text(res) -> str: return '\n'.join(b.text for b in res.content if isinstance(b, TextContent))


def agents_server(am):
    from headlesnb.fronts.mcp import HeadlesnbMCPServer
    from headlesnb.fronts.mcp import register_agent_tools
    srv = HeadlesnbMCPServer('agents-test')
    register_agent_tools(srv, am, None)
    return srv


def test_mcp_tools_in_process(root):
    am = AgentManager(root, tmux=False)
    async def main():
        async with Client(agents_server(am)) as cl:
            tools = {t.name: t for t in (await cl.list_tools()).tools}
            assert set(tools) == {'spawn_agent', 'poll_agent', 'wait_agents', 'abort_agent', 'resume_agent', 'list_agents'}
            assert tools['abort_agent'].annotations.destructive_hint and tools['poll_agent'].annotations.read_only_hint
            assert tools['spawn_agent'].input_schema['properties']['task_type']['enum'] == ['explore', 'implement', 'test', 'review', 'refactor']
            r = await cl.call_tool('spawn_agent', dict(task='Sleep', agent='sleeper'))
            assert mcp_text(r) == 'spawned agent 0 (sleeper, implement)'
            p = json.loads(mcp_text(await cl.call_tool('poll_agent', dict(id='0'))))
            assert (p['status'], p['task']) == ('running', 'Sleep')
            r = json.loads(mcp_text(await cl.call_tool('wait_agents', dict(ids=['0'], timeout=0.2))))
            assert r['timed_out'] and r['results'][0]['status'] == 'running'
            await cl.call_tool('spawn_agent', dict(task='Quick', agent='noop', parent='0'))
            r = json.loads(mcp_text(await cl.call_tool('wait_agents', dict(ids='0.0', timeout=20))))
            assert not r['timed_out'] and r['results'][0]['status'] == 'done'
            table = mcp_text(await cl.call_tool('list_agents', {}))
            assert table.split('\n')[0] == 'id\tstatus\tagent\ttask_type\tactivity\ttask' and '0.0\tdone\tnoop' in table
            assert mcp_text(await cl.call_tool('abort_agent', dict(id='0'))) == 'aborted 0; already finished: 0.0'
            for tool, args, msg in [('poll_agent', dict(id='9'), 'no agent 9'), ('spawn_agent', dict(task='x', agent='nope'), 'unknown agent'),
                                    ('spawn_agent', dict(task='x', task_type='wrong'), 'invalid arguments'), ('poll_agent', dict(id='..'), 'bad agent id')]:
                r = await cl.call_tool(tool, args)
                assert r.is_error and msg in mcp_text(r) and '\n' not in mcp_text(r), (tool, mcp_text(r))
    anyio.run(main)


def test_mcp_tools_over_stdio(root):
    "The official client over stdio, against the real `headlesnb mcp` (the agent tools beside the notebook and dialog ones)"
    async def main():
        params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.mcp', '--root', str(root)], env=dict(os.environ))
        with open(os.devnull, 'w') as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                told = []
                async def on_log(params): told.append(params)
                s._logging_callback = on_log
                assert mcp_text(await s.call_tool('spawn_agent', dict(task='Quick', agent='noop'))) == 'spawned agent 0 (noop, implement)'
                seen = []
                async def progress(p, total, msg): seen.append(msg)
                res = await s.call_tool('wait_agents', dict(ids=['0'], timeout=20), progress_callback=progress)
                assert json.loads(mcp_text(res))['results'][0]['status'] == 'done'
                assert json.loads(hnb('poll', '0', root=root, check=True).stdout)['status'] == 'done'
                with anyio.fail_after(10):  # the client that spawned it is told it is done
                    while not any(t.logger == 'headlesnb.agents.tree' for t in told): await anyio.sleep(0.05)
                news = next(t for t in told if t.logger == 'headlesnb.agents.tree')
                assert (news.data['id'], news.data['state'], news.level) == ('0', 'done', 'info')
                r = await s.call_tool('resume_agent', dict(id='0'))
                assert r.is_error and 'cannot be resumed' in mcp_text(r)
    anyio.run(main)


# ---------------------------------------------------------------- the terminal UI, with Textual's pilot
def test_tui_pilot(root):
    "Keys n (new), enter (a dialog agent's live transcript), h/l, d, x; a change made by another process shows within 1 s"
    script = Script(a0=['Hello from the dialog agent.'])
    with FakeAnthropic([script]) as fake:
        am = AgentManager(root, llm=AnthropicClient(api_key='test', base_url=fake.url, max_retries=0), tmux=False)
        d = am.spawn('Greet the user')
        am.wait([d], timeout=20)
    from headlesnb.fronts.agents_ui import agents_app
    async def main():
        app = agents_app(am, new_agent='sleeper', check_every=0.5)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            assert app.current() == '0' and '✓ done' in str(app.rows['0'].label)
            await pilot.press('enter')  # a dialog agent: its transcript
            await pilot.pause(0.3)
            body = str(app.screen.query_one('#body').render())
            assert '▶ Greet the user' in body and 'Hello from the dialog agent.' in body
            await pilot.press('escape'); await pilot.pause()
            await pilot.press('n'); await pilot.pause()
            await pilot.press(*'watch the logs', 'enter')
            for _ in range(100):
                await pilot.pause(0.05)
                if '1' in app.rows: break
            assert am.poll('1')['task'] == 'watch the logs' and am.poll('1')['agent'] == 'sleeper'
            am.spawn('a child', agent='sleeper', parent='1')
            for _ in range(40):
                await pilot.pause(0.05)
                if '1.0' in app.rows: break
            await pilot.press('j'); assert app.current() == '1'
            await pilot.press('h'); await pilot.pause()
            assert not app.rows['1'].is_expanded
            await pilot.press('l'); await pilot.pause()
            assert app.rows['1'].is_expanded
            # another process aborts 1: the tree shows it soon (a second on an idle machine; 5 s here, for a loaded CI machine)
            hnb('abort', '1', root=root, check=True)
            t_cli = time.monotonic()
            while '✗ aborted' not in str(app.rows['1.0'].label):
                await pilot.pause(0.02)
                assert time.monotonic() - t_cli < 5, 'the UI did not show the change within 5 s'
            assert '0 running' in str(app.query_one('#count').render())
            await pilot.press('d'); await pilot.pause()
            assert app.rows == {}  # everything is finished
            await pilot.press('q')
    anyio.run(main)


def test_dead_processes_are_marked_aborted(root):
    "A command agent's process (no tmux) or a dialog agent's host process killed behind our back: the agent is aborted"
    import signal
    am = AgentManager(root, tmux=False)
    i = am.spawn('Sleep', agent='sleeper')
    pid = int(am.store.read(i, 'pid').split()[0])
    wait_for(lambda: len(psutil.Process(pid).children(recursive=True)) >= 2, what='the sleeper and its child')
    os.killpg(pid, signal.SIGKILL)
    s = wait_for(lambda: (p := json.loads(hnb('poll', i, root=root, check=True).stdout))['status'] != 'running' and p, what='aborted')
    assert (s['status'], s['result']) == ('aborted', f'aborted: its process ({pid}) is gone')
    release = threading.Event()
    with FakeAnthropic([lambda body: release.wait(30) and 'late']) as fake:
        env = dict(os.environ, ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY='test')
        d = hnb('spawn', 'Think for a long time', root=root, env=env, check=True).stdout.strip()
        wait_for(lambda: len(fake.requests) == 1, timeout=30, what='the detached agent to ask the model')
        host = int(am.store.read(d, 'pid').split()[0])
        assert am.store.read(d, 'host') == 'process' and am.poll(d)['status'] == 'running'
        os.kill(host, signal.SIGKILL)
        s = wait_for(lambda: (p := am.poll(d))['status'] != 'running' and p, what='interrupted')
        assert (s['status'], s['result']) == ('interrupted', f'interrupted: its process ({host}) is gone (headlesnb resume {d} continues it)')  # (nobody aborted it)
        release.set()
