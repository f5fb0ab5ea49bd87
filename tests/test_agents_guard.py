"""Agents against hostile content (audit): an agent's result and the project's path never reach tmux as a format,
and session files that are symlinks, FIFOs or folders are never read through, block nothing, and are named.
Real parts: the command line in subprocesses, a private tmux server, the official MCP client.
"""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from headlesnb.agents.runners import trust_agents_file
from headlesnb.agents.tree import AgentManager

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
    "A private tmux server (its own TMUX_TMPDIR) holding session fxg-spawner, the terminal the agents are spawned from; a config folder of its own"
    d = tmp_path / 'tmux'
    d.mkdir()
    monkeypatch.setenv('TMUX_TMPDIR', str(d))
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'xdg'))  # (no agents.toml of the user's; the trust the tests give is recorded there)
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
    trust_agents_file(root)  # (the user read it)
    r = hnb('spawn', 't', '--agent', 'inj', cwd=root, env=tmux_env)
    assert r.returncode == 0, r.stderr
    i = r.stdout.strip()
    res = wait_for(lambda: (p := json.loads(hnb('poll', i, cwd=root, env=tmux_env).stdout))['status'] == 'done' and p, what='the agent to end')
    assert res['result'] == f'ok #(touch {pwned}) #{{pane_id}}'
    wait_for(lambda: (root / '.scope/sessions' / i / 'notified').exists(), what='the announcement')
    time.sleep(0.5)  # (a #() job of tmux runs in the background)
    assert not pwned.exists() and not (tmp_path / 'PWNED_DIR').exists()


@pytest.fixture
def proj(tmp_path, tmux_env):
    "A project with AG in .scope/agents.toml; the environment of a terminal outside tmux (the private server still serves the agents)"
    r = tmp_path / 'r'
    (r / '.scope').mkdir(parents=True)
    (r / '.scope' / 'agents.toml').write_text(AG)
    trust_agents_file(r)
    env = {k: v for k, v in tmux_env.items() if k not in ('TMUX', 'TMUX_PANE')}
    return r, env


def spawn_done(r, env, agent='hi'):
    i = hnb('spawn', 't', '--agent', agent, cwd=r, env=env)
    assert i.returncode == 0, i.stderr
    i = i.stdout.strip()
    wait_for(lambda: json.loads(hnb('poll', i, cwd=r, env=env).stdout)['status'] == 'done', what='the agent to end')
    return i


def test_symlinked_scope_is_never_written_through(tmp_path, proj):
    "A .scope (or .scope/sessions) that is a symlink out of the root: spawn refuses, naming it, and writes nothing there"
    _, env = proj
    out, r = tmp_path / 'out', tmp_path / 'r2'
    out.mkdir(); r.mkdir()
    (r / '.scope').symlink_to(out)
    (out / 'agents.toml').write_text(AG)
    trust_agents_file(r)  # (trusted: what refuses is the symlink)
    res = hnb('spawn', 't', '--agent', 'hi', cwd=r, env=env)
    assert res.returncode == 1 and '.scope is a symlink (to' in res.stderr and res.stderr.strip().count('\n') == 0, res.stderr
    assert not (out / 'sessions').exists()
    (r / '.scope').unlink(); (r / '.scope').mkdir()
    (r / '.scope' / 'sessions').symlink_to(out)
    (r / '.scope' / 'agents.toml').write_text(AG)
    trust_agents_file(r)
    res = hnb('spawn', 't', '--agent', 'hi', cwd=r, env=env)
    assert res.returncode == 1 and '.scope/sessions is a symlink (to' in res.stderr, res.stderr
    assert sorted(os.listdir(out)) == ['agents.toml']


