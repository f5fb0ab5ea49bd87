"""In-process cells blocked in C (sleep, a socket or pipe read, `subprocess.run`) stop at their timeout or interrupt.

The servers run their loop in a thread of their own and their in-process cells on the main thread, where a SIGINT
reaches them (06c_kernels.mainthread): `time.sleep(60)` under `timeout=2` ends at about 2 s, with an answer that says it
timed out and was interrupted (not that it could not be), and the next cell runs at once; `interrupt` stops such a
cell long before it would end by itself (how fast, within 1 s, is bench/bench_interrupt.py's figure). Checked through
the official MCP client over stdio and HTTP against `headlesnb mcp`, through `headlesnb serve` with httpx, and through
the Python API on the main thread. Code that ignores SIGINT is still reported stuck, and other notebooks run meanwhile.
Ctrl-C on a server (a cell running or not) still exits quietly with 130, SIGTERM still ends it.
"""
import json, os, signal, socket, subprocess, sys, threading, time
from contextlib import asynccontextmanager, suppress

import anyio, httpx2, pytest
from conftest import free_port
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from test_servers_cli import ENV, hb, poll, serve, wait_listening

pytestmark = pytest.mark.timeout(300)

BLOCKED = {'sleep': 'import time; time.sleep(60)',
           'socket recv': 'import socket; a, b = socket.socketpair(); a.recv(1)',
           'pipe read': 'import os; r, w = os.pipe(); os.read(r, 1)',
           'subprocess': "import subprocess; subprocess.run(['sleep', '60'])"}
STARTED = 'open("started", "w").close()\n'  # a cell that says when it runs, so an interrupt is timed from then
STOPPED = 10  # seconds: a blocked cell (60 s) ended by the stop, not by itself; how fast (within 1 s) is bench_interrupt's figure

def text(res) -> str: return '\n'.join(c.text for c in res.content if c.type == 'text')

def check_timed_out(t:str, took:float, what:str, timeout:float=2):
    """`t`, the answer to a run with `timeout`, says first, once, that it timed out and was interrupted: not before its timeout,
    and well before its 60 s cell would end (how soon after is bench_interrupt's figure: CI's loaded cores took 2.6 s for 1 s)"""
    assert timeout - 0.5 <= took < timeout + STOPPED, f'{what}: the timeout={timeout} run took {took:.2f} s: {t}'
    assert 'could not be interrupted' not in t and 'stuck' not in t, f'{what}: {t}'
    first = t.splitlines()[0]  # says how it stopped, once (the cell's own error output says it too, as Jupyter stores it)
    assert f'exceeded {timeout:g} seconds and was interrupted' in first and t.count(first) == 1, f'{what}: {t}'
    assert t.count('timed out after') == 1, f'{what}: {t}'

# ---------------------------------------------------------------- MCP, stdio and HTTP
@asynccontextmanager
async def mcp(root, transport:str):
    "An MCP client session to a `headlesnb mcp` subprocess over `transport`, with notebook 'n' created and active"
    if transport == 'stdio':
        params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(root)], env=ENV)
        with open(root / 'mcp.log', 'w') as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                await s.call_tool('use_notebook', dict(notebook_name='n', mode='create'))
                yield s
        return
    port = free_port()
    p = hb('mcp', '--root', root, '--transport', 'http', '--port', port)
    try:
        wait_listening(p, port)
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as hc:
            async with streamable_http_client(f'http://127.0.0.1:{port}/mcp', http_client=hc) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                await s.call_tool('use_notebook', dict(notebook_name='n', mode='create'))
                yield s
    finally:
        p.send_signal(signal.SIGINT)
        assert p.wait(30) == 130

