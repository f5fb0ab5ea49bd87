"""`headlesnb agents`, `poll` and `wait` as a user runs them, in processes of their own: a closed pipe, no terminal, and
an agent's task full of terminal escape sequences shown by the TUI in a real tmux pane. Each test's tmux server is its
own (TMUX_TMPDIR in a temp folder), so no session of anyone else's is seen or touched."""
import json, os, subprocess, sys, time

import pytest

from headlesnb.agents.runners import tmux_available, trust_agents_file
from headlesnb.fronts.agents_ui import tree_session

pytestmark = pytest.mark.timeout(120)
AG = '[agents.hi]\ncommand = ["sh", "-c", "echo hi"]\n[agents.forever]\ncommand = ["sleep", "3600"]\n'
EVIL = 'esc \x1b[31mRED\x1b[0m \x1b]0;TITLE\x07 end'
CLI = [sys.executable, '-m', 'headlesnb.fronts.cli']


@pytest.fixture
def root(tmp_path, monkeypatch):
    "A project with AG's agents (trusted, in a config folder of its own) and one finished agent 0 (its task full of escape sequences), and a private tmux server"
    r = tmp_path / 'proj'
    (r / '.scope').mkdir(parents=True)
    (r / '.scope' / 'agents.toml').write_text(AG)
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'xdg'))
    trust_agents_file(r)
    env = {k: v for k, v in os.environ.items() if k not in ('TMUX', 'TMUX_PANE')} | dict(TMUX_TMPDIR=str(tmp_path / 'tmux'))
    (tmp_path / 'tmux').mkdir()
    p = subprocess.run(CLI + ['spawn', EVIL, '--agent', 'hi', '--root', str(r)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == '0', p.stderr
    w = subprocess.run(CLI + ['wait', '0', '--timeout', '60', '--root', str(r)], env=env, capture_output=True, text=True, timeout=90)
    assert w.returncode == 0, w.stdout + w.stderr
    yield r, env
    subprocess.run(['tmux', 'kill-server'], env=env, capture_output=True)  # (our own server, in our TMUX_TMPDIR)


def test_poll_and_wait_into_a_closed_pipe(root):
    "`headlesnb poll 0 | head -c 10` (or `setup`): the reader went away; the command exits quietly (no BrokenPipeError traceback)"
    r, env = root
    settings, project = r.parent / 'settings.json', r.parent / 'setup-proj'
    project.mkdir()
    for args in (['poll', '0', '--root', str(r)], ['wait', '0', '--root', str(r)], ['setup', '--settings', str(settings), '--project', str(project)]):
        rd, wr = os.pipe()
        os.close(rd)  # (closed before the command writes: its write always meets the closed pipe)
        p = subprocess.run(CLI + args, env=env, stdout=wr, stderr=subprocess.PIPE, text=True, timeout=60)
        os.close(wr)
        assert p.stderr == '' and p.returncode == 1, (args, p.returncode, p.stderr)


@pytest.mark.skipif(not tmux_available(), reason='needs tmux')
@pytest.mark.parametrize('here', [False, True])
def test_agents_without_a_terminal(root, here):
    "No terminal: one clear line, exit 2, at once, and no tmux session left behind (it spun, or left a detached TUI)"
    r, env = root
    t = time.monotonic()
    p = subprocess.run(CLI + ['agents', '--root', str(r)] + ['--here'] * here, env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stdout == '', (p.returncode, p.stdout, p.stderr)
    assert p.stderr.startswith('headlesnb agents: needs a terminal') and p.stderr.count('\n') == 1, p.stderr
    assert time.monotonic() - t < 15
    has = subprocess.run(['tmux', 'has-session', '-t', f'={tree_session(r.resolve())}'], env=env, capture_output=True)
    assert has.returncode != 0, 'a tmux session holding the TUI was left running'


def tui_in_tmux(name, r, env, want:str, width:int):
    "`headlesnb agents --here` on root `r` in tmux session `name` (kept once it exits): (a tmux caller, the screen once it shows `want`)"
    tm = lambda *a: subprocess.run(['tmux', *a], env=env, capture_output=True, text=True, timeout=30)
    assert tm('new-session', '-d', '-s', name, '-x', str(width), '-y', '20', *CLI, 'agents', '--here', '--root', str(r)).returncode == 0
    tm('set-option', '-t', f'={name}:', 'remain-on-exit', 'on')
    screen, end = '', time.monotonic() + 60
    while time.monotonic() < end and want not in screen:
        time.sleep(0.3)
        screen = tm('capture-pane', '-p', '-t', f'={name}:').stdout
    return tm, screen


@pytest.mark.skipif(not tmux_available(), reason='needs tmux')
def test_tui_shows_a_hostile_task_printable(root):
    "The TUI in a real tmux pane: the task's OSC title, colours and BEL reach neither the pane's title nor its screen"
    r, env = root
    name = 'hnbtest-ui-guard'
    tm, screen = tui_in_tmux(name, r, env, 'esc RED', 150)
    assert 'esc RED end' in screen, screen
    coloured = tm('capture-pane', '-p', '-e', '-t', f'={name}:').stdout
    title = tm('display-message', '-p', '-t', f'={name}:', '#{pane_title}').stdout
    assert 'TITLE' not in title and 'TITLE' not in screen, (title, screen)
    assert '\x1b[31mRED' not in coloured  # (the task's own colour code is not passed through)
    def state():  # 'alive', 'gone' (the session ended with its pane), or the dead pane's exit status
        r = tm('display-message', '-p', '-t', f'={name}:', '#{pane_dead} #{pane_dead_status}')
        if r.returncode != 0: return 'gone'
        dead, _, status = r.stdout.strip().partition(' ')
        return status if dead == '1' else 'alive'
    end = time.monotonic() + 30
    while time.monotonic() < end and (st := state()) == 'alive':
        tm('send-keys', '-t', f'={name}:', 'q')  # (again until it quits: under load a key can come before the app reads keys)
        time.sleep(1)
    # q quits: exit status 0, or none tmux could read (tmux 3.3 shows some dead panes without one), or the session gone with it;
    # a nonzero status (a crash) or a pane still alive fails. (The exit statuses of q and Ctrl-C: the notebook's pilot test)
    assert st in ('0', '', 'gone'), (st, tm('capture-pane', '-p', '-t', f'={name}:').stdout)
    tm('kill-session', '-t', f'={name}')


def test_resume_after_sigkill_keeps_the_round_it_cut_off(tmp_path):
    """The host of dialog agent 0 SIGKILLed while the model's `spawn_agent` then `wait_agents` round runs (its child 0.0 asking the
    model): `headlesnb resume 0` resumes 0.0 too, and 0's next request holds the round (the spawn's result with the child's id,
    the wait marked cut off), so the model spawns nothing twice. It held only the task, and 0.0 stayed interrupted"""
    import signal, threading
    from fake_anthropic import FakeAnthropic
    from headlesnb.agents.tree import AgentManager
    r = tmp_path / 'proj'
    r.mkdir()
    release, seen = threading.Event(), {}
    def route(body):
        me = '0.0' if 'What is 6 * 7?' in json.dumps(body['messages'][0]) else '0'
        seen[me] = body['messages']
        return '42' if me == '0.0' else 'My subagent says 42.'
    am, hosts = AgentManager(r, tmux=False), []
    try:
        with FakeAnthropic([dict(tool_calls=[('spawn_agent', dict(task='What is 6 * 7?', task_type='explore', agent='dialog')),
                                             ('wait_agents', dict(ids='0.0'))]),
                            lambda body: release.wait(60) and 'too late']) as fake:
            env = dict(os.environ, ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY='test')
            p = subprocess.run(CLI + ['spawn', 'Ask a subagent: six times seven', '--type', 'explore', '--agent', 'dialog', '--root', str(r)],
                               env=env, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0 and p.stdout.strip() == '0', p.stderr
            end = time.monotonic() + 60
            while len(fake.requests) < 2 and time.monotonic() < end: time.sleep(0.05)
            assert len(fake.requests) == 2, 'the child did not ask the model'
            host = int(am.store.read('0', 'pid').split()[0])
            hosts.append(host)
            os.kill(host, signal.SIGKILL)
            end = time.monotonic() + 30
            while {am.poll(i)['status'] for i in ('0', '0.0')} != {'interrupted'} and time.monotonic() < end: time.sleep(0.1)
            assert [am.poll(i)['status'] for i in ('0', '0.0')] == ['interrupted', 'interrupted']
            release.set()
            fake.add(route, route)
            p = subprocess.run(CLI + ['resume', '0', '--root', str(r)], env=env, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stderr
            hosts += [int(x.split()[0]) for i in ('0', '0.0') if (x := am.store.read(i, 'pid').strip())]
            res = am.wait(['0', '0.0'], timeout=60)['results']
            assert [(x['status'], x['result']) for x in res] == [('done', 'My subagent says 42.'), ('done', '42')], res
        results = [b for b in seen['0'][-1]['content'] if b.get('type') == 'tool_result']
        assert 'spawned agent 0.0' in json.dumps(results[0]) and 'cut off' in json.dumps(results[1]), seen['0']
        assert am.store.ids() == ['0', '0.0']  # nothing spawned twice
    finally:
        import psutil
        for pid in hosts:  # (detached hosts are not this test's children: stopped by their recorded pids, if still this root's hosts)
            try:
                if str(r) in ' '.join(psutil.Process(pid).cmdline()): os.kill(pid, signal.SIGKILL)
            except (OSError, psutil.Error): pass