def test_session_files_symlink_fifo_folder(proj):
    "A result symlinked to /etc/hostname is not read; a FIFO hangs nothing (poll, list over MCP); a folder is no traceback: each named"
    r, env = proj
    i = spawn_done(r, env)
    res = r / '.scope/sessions' / i / 'result'
    res.unlink(); res.symlink_to('/etc/hostname')
    p = hnb('poll', i, cwd=r, env=env)
    host = Path('/etc/hostname').read_text().strip()
    assert p.returncode == 0 and host not in p.stdout, p.stdout
    assert json.loads(p.stdout)['activity'] == f'damaged: in .scope/sessions/{i}/, result is a symlink: fix or remove it'
    res.unlink(); os.mkfifo(res)
    p = hnb('poll', i, cwd=r, env=env, timeout=20)  # (the old code waited for a writer forever)
    assert p.returncode == 0 and 'result is a FIFO' in json.loads(p.stdout)['activity']
    # the MCP server's list_agents and poll_agent, through the official client
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    async def go():
        params = StdioServerParameters(command=HNB_ARGV[0], args=HNB_ARGV[1:] + ['mcp', '--root', str(r)], env=env)
        async with stdio_client(params) as (rd, wr), ClientSession(rd, wr) as s:
            await s.initialize()
            with anyio.fail_after(20):
                return [(await s.call_tool(t, a)).content[0].text for t, a in (('list_agents', {}), ('poll_agent', dict(id=i)))]
    listed, polled = anyio.run(go)
    assert 'result is a FIFO' in listed and 'result is a FIFO' in polled and host not in polled
    st = r / '.scope/sessions' / i / 'state'
    st.unlink(); st.mkdir()  # (a live-looking agent whose files are broken: finishing it reads them, and says which is bad)
    p = hnb('poll', i, cwd=r, env=env, timeout=20)
    assert p.returncode == 1 and p.stderr.count('\n') == 1 and 'Traceback' not in p.stderr, p.stderr
    assert f'.scope/sessions/{i}/' in p.stderr and ('is a folder' in p.stderr or 'is a FIFO' in p.stderr), p.stderr


def test_unknown_state_is_not_finished(proj):
    "A state file holding no state: poll shows the agent damaged (running), and abort still stops its process"
    r, env = proj
    i = hnb('spawn', 't', '--agent', 'forever', cwd=r, env=env).stdout.strip()
    d = r / '.scope/sessions' / i
    wait_for(lambda: (d / 'pid').exists() and (d / 'pid').read_text().strip(), what='its pid')
    wait_for(lambda: json.loads(hnb('poll', i, cwd=r, env=env).stdout)['status'] == 'running', what='it to run')
    (d / 'state').write_text('runnning')
    p = json.loads(hnb('poll', i, cwd=r, env=env).stdout)
    assert p['status'] == 'running' and "state holds 'runnning'" in p['activity'], p
    pid = int((d / 'pid').read_text().split()[0])
    a = hnb('abort', i, cwd=r, env=env)
    assert a.returncode == 0 and a.stdout.strip() == f'aborted {i}', (a.stdout, a.stderr)
    wait_for(lambda: not Path(f'/proc/{pid}').exists() or Path(f'/proc/{pid}/stat').read_text().split(') ')[1][0] == 'Z', what='its process to end')
    assert json.loads(hnb('poll', i, cwd=r, env=env).stdout)['status'] == 'aborted'


def test_project_agents_file_edited_after_the_spawn_is_used_no_more(tmp_path, tmux_env):
    """The project's agents file edited once an agent runs is untrusted again: the notify command it now names does not
    run when the agent ends (notify.log says why), and a minder started again (the first one killed) does not watch
    the agent's screens by it: the agent fails, naming the file"""
    told, evil = tmp_path / 'told', tmp_path / 'evil'
    r = tmp_path / 'p'
    (r / '.scope').mkdir(parents=True)
    f = r / '.scope' / 'agents.toml'
    f.write_text(f'notify = ["touch", "{told}"]\n[agents.brief]\ncommand = ["sh", "-c", "sleep 1; echo hi"]\n'
                 '[agents.repl]\ncommand = ["sh", "-c", "while true; do echo loading; sleep 0.3; done"]\nready = "(?m)^>$"\nready_timeout = 600\n')
    trust_agents_file(r)
    am = AgentManager(r, tmux=False)  # (no minder: the agent's end is seen here, by the notify of the file as it is then)
    a = am.spawn('t', agent='brief')
    f.write_text(f.read_text().replace(str(told), str(evil)))
    assert am.wait([a], timeout=30)['results'][0]['result'] == 'hi'
    wait_for(lambda: 'notify not run: ' in am.poll(a).get('notify', ''), what='the notify refusal in notify.log')
    assert 'you have not trusted it as it is now' in am.poll(a)['notify'] and not evil.exists() and not told.exists()
    trust_agents_file(r)
    env = {k: v for k, v in tmux_env.items() if k not in ('TMUX', 'TMUX_PANE')}
    b = hnb('spawn', 't', '--agent', 'repl', cwd=r, env=env).stdout.strip()
    minder = wait_for(lambda: (r / '.scope/sessions' / b / 'minder').read_text().split()[:1], what='its minder')
    f.write_text(f.read_text() + '# edited\n')
    os.kill(int(minder[0]), signal.SIGKILL)
    res = wait_for(lambda: (p := json.loads(hnb('poll', b, cwd=r, env=env).stdout))['status'] == 'done' and p, timeout=30, what='the agent to fail')
    assert res['error'] and f'{f} is this project\'s own agents file and you have not trusted it as it is now' in res['result'], res