@pytest.mark.parametrize('transport', ['stdio', 'http'])
def test_mcp_timeout_stops_blocked_cells_and_the_next_runs_at_once(tmp_path, transport):
    async def go():
        async with mcp(tmp_path, transport) as s:
            assert '2' in text(await s.call_tool('execute_code', dict(code='1 + 1')))  # the kernel is started
            for what, code in BLOCKED.items():
                t0 = time.monotonic()
                t = text(await s.call_tool('execute_code', dict(code=code, timeout=2)))
                check_timed_out(t, time.monotonic() - t0, what)
                t0 = time.monotonic()
                res = await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source='6 * 7'))
                assert not res.is_error and '42' in text(res), f'after {what}: {text(res)}'
                assert time.monotonic() - t0 < STOPPED, f'after {what}: the next cell took {time.monotonic() - t0:.2f} s'
    anyio.run(go)

@pytest.mark.parametrize('transport', ['stdio', 'http'])
def test_mcp_interrupt_stops_a_sleeping_cell(tmp_path, transport):
    async def go():
        async with mcp(tmp_path, transport) as s:
            await s.call_tool('execute_code', dict(code='1/0'))  # a process's first traceback imports its formatting: not timed
            box = {}
            async def run():
                box['res'] = await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source=STARTED + BLOCKED['sleep'], timeout=120))
                box['t'] = time.monotonic()
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                with anyio.fail_after(60):
                    while not (tmp_path / 'started').exists(): await anyio.sleep(0.02)
                await anyio.sleep(0.2)  # inside the sleep
                assert "interrupted the code running in 'n'" in text(await s.call_tool('interrupt', dict(notebook_name='n')))
                t0 = time.monotonic()  # the stop is sent when the interrupt answers (its own round trip is not the cell's)
            t = text(box['res'])
            assert box['t'] - t0 < STOPPED, f"the run ended {box['t'] - t0:.2f} s after the interrupt: {t}"
            assert 'KeyboardInterrupt' in t and 'could not be interrupted' not in t, t
            assert '42' in text(await s.call_tool('execute_code', dict(code='6 * 7')))
    anyio.run(go)

DEAF = ('import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n'
        'try: time.sleep(4)\nfinally: signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})')  # deaf to SIGINT for 4 s

def test_mcp_a_cell_deaf_to_sigint_is_reported_stuck_and_other_notebooks_run(tmp_path):
    "Code in C that ignores SIGINT holds the main thread: its run is reported stuck, other notebooks run meanwhile, and it recovers"
    async def go():
        async with mcp(tmp_path, 'stdio') as s:
            await s.call_tool('execute_code', dict(code='1'))
            t0 = time.monotonic()
            t = text(await s.call_tool('execute_code', dict(code=DEAF, timeout=1)))
            assert time.monotonic() - t0 < 3 and 'could not be interrupted' in t, t
            res = await s.call_tool('execute_code', dict(code='1'))
            assert res.is_error and 'stuck' in text(res), text(res)  # refused while the call goes on
            await s.call_tool('use_notebook', dict(notebook_name='other', mode='create'))
            t0 = time.monotonic()
            assert '42' in text(await s.call_tool('execute_code', dict(code='6 * 7', notebook_name='other')))
            assert time.monotonic() - t0 < 3  # not waiting for the main thread (held 4 s)
            await anyio.sleep(4)
            t = text(await s.call_tool('execute_code', dict(code='6 * 7', notebook_name='n')))
            assert '42' in t, t  # the call returned: the kernel works again, without a restart
            t0 = time.monotonic()
            t = text(await s.call_tool('execute_code', dict(code=BLOCKED['sleep'], timeout=1)))
            check_timed_out(t, time.monotonic() - t0, 'a sleep after the stuck cell', timeout=1)  # on the main thread again
    anyio.run(go)

SELF_SIGINT = {  # the ways a cell sends SIGINT to its own process: in a kernel's own process they interrupt the cell
    'interrupt_main': 'import _thread; _thread.interrupt_main()',
    'os.kill': 'import os, signal; os.kill(os.getpid(), signal.SIGINT)',
    'raise_signal': 'import signal; signal.raise_signal(signal.SIGINT)',
    'a thread': ('import signal, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), '
                 'signal.pthread_kill(threading.main_thread().ident, signal.SIGINT))).start()')}

