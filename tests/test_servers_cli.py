"""`headlesnb serve` and `headlesnb mcp` as commands: how they start, stop and share their kernels.

- A busy port is one line and exit 1; Ctrl-C (SIGINT) ends a server quietly with 130 within about a second, for every transport
  (over stdio too, its stdin still open, as a client or a terminal keeps it).
- With `--kernel python3` every dialog has its own kernel process: a runaway cell in one dialog does not hold up
  another, through the dialoghelper HTTP API and through the official MCP client, and can be interrupted.
- With the default in-process kernel, a cell calling `os._exit` ends its kernel (a `DeadKernelError`), not the server.
Servers are real subprocesses, stopped by PID at the end of each test (conftest's reaper).
"""
import json, os, signal, socket, subprocess, sys, time
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path

import anyio, httpx, psutil, pytest
from conftest import free_port
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)}
ENV.pop('JUPYTER_URL', None)

def hb(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', *map(str, args)], env=ENV, cwd=REPO, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)

def wait_listening(proc, port:int, within:float=60, poll:float=0.1):
    "Until `proc` itself listens on `port` (not another test's server that took the port meanwhile: a signal then came too early)"
    end = time.monotonic() + within
    while True:
        assert proc.poll() is None, f'the server exited ({proc.returncode}): {proc.stderr.read()}'
        with suppress(psutil.NoSuchProcess):
            if any(c.status == 'LISTEN' and c.laddr.port == port for c in psutil.Process(proc.pid).net_connections('tcp')): return
        assert time.monotonic() < end, f'nothing listens on port {port} after {within} s'
        time.sleep(poll)

SERVERS = {'serve': lambda root, port: ('serve', '--root', root, '--port', port),
           'mcp-http': lambda root, port: ('mcp', '--root', root, '--transport', 'http', '--port', port)}

@pytest.mark.parametrize('kind', SERVERS)
def test_a_busy_port_is_one_line_and_exit_1(tmp_path, kind):
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0)); taken.listen()
        port = taken.getsockname()[1]
        p = hb(*SERVERS[kind](tmp_path, port))
        out, err = p.communicate(timeout=60)
    assert p.returncode == 1, err
    assert err.strip().splitlines() == [f'headlesnb {kind.split("-")[0]}: 127.0.0.1 port {port} is already in use (another server?): pick another with --port']

@pytest.mark.parametrize('kind', SERVERS)
def test_port_0_serves_on_the_port_it_names(tmp_path, kind):
    "--port 0: the system picks a free port, and the server names that one and answers on it (it said port 0 and refused every Host)"
    import re
    p = hb(*SERVERS[kind](tmp_path, 0))
    try:
        line = p.stderr.readline()
        port = int(re.search(r'http://127\.0\.0\.1:(\d+)', line).group(1))
        assert port != 0, line
        wait_listening(p, port)
        r = httpx.get(f'http://127.0.0.1:{port}/' if kind == 'serve' else f'http://127.0.0.1:{port}/mcp', timeout=30)
        assert r.status_code != 421, r.text  # the Host the server named is its own
        assert (r.status_code == 200) if kind == 'serve' else r.status_code in (400, 405, 406), (r.status_code, r.text)
    finally:
        p.terminate(); p.wait(30)

@pytest.mark.parametrize('kind', SERVERS)
def test_a_port_outside_the_range_is_refused(tmp_path, kind):
    p = hb(*SERVERS[kind](tmp_path, 65537))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and 'argument --port: 65537: a port is a number from 1 to 65535' in err, err

@pytest.mark.parametrize('kind', [*SERVERS, 'proxy'])
def test_a_token_variable_no_client_can_send_is_refused_in_one_line(tmp_path, kind):
    "The server's token variable holding only spaces (a quoting slip): argparse's one line, exit 2, naming the variable (mcp printed a traceback)"
    var = {'serve': 'HEADLESNB_TOKEN', 'mcp-http': 'HEADLESNB_MCP_TOKEN', 'proxy': 'HEADLESNB_PROXY_TOKEN'}[kind]
    args = ('proxy', '--root', tmp_path, '--port', 0) if kind == 'proxy' else SERVERS[kind](tmp_path, 0)
    p = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', *map(str, args)], env={**ENV, var: '  '}, cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and 'Traceback' not in p.stderr, (p.returncode, p.stderr)
    assert p.stderr.strip().splitlines()[-1].startswith(f"headlesnb {kind.split('-')[0]}: error: argument ${var}: the server's token holds ' '"), p.stderr