def test_mcp_a_cell_that_interrupts_its_own_process_stops_only_itself(tmp_path):
    "In-process, the cell's process is the server's: a SIGINT it sends itself stops the cell, not the server (as Ctrl-C would)"
    async def go():
        async with mcp(tmp_path, 'stdio') as s:
            for what, code in SELF_SIGINT.items():
                t0 = time.monotonic()
                t = text(await s.call_tool('execute_code', dict(code=code + '\nimport time; time.sleep(20); print("went " + "on")', timeout=60)))
                assert 'KeyboardInterrupt' in t and 'went on' not in t and time.monotonic() - t0 < STOPPED, f'{what}: {t}'
                assert '42' in text(await s.call_tool('execute_code', dict(code='6 * 7'))), f'after {what}'
            code = ('import os, signal, time\ngot = []\nsignal.signal(signal.SIGINT, lambda *a: got.append(1))\n'
                    'os.kill(os.getpid(), signal.SIGINT); time.sleep(0.1); print("handled", got)')
            assert 'handled [1]' in text(await s.call_tool('execute_code', dict(code=code)))  # a cell's own handler gets its signal
            assert '42' in text(await s.call_tool('execute_code', dict(code='6 * 7')))
    anyio.run(go)

# ---------------------------------------------------------------- headlesnb serve (the dialoghelper HTTP API)
def test_serve_interrupt_stops_blocked_cells(tmp_path):
    with serve(tmp_path) as (call, p):  # (Ctrl-C at the end: exit 130)
        call('create_dialog_', name='d')
        for what in ('sleep', 'subprocess', 'socket recv'):
            (tmp_path / 'started').unlink(missing_ok=True)
            m = call('add_relative_', dlg_name='d', msg_type='code', content=STARTED + BLOCKED[what], run='true')['id']
            poll(lambda: (tmp_path / 'started').exists(), 60, f'{what}: the cell started')
            time.sleep(0.2)
            assert call('interrupt_', dlg_name='d')['interrupted'] is True
            t0 = time.monotonic()  # the stop is sent when the interrupt answers
            out = poll(lambda: call('read_msg_', dlg_name='d', id_=m, n=0)['output'], 10, f'{what}: the interrupted cell')
            assert time.monotonic() - t0 < STOPPED, f'{what}: the cell ended {time.monotonic() - t0:.2f} s after the interrupt: {out}'
            assert 'KeyboardInterrupt' in out and 'could not be interrupted' not in out, out
            n = call('add_relative_', dlg_name='d', msg_type='code', content='6 * 7', run='true')['id']
            assert poll(lambda: call('read_msg_', dlg_name='d', id_=n, n=0)['output'], 5, f'after {what}: the next cell').strip() == '42'

# ---------------------------------------------------------------- Ctrl-C and SIGTERM with a cell running
def start_sleeping(kind:str, root):
    "A server of `kind` running `time.sleep(60)` in an in-process cell: (process, port)"
    port = free_port()
    if kind == 'serve':
        p = hb('serve', '--root', root, '--port', port)
        wait_listening(p, port)
        c = httpx2.Client(base_url=f'http://127.0.0.1:{port}', timeout=60)
        assert c.post('/create_dialog_', data=dict(name='d')).status_code == 200
        assert c.post('/add_relative_', data=dict(dlg_name='d', msg_type='code', content=STARTED + BLOCKED['sleep'], run='true')).status_code == 200
        c.close()
    else:
        p = hb('mcp', '--root', root, '--transport', 'http', '--port', port)
        wait_listening(p, port)
        async def go():  # the client waits for its answer while the server stops (it may get the interrupted cell's, or none)
            with suppress(BaseException):
                async with httpx2.AsyncClient(timeout=60) as hc:
                    async with streamable_http_client(f'http://127.0.0.1:{port}/mcp', http_client=hc) as (r, w), ClientSession(r, w) as s:
                        await s.initialize()
                        await s.call_tool('use_notebook', dict(notebook_name='n', mode='create'))
                        await s.call_tool('execute_code', dict(code=STARTED + BLOCKED['sleep'], timeout=120))
        threading.Thread(target=anyio.run, args=(go,), daemon=True).start()
    poll(lambda: (root / 'started').exists(), 60, 'the cell started')
    time.sleep(0.2)
    return p, port