@pytest.mark.parametrize('presses', [1, 3])
@pytest.mark.parametrize('kind', SERVERS)
def test_ctrl_c_ends_a_server_quietly_with_130(tmp_path, kind, presses):
    "Pressed again while the server ends, the same (a press during its exit killed it: status -2)"
    port = free_port()
    p = hb(*SERVERS[kind](tmp_path, port))
    wait_listening(p, port)
    for i in range(presses):
        if i: time.sleep(0.15)
        p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130 and 'Traceback' not in err, err
    assert err.strip().splitlines()[0].startswith(f'headlesnb {kind.split("-")[0]}: serving'), err  # where it served, said once
    with socket.socket() as s: assert s.connect_ex(('127.0.0.1', port)) != 0  # and the port is free again

@pytest.mark.parametrize('kind', SERVERS)
def test_ctrl_c_pressed_again_while_a_starting_server_ends_is_130(tmp_path, kind):
    """The first press lands while the server still starts (its port listens before the engine is made), the next ones while
    the process ends: still 130 and quiet (they killed it: status -2, in most rounds)"""
    for i in range(4):
        port = free_port()
        p = hb(*SERVERS[kind](tmp_path, port))
        wait_listening(p, port, poll=0.01)
        for k in range(3):
            if k: time.sleep(0.15)
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 130 and 'Traceback' not in err, (i, p.returncode, err)

def test_ctrl_c_ends_serve_whose_dialog_left_a_thread_running(tmp_path):
    "A dialog's in-process cell started a thread (not a daemon) that runs on: Ctrl-C never ended the server; now 130, quiet, within the exit's bound"
    port = free_port()
    p = hb('serve', '--root', tmp_path, '--port', port)
    wait_listening(p, port)
    with httpx.Client(base_url=f'http://127.0.0.1:{port}', timeout=60) as http:
        end = time.monotonic() + 60
        while http.get('/health').status_code != 200: assert time.monotonic() < end; time.sleep(0.1)
        assert http.post('/create_dialog_', data={'name': 'd'}).status_code == 200
        code = 'import threading, time\nthreading.Thread(target=time.sleep, args=(600,)).start()\nprint("started")'
        r = http.post('/add_relative_', data=dict(dlg_name='d', content=code, msg_type='code', placement='at_end', run='true'))
        assert r.status_code == 200, r.text
        while 'started' not in str((cell := http.post('/read_msg_', data=dict(dlg_name='d', id_=r.json()['id'], n=0)).json()).get('output')):
            assert time.monotonic() < end, cell; time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    try: out, err = p.communicate(timeout=60)  # (without the bound: 600 s)
    except subprocess.TimeoutExpired: p.kill(); p.wait(); pytest.fail('still running 60 s after Ctrl-C')
    assert p.returncode == 130 and err.strip().splitlines()[1:] == [], (p.returncode, err)

def rpc(p, id_, method, **params):
    "One JSON-RPC request to a stdio MCP server, and its reply"
    p.stdin.write(json.dumps(dict(jsonrpc='2.0', id=id_, method=method, params=params)) + '\n'); p.stdin.flush()
    return json.loads(p.stdout.readline())

def stdio_mcp(root) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(root)], env=ENV, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stderr.readline().startswith('headlesnb mcp: serving')
    return p

def ended_by_ctrl_c(p) -> str:
    """SIGINT with stdin still open, as a client (or a terminal) keeps it: the server ends quietly with 130 within seconds (about
    one on an idle machine; 3.0 s seen on CI with two test workers), not once its stdin closes, nor after the 5 s a SIGTERM gets"""
    p.send_signal(signal.SIGINT)
    t = time.monotonic()
    try: p.wait(10)
    except subprocess.TimeoutExpired: p.kill(); p.wait(); pytest.fail('still running 10 s after Ctrl-C')
    assert time.monotonic() - t < 5, f'Ctrl-C took {time.monotonic() - t:.1f} s'
    out, err = p.stdout.read(), p.stderr.read()
    p.stdin.close()
    assert p.returncode == 130 and 'Traceback' not in err and out == '', (p.returncode, out, err)
    return err