@pytest.mark.parametrize('kind', ['serve', 'mcp-http'])
@pytest.mark.parametrize('sig', ['SIGINT', 'SIGTERM'])
def test_a_signal_stops_a_server_running_a_sleeping_cell(tmp_path, kind, sig):
    p, port = start_sleeping(kind, tmp_path)
    t0 = time.monotonic()
    p.send_signal(getattr(signal, sig))
    out, err = p.communicate(timeout=30)
    took = time.monotonic() - t0
    want = 130 if sig == 'SIGINT' else -signal.SIGTERM
    assert p.returncode == want and 'Traceback' not in err, f'{p.returncode}: {err}'
    assert took < 5, f'{sig} took {took:.2f} s to stop the server'
    with socket.socket() as s: assert s.connect_ex(('127.0.0.1', port)) != 0

@pytest.mark.parametrize('kind', ['serve', 'mcp-http', 'mcp-stdio'])
def test_sigterm_ends_an_idle_server(tmp_path, kind):
    if kind == 'mcp-stdio':
        p = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(tmp_path)], env=ENV, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stderr.readline().startswith('headlesnb mcp: serving')
    else:
        port = free_port()
        p = hb(*(('serve',) if kind == 'serve' else ('mcp', '--transport', 'http')), '--root', tmp_path, '--port', port)
        wait_listening(p, port)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGTERM and 'Traceback' not in err, f'{p.returncode}: {err}'

def stdio_running(root, code:str, timeout:float) -> subprocess.Popen:
    "`headlesnb mcp` over stdio (JSON-RPC written by hand: the test owns the pipes) running `code` in a cell, as call 3, once it said it started"
    p = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(root)], env=ENV, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    def send(m): p.stdin.write(json.dumps(dict(jsonrpc='2.0', **m)) + '\n'); p.stdin.flush()
    send(dict(id=1, method='initialize', params=dict(protocolVersion='2025-06-18', capabilities={}, clientInfo=dict(name='t', version='1'))))
    assert 'result' in json.loads(p.stdout.readline())
    send(dict(method='notifications/initialized'))
    send(dict(id=2, method='tools/call', params=dict(name='use_notebook', arguments=dict(notebook_name='n', mode='create'))))
    assert 'result' in json.loads(p.stdout.readline())
    send(dict(id=3, method='tools/call', params=dict(name='execute_code', arguments=dict(code=STARTED + code, timeout=timeout))))
    poll(lambda: (root / 'started').exists(), 60, 'the cell started')
    return p

def stdio_sleeping(root) -> subprocess.Popen:
    "`headlesnb mcp` over stdio running `time.sleep(60)` in a cell"
    p = stdio_running(root, BLOCKED['sleep'], 120)
    time.sleep(0.2)
    return p

def test_ctrl_c_stops_the_stdio_server_running_a_sleeping_cell(tmp_path):
    """Ctrl-C interrupts the running cell and stops the server, which answers the pending call at once (as before: the
    connection is closing), and ends with 130 when its stdin closes (in a terminal the client gets the Ctrl-C too, and
    its end closes the server's stdin, which the SDK's stdio server waits for)"""
    p = stdio_sleeping(tmp_path)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    answer = json.loads(p.stdout.readline())
    assert answer['id'] == 3 and time.monotonic() - t0 < 10, answer  # (the cell sleeps much longer)
    p.stdin.close()
    assert p.wait(30) == 130 and time.monotonic() - t0 < 15, time.monotonic() - t0
    assert 'Traceback' not in p.stderr.read()

def test_ctrl_c_that_comes_with_the_kernels_own_stop_still_stops_the_server(tmp_path):
    """A Ctrl-C arriving while the kernel's own stop of a cell is on its way is not taken for that stop (two SIGINTs that
    come together are handled once): the cell stops and so does the server. The cell holds both back (it blocks every
    signal on the main thread and waits in C) until the Ctrl-C has come, so they meet however fast the machine is"""
    deaf = 'import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())\nctypes.CDLL(None).sleep(3)\nprint("went " + "on")'
    p = stdio_running(tmp_path, deaf, 1)
    time.sleep(1.5)  # the timeout's stop was sent at 1 s
    p.send_signal(signal.SIGINT)
    answer = json.loads(p.stdout.readline())  # at about 3 s, when the cell sees its signals
    assert answer['id'] == 3 and 'went on' not in json.dumps(answer), answer
    p.stdin.close()
    assert p.wait(30) == 130, 'the Ctrl-C was lost: the server went on'
    assert 'Traceback' not in p.stderr.read()

def test_sigterm_ends_the_stdio_server_running_a_sleeping_cell_with_its_stdin_open(tmp_path):
    p = stdio_sleeping(tmp_path)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == -signal.SIGTERM and time.monotonic() - t0 < 8, time.monotonic() - t0
    assert 'Traceback' not in p.stderr.read()

# ---------------------------------------------------------------- the Python API, on the main thread
@pytest.mark.parametrize('what', BLOCKED)
def test_api_kernel_timeout_stops_blocked_cells(what):
    from headlesnb.kernels.inprocess import InProcessKernel
    assert threading.current_thread() is threading.main_thread()
    with InProcessKernel(main_thread=True) as k:
        k.run('1')
        t0 = time.monotonic()
        r = k.run(BLOCKED[what], timeout=2)
        took = time.monotonic() - t0
        assert (r.status, r.stuck) == ("timeout", False) and 1.9 < took < STOPPED, (took, r)
        t0 = time.monotonic()
        assert k.run('6 * 7').outputs[-1]['data']['text/plain'] == ['42'] and time.monotonic() - t0 < STOPPED  # (not after the 60 s cell)

def test_api_kernel_interrupt_stops_a_sleep():
    from headlesnb.kernels.inprocess import InProcessKernel
    with InProcessKernel(main_thread=True) as k:
        ev = threading.Event()
        k.namespace['ev'] = ev
        box = {}
        def stop():
            ev.wait(30); time.sleep(0.2)
            box['t0'] = time.monotonic(); k.interrupt()
        threading.Thread(target=stop, daemon=True).start()
        r = k.run('ev.set()\nimport time; time.sleep(60)')
        took = time.monotonic() - box['t0']
        assert r.status == 'interrupted' and took < STOPPED, (took, r)

def test_api_a_stop_reaches_a_cell_as_a_jupyter_interrupt_would():
    "A cell's own SIGINT handler gets the stop; a cell holding SIGINT back is stopped once it lets it through, not before"
    from headlesnb.kernels.inprocess import InProcessKernel
    with InProcessKernel(main_thread=True) as k:
        r = k.run('import signal, time\ngot = []\nsignal.signal(signal.SIGINT, lambda *a: got.append(1))\n'
                  'while not got: time.sleep(0.01)\nprint("handled")', timeout=0.5)
        assert 'handled' in str(r.outputs) and k.namespace['got'], r
        t0 = time.monotonic()
        r = k.run('import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\ntime.sleep(1.5)\nprint("held")\n'
                  'signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\ntime.sleep(30)', timeout=0.5)
        took = time.monotonic() - t0
        assert r.status == 'timeout' and 'held' in str(r.outputs) and 1.4 < took < STOPPED, (took, r)  # (held 1.5 s, not 30)
        assert k.run('6 * 7').outputs[-1]['data']['text/plain'] == ['42']

def test_api_manager_timeout_stops_a_sleep(tmp_path):
    "The managers' in-process kernels run a main-thread caller's cells on the main thread (09_base passes main_thread=True)"
    from headlesnb.notebook import NotebookManager
    with NotebookManager(tmp_path) as nm:
        nm.use_notebook('n', mode='create')
        nm.execute_code('1')
        t0 = time.monotonic()
        r = nm.execute_code(BLOCKED['sleep'], timeout=2)
        assert time.monotonic() - t0 < STOPPED and r['status'] == 'timeout', r
        t0 = time.monotonic()
        assert nm.execute_code('6 * 7')['status'] == 'ok' and time.monotonic() - t0 < STOPPED  # (not after the 60 s cell)