@pytest.mark.parametrize('after', [0, 3])
def test_ctrl_c_ends_the_stdio_mcp_server_quietly(tmp_path, after):
    "At once (the server still starting) or after a few seconds of serving (the SDK's stdio server then waits for stdin to close)"
    p = stdio_mcp(tmp_path)
    time.sleep(after)
    ended_by_ctrl_c(p)

def test_ctrl_c_ends_the_stdio_mcp_server_after_a_tool_call(tmp_path):
    p = stdio_mcp(tmp_path)
    assert 'result' in rpc(p, 1, 'initialize', protocolVersion='2025-06-18', capabilities={}, clientInfo=dict(name='t', version='1'))
    p.stdin.write(json.dumps(dict(jsonrpc='2.0', method='notifications/initialized')) + '\n'); p.stdin.flush()
    r = rpc(p, 2, 'tools/call', name='use_notebook', arguments=dict(notebook_name='a', notebook_path='a.ipynb', mode='create'))
    assert not r['result'].get('isError'), r
    r = rpc(p, 3, 'tools/call', name='execute_code', arguments=dict(code='21 * 2'))
    assert '42' in json.dumps(r['result']), r
    time.sleep(1)
    ended_by_ctrl_c(p)
    assert (tmp_path/'a.ipynb').exists()

def test_stdin_closed_while_a_notebook_cannot_be_saved_says_so_in_one_line(tmp_path):
    "The client goes away (stdin closed) while an edit cannot be saved: the one line naming the file, exit 1, no traceback"
    p = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(tmp_path), '--no-durable'], env=ENV, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert 'result' in rpc(p, 1, 'initialize', protocolVersion='2025-06-18', capabilities={}, clientInfo=dict(name='t', version='1'))
    p.stdin.write(json.dumps(dict(jsonrpc='2.0', method='notifications/initialized')) + '\n'); p.stdin.flush()
    assert not rpc(p, 2, 'tools/call', name='use_notebook', arguments=dict(notebook_name='nb', mode='create'))['result'].get('isError')
    assert not rpc(p, 3, 'tools/call', name='insert_cell', arguments=dict(cell_index=-1, cell_type='markdown', cell_source='ours'))['result'].get('isError')
    (elsewhere := tmp_path.parent / f'{tmp_path.name}-outside.ipynb').write_text('{}')
    (tmp_path / 'nb.ipynb').unlink(); (tmp_path / 'nb.ipynb').symlink_to(elsewhere)  # never written through
    p.stdin.close()
    p.wait(60)
    err = p.stderr.read(); p.stdout.close(); p.stderr.close()
    assert p.returncode == 1 and 'Traceback' not in err, (p.returncode, err)
    assert err.strip().splitlines()[-1].startswith(f'headlesnb: could not save {tmp_path / "nb.ipynb"} at exit, so its last changes are lost: '), err
    assert elsewhere.read_text() == '{}'

# ---------------------------------------------------------------- a runaway cell holds up no other dialog
RUNAWAY = 'import os, time\nopen("a-started", "w").write(str(os.getpid()))\ntime.sleep(120)'

def gone(pid:int, within:float=15) -> bool:
    "Process `pid` ended (or is a zombie awaiting its parent) within `within` s"
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE: return True
        except psutil.NoSuchProcess: return True
        time.sleep(0.1)
    return False

def poll(f, within:float, what:str):
    end = time.monotonic() + within
    while not (v := f()):
        assert time.monotonic() < end, f'{what}: not within {within} s'
        time.sleep(0.1)
    return v

@contextmanager
def serve(root, *args):
    port = free_port()
    p = hb('serve', '--root', root, '--port', port, *args)
    wait_listening(p, port)
    with httpx.Client(base_url=f'http://127.0.0.1:{port}', timeout=60) as c:
        def call(ep, **data):
            r = c.post(f'/{ep}', data=data)
            assert r.status_code == 200, f'{ep}: {r.status_code} {r.text}'
            return r.json()
        yield call, p
    p.send_signal(signal.SIGINT)
    assert p.wait(30) == 130

def test_serve_runs_each_dialog_in_its_own_kernel_process(tmp_path):
    with serve(tmp_path, '--kernel', 'python3') as (call, proc):
        for d in ('a', 'b'): call('create_dialog_', name=d)
        a = call('add_relative_', dlg_name='a', msg_type='code', content=RUNAWAY, run='true')['id']
        a_pid = int(poll(lambda: (tmp_path / 'a-started').exists() and (tmp_path / 'a-started').read_text(), 60, 'dialog a started'))
        b = call('add_relative_', dlg_name='b', msg_type='code', content='import os\n(6 * 7, os.getpid())', run='true')['id']
        out = poll(lambda: call('read_msg_', dlg_name='b', id_=b, n=0)['output'], 90, "dialog b's cell answered while a's runs")
        b_pid = int(out.split(',')[1].strip(' )\n'))
        assert out.startswith('(42,') and len({a_pid, b_pid, proc.pid}) == 3  # two kernel processes, neither the server
        assert call('read_msg_', dlg_name='a', id_=a, n=0)['output'] == ''  # a's cell is still running
        assert call('interrupt_', dlg_name='a')['interrupted'] is True
        out = poll(lambda: call('read_msg_', dlg_name='a', id_=a, n=0)['output'], 30, "dialog a's interrupted cell")
        assert 'KeyboardInterrupt' in out
    assert gone(a_pid) and gone(b_pid)  # Ctrl-C on the server stopped its kernels too

@asynccontextmanager
async def mcp_session(root, *extra):
    params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(root), *extra], env=ENV)
    with open(root / 'mcp.log', 'w') as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s

async def ok(s, tool, **args) -> str:
    res = await s.call_tool(tool, args)
    t = '\n'.join(c.text for c in res.content if c.type == 'text')
    assert not res.is_error, f'{tool} {args}: {t}'
    return t

def test_mcp_runs_each_dialog_in_its_own_kernel_process(tmp_path):
    pids = []
    async def go():
        async with mcp_session(tmp_path, '--kernel', 'python3') as s:
            await ok(s, 'use_dialog', dialog_name='a', mode='create')
            await ok(s, 'add_msg', content=RUNAWAY, msg_type='code', run=True, dialog_name='a')
            a_pid = int(poll(lambda: (tmp_path / 'a-started').exists() and (tmp_path / 'a-started').read_text(), 60, 'dialog a started'))
            await ok(s, 'use_dialog', dialog_name='b', mode='create')
            b = (await ok(s, 'add_msg', content='import os\n(6 * 7, os.getpid())', msg_type='code', dialog_name='b')).split()[3]
            with anyio.fail_after(90):  # well before a's cell would end
                out = await ok(s, 'run_msg', msg_id=b, timeout=80, dialog_name='b')
            assert '(42, ' in out and str(a_pid) not in out
            pids.extend([a_pid, int(out.split('(42, ')[1].split(')')[0])])
            r = await ok(s, 'interrupt_dialog', dialog_name='a')
            assert 'interrupted' in r, r
            for _ in range(300):
                if 'KeyboardInterrupt' in await ok(s, 'find_msgs', re_pattern='time.sleep', dialog_name='a'): break
                await anyio.sleep(0.1)
            else: raise AssertionError("dialog a's cell was not interrupted")
    anyio.run(go)
    assert len(pids) == 2 and all(gone(p) for p in pids)  # the client closed: the server ended, and its kernels with it

# ---------------------------------------------------------------- os._exit in a cell of the default (in-process) kernel
def test_os_exit_in_an_in_process_dialog_ends_its_kernel_not_the_server(tmp_path):
    with serve(tmp_path) as (call, proc):
        call('create_dialog_', name='d')
        call('add_relative_', dlg_name='d', msg_type='code', content='x = 1', run='true')
        m = call('add_relative_', dlg_name='d', msg_type='code', content='import os\nos._exit(3)', run='true')['id']
        out = poll(lambda: call('read_msg_', dlg_name='d', id_=m, n=0)['output'], 30, 'the os._exit cell answered')
        assert 'DeadKernelError' in out and 'os._exit(3)' in out, out
        n = call('add_relative_', dlg_name='d', msg_type='code', content='"x" in globals()', run='true')['id']
        assert poll(lambda: call('read_msg_', dlg_name='d', id_=n, n=0)['output'], 30, 'the next cell').strip() == 'False'  # a new kernel
        assert proc.poll() is None  # and the server lives on
