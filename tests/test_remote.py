"RemoteKernel against a real `jupyter server` and a real Jupyter Enterprise Gateway 3.3 on 127.0.0.1"
import json, logging, os, re, secrets, subprocess, sys, textwrap, time
from dataclasses import dataclass
from pathlib import Path

import nbformat, pytest, requests
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from conftest import free_port, interrupt_soon, joined_streams, run_text
from headlesnb.errors import BadArgumentError, KernelError, NotFoundError
from headlesnb.kernels.remote import RemoteKernel
from headlesnb.base import make_kernel

EG_VENV = Path(os.environ.get('HEADLESNB_EG_VENV', Path.home() / '.cache/headlesnb/eg-venv-3.3.0'))

@dataclass
class Server:
    name: str; url: str; token: str; root: Path; proc: subprocess.Popen; log: Path
    def get(self, path): return requests.get(self.url + path, headers={'Authorization': f'token {self.token}'}, timeout=10)
    def kernel_ids(self):
        "The server's kernels (asked again after an error: listing them while one shuts down can fail with 500)"
        for _ in range(20):
            r = self.get('/api/kernels')
            if r.status_code == 200: return {m['id'] for m in r.json()}
            time.sleep(0.2)
        raise AssertionError(f'{self.name}: GET /api/kernels answered {r.status_code}: {r.text[:500]}')

def _serve(name, cmd, env, root, token, tmp) -> Server:
    log = tmp / f'{name}.log'
    port = free_port()
    proc = subprocess.Popen([*cmd, '--ip=127.0.0.1', f'--port={port}'], env={**os.environ, **env}, cwd=root,
                            stdout=open(log, 'w'), stderr=subprocess.STDOUT)
    s, end = Server(name, f'http://127.0.0.1:{port}', token, root, proc, log), time.monotonic() + 120
    while time.monotonic() < end:
        if proc.poll() is not None: pytest.fail(f'{name} exited ({proc.returncode}) while starting:\n{log.read_text()[-3000:]}')
        try:
            if s.get('/api/kernelspecs').ok: return s
        except requests.RequestException: pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f'{name} did not answer within 120 s:\n{log.read_text()[-3000:]}')

def _stop(s:Server):
    s.proc.terminate()
    try: s.proc.wait(15)
    except subprocess.TimeoutExpired: s.proc.kill(); s.proc.wait(5)

@pytest.fixture(scope='module')
def jupyter_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('jupyter-server'); root = tmp / 'root'; root.mkdir()
    token = secrets.token_hex(16)
    s = _serve('jupyter server', [sys.executable, '-m', 'jupyter_server', '--no-browser', '--allow-root',
                                  f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root}'], {}, root, token, tmp)
    yield s
    _stop(s)

@pytest.fixture(scope='module')
def enterprise_gateway(tmp_path_factory):
    exe = EG_VENV / 'bin' / 'jupyter-enterprisegateway'
    if not exe.exists(): pytest.fail(f'Jupyter Enterprise Gateway 3.3 is not installed at {EG_VENV}: run tests/setup.sh (it builds that venv)')
    tmp = tmp_path_factory.mktemp('enterprise-gateway'); root = tmp / 'root'; root.mkdir()
    spec = tmp / 'jupyter' / 'kernels' / 'python3'; spec.mkdir(parents=True)
    # the gateway runs the same interpreter and ipykernel as local kernels, so outputs compare with nbclient's
    (spec / 'kernel.json').write_text(json.dumps({'argv': [sys.executable, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
                                                  'display_name': 'Python 3', 'language': 'python'}))
    other = tmp / 'jupyter' / 'kernels' / 'julia-here'; other.mkdir()  # a kernelspec only the gateway has (never started)
    (other / 'kernel.json').write_text(json.dumps({'argv': ['julia', '{connection_file}'], 'display_name': 'Julia', 'language': 'julia'}))
    token = secrets.token_hex(16)
    env = {'EG_AUTH_TOKEN': token, 'EG_UNAUTHORIZED_USERS': 'nobody-in-particular',  # by default it refuses kernels for root
           'EG_LIST_KERNELS': 'True', 'JUPYTER_PATH': str(tmp / 'jupyter')}
    s = _serve('enterprise gateway', [str(exe)], env, root, token, tmp)
    yield s
    _stop(s)

@pytest.fixture(scope='module', params=['jupyter_server', 'enterprise_gateway'])
def server(request) -> Server:
    "Each server in turn (module scope: started before conftest's per-test reaper looks, so it is not reaped)"
    return request.getfixturevalue(request.param)

@pytest.fixture
def rk(server):
    k = RemoteKernel(server.url, server.token)
    yield k
    k.close()


PROBES = [
    'import sys\nprint("a", flush=True)\nprint("b", file=sys.stderr, flush=True)\nprint("c")',
    'from IPython.display import display, HTML, clear_output\ndisplay(HTML("<b>x</b>"))\n1',
    'for i in range(3): print(i, flush=True)\nclear_output(wait=True)\nprint("last")',
    'h = display("first", display_id=True)\nh.update("second")',
    'h.update("third")',
    '1/0',
    'input("?")',
    'x = 10\nx?',
    '%%html\n<i>h</i>',
    'x * 2',
]

def _norm(v):
    if isinstance(v, str): return re.sub(r'ipykernel_\d+/\d+\.py', 'ipykernel_N/N.py', re.sub(r'0x[0-9a-f]+', '0xADDR', v))
    if isinstance(v, dict): return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list): return [_norm(x) for x in v]
    return v

def test_outputs_are_nbclients(server, rk):
    "The same cells through nbclient on a local kernel and through the remote kernel: identical stored outputs"
    nb = new_notebook(cells=[new_code_cell(c) for c in PROBES])
    NotebookClient(nb, kernel_name='python3', allow_errors=True).execute()
    theirs = [(c.get('execution_count'), _norm(joined_streams(c['outputs']))) for c in json.loads(nbformat.writes(nb))['cells']]
    results = [rk.run(c) for c in PROBES]
    for r in results:
        for u in r.display_updates:
            earlier = next(x for x in results if x.execution_count == u['execution_count'])
            earlier.outputs[u['output_index']].update(data=u['data'], metadata=u['metadata'])
    ours = [(r.execution_count, _norm(joined_streams(r.outputs))) for r in results]
    for i, (t, o) in enumerate(zip(theirs, ours)): assert o == t, f'{server.name}, cell {i+1} differs:\n{PROBES[i]}\nnbclient: {t}\nours:     {o}'
    assert results[0].started < results[0].ended and rk.kernel_id in server.kernel_ids()

def test_timeout_and_interrupt(server, rk):
    rk.run('x = 1')
    t0 = time.monotonic()
    r = rk.run('import time; time.sleep(100)', timeout=1)
    assert (r.status, r.outputs[-1]['ename']) == ('timeout', 'ExecutionTimeout') and time.monotonic() - t0 < 15
    interrupt_soon(rk)
    r = rk.run('import time; time.sleep(30)')
    assert (r.status, r.outputs[-1]['ename'] if r.outputs else None) == ('interrupted', 'KeyboardInterrupt'), r
    assert run_text(rk.run('x')) == '1'  # the kernel lived through both

def test_a_kill_says_how_long_the_cell_was_given(server):
    "A cell deaf to SIGINT whose kernel still answers is given ten stop graces before the kill: the message says that many seconds"
    with RemoteKernel(server.url, server.token, stop_grace=1) as k:
        t0 = time.monotonic()
        r = k.run('import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(120)', timeout=1)
        took = time.monotonic() - t0
    said = float(re.search(r'did not stop within ([\d.]+)s', r.outputs[-1]['evalue']).group(1))
    assert r.status == 'timeout' and 9 <= said <= took, (said, took, r.outputs)


def test_hard_stop_restarts_the_kernel_on_the_server(server, rk):
    rk.run('x = 1')
    kid, t0 = rk.kernel_id, time.monotonic()
    r = rk.run('sum(range(10**13))', timeout=1)
    r2 = rk.run('"x" in globals()')
    took = time.monotonic() - t0
    assert r.status == 'timeout' and 'its kernel was killed' in r.outputs[-1]['evalue'], r
    said = float(re.search(r'did not stop within ([\d.]+)s', r.outputs[-1]['evalue']).group(1))
    assert took - 15 < said <= took, (said, took)  # the seconds it was given to stop, as they were: 5 s, or 50 if its kernel still answered
    assert (run_text(r2), rk.kernel_id) == ('False', kid)  # a new process under the same id
    print(f'{server.name}: remote hard stop and next cell in {took:.1f}s')
    assert took < 60

def test_restart(server, rk):
    rk.run('y = 2'); rk.run('y')
    kid = rk.kernel_id
    rk.restart()
    r = rk.run('"y" in globals()')
    assert (run_text(r), r.execution_count, rk.kernel_id) == ('False', 1, kid)

def test_dying_kernel_is_survived(server, rk):
    rk.run('x = 1')
    r = rk.run('import os; os._exit(5)')
    assert r.status == 'dead' and r.outputs[-1]['ename'] == 'DeadKernelError', r
    assert 'the server reported the kernel' in r.outputs[-1]['evalue']
    r2 = rk.run('"x" in globals()')
    assert (r2.status, run_text(r2)) == ('ok', 'False')

def test_attach_by_kernel_id_and_shutdown_on_close(server):
    k = RemoteKernel(server.url, server.token)
    k.run('shared = "yes"')
    kid = k.kernel_id
    with make_kernel('python3', jupyter_url=server.url, jupyter_token=server.token, kernel_id=kid) as k2:
        assert type(k2) is RemoteKernel and not k2.owned
        assert run_text(k2.run('shared')) == "'yes'"
    assert kid in server.kernel_ids()  # letting go of an attached kernel does not shut it down
    assert run_text(k.run('shared')) == "'yes'"
    k.close()
    assert kid not in server.kernel_ids()
    with pytest.raises(KernelError, match='does not exist'): RemoteKernel(server.url, server.token, kernel_id=kid).run('1')

def test_variables(server, rk):
    rk.run('xs = [1, 2, 3]\n_p = 1\nimport os')
    assert rk.variables() == [{'name': 'xs', 'type': 'list', 'repr': '[1, 2, 3]', 'len': 3}]
    v = rk.variable('xs')
    assert (v['type'], v['repr'], v['len']) == ('list', '[1, 2, 3]', 3) and 'Docstring' in v['inspection']
    with pytest.raises(NotFoundError): rk.variable('nope')
    with pytest.raises(BadArgumentError): rk.variable('xs; 1')
    assert 'xs' in rk.complete('x') and 'list' in rk.inspect('xs')

def test_clear_errors(server):
    with pytest.raises(KernelError, match='refused the token'): RemoteKernel(server.url, 'wrong-token').run('1')
    with pytest.raises(KernelError, match=r"the kernel 'ir' is not installed on .*; installed there: .*python3"):
        RemoteKernel(server.url, server.token, kernel_name='ir').run('1')
    with pytest.raises(KernelError, match='cannot be reached'): RemoteKernel(f'http://127.0.0.1:{free_port()}', 't').run('1')
    with pytest.raises(BadArgumentError): RemoteKernel('ftp://x', 't')

def test_a_url_that_answers_no_json_is_a_clear_error(tmp_path, jupyter_server):
    """A web server that is not a Jupyter server answering the API's address with a page (a plain http.server here, a login
    page elsewhere): a KernelError naming the URL, and what to check, rather than a bare JSONDecodeError. Never the token shown"""
    from headlesnb.kernels.subkernel import list_kernelspecs
    (tmp_path / 'api' / 'kernelspecs').mkdir(parents=True)
    (tmp_path / 'api' / 'kernelspecs' / 'index.html').write_text('<html><body>Log in</body></html>')
    port = free_port()
    web = subprocess.Popen([sys.executable, '-m', 'http.server', str(port), '--bind', '127.0.0.1'], cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        plain = f'http://127.0.0.1:{port}'
        end = time.monotonic() + 30
        while True:
            try: requests.get(plain, timeout=5); break
            except requests.RequestException:
                assert time.monotonic() < end, 'http.server did not answer'; time.sleep(0.1)
        for token in (None, 'sekrit'):
            for call in (lambda: list_kernelspecs(plain, token), lambda: RemoteKernel(plain, token).run('1')):
                with pytest.raises(KernelError) as e: call()
                msg = str(e.value)
                assert msg.startswith(f'{plain} answered GET /api/kernelspecs with text/html rather than JSON') and 'Jupyter' in msg, msg
                assert 'sekrit' not in msg and 'jupyter server list' in msg, msg
        with pytest.raises(KernelError) as e: RemoteKernel(f'{plain}/lab?token=sekrit').run('1')  # (the page's URL: its token taken, never shown)
        assert str(e.value).startswith(f'{plain} answered GET /api/kernelspecs with text/html') and 'sekrit' not in str(e.value), e.value
    finally: web.kill(); web.wait()

def test_the_url_jupyterlab_prints_is_the_server_and_its_token(tmp_path, jupyter_server):
    """The URL JupyterLab prints (`/lab?token=T`), `/?token=T` or a page's address names the server and its token, as on the shared
    documents' side: kernels start there, for `RemoteKernel`, `list_kernelspecs` and a manager given it as `jupyter_url`"""
    from headlesnb.kernels.subkernel import list_kernelspecs
    from headlesnb import NotebookManager
    url, tok = jupyter_server.url, jupyter_server.token
    for given in (f'{url}/lab?token={tok}', f'{url}/?token={tok}', f'{url}/lab/tree/x.ipynb?token={tok}'):
        assert 'python3' in list_kernelspecs(given)
        with RemoteKernel(given) as k:
            assert ''.join(k.run('1+1').outputs[0]['data']['text/plain']) == '2'
            assert tok not in repr(k) and k.url == url, (repr(k), k.url)
    with pytest.raises(BadArgumentError, match='two different tokens'): RemoteKernel(f'{url}/lab?token={tok}', 'other')
    nm = NotebookManager(tmp_path, kernel='python3', jupyter_url=f'{url}/lab?token={tok}')
    try:
        nm.use_notebook('n', 'n.ipynb', mode='create')
        nm.insert_cell(0, 'code', 'import os; os.getpid()')
        r = nm.execute_cell(0)
        assert r['status'] == 'ok' and int(''.join(r['outputs'][0]['data']['text/plain'])) != os.getpid(), r
    finally: nm.close_all()

def test_a_notebooks_kernel_starts_in_its_folder_on_the_server(tmp_path, jupyter_server):
    """As JupyterLab starts it: a notebook's kernel on a Jupyter server runs in the notebook's folder (its path on the server found by
    a probe file, as for shared documents), for a manager and for `headlesnb run` (its --cwd too); a folder the server does not
    serve: the server's own, and the answer says so"""
    from headlesnb import NotebookManager
    s = jupyter_server
    proj = s.root / 'proj'; (proj / 'sub' / 'data').mkdir(parents=True)
    nm = NotebookManager(proj, jupyter_url=s.url, jupyter_token=s.token)
    try:
        nm.use_notebook('c', 'sub/c.ipynb', mode='create')
        r = nm.insert_execute_code_cell(-1, 'import os; os.getcwd()')
        assert r['status'] == 'ok' and run_text_of(r) == repr(str(proj / 'sub')), r
        assert not list(proj.rglob('headlesnb-probe-*'))
        k, = nm.list_kernels()  # (a process id would be a number of this machine: the server's kernel goes by its id there)
        assert (k['backend'], k['pid']) == ('remote', None) and k['kernel_id'] in s.kernel_ids(), k
    finally: nm.close_all()
    nb = new_notebook(cells=[new_code_cell('import os; print(os.getcwd())')], metadata={'kernelspec': {'name': 'python3', 'language': 'python', 'display_name': 'Python 3'}})
    nbformat.write(nb, proj / 'sub' / 'cwd.ipynb')
    for extra, where in (([], proj / 'sub'), (['--cwd', 'sub/data'], proj / 'sub' / 'data')):
        r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'run', 'sub/cwd.ipynb', 'out.ipynb', '--jupyter-url', s.url, *extra],
                           cwd=proj, env={**os.environ, 'JUPYTER_TOKEN': s.token}, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert joined_streams(nbformat.read(proj / 'out.ipynb', as_version=4).cells[0].outputs)[0]['text'] == f'{where}\n'
    elsewhere = tmp_path / 'elsewhere'; elsewhere.mkdir()
    nm = NotebookManager(elsewhere, jupyter_url=s.url, jupyter_token=s.token)
    try:
        nm.use_notebook('e', 'e.ipynb', mode='create')
        r = nm.insert_execute_code_cell(-1, 'import os; os.getcwd()')
        assert run_text_of(r) == repr(str(s.root)), r
        assert "started in the Jupyter server's own folder" in r.get('notice', ''), r
    finally: nm.close_all()

def run_text_of(answer) -> str: return ''.join(answer['outputs'][0]['data']['text/plain'])

def test_a_notebook_closed_while_its_kernel_starts_ends_its_run_interrupted(jupyter_server):
    """Closed while its run's kernel still starts on the server (the close does not wait for that): the run ends interrupted
    before it ran, as a queued run closed does, not failed on the notebook it no longer finds; the file is as it was"""
    from headlesnb import NotebookManager
    s = jupyter_server
    proj = s.root / 'closing'; proj.mkdir()
    nm = NotebookManager(proj, jupyter_url=s.url, jupyter_token=s.token)
    nm.use_notebook('n', 'n.ipynb', mode='create')
    nm.insert_cell(0, 'code', 'print(1)')
    r = nm.execute_cell(0, wait=0)
    end = time.monotonic() + 10
    while nm.get_run(r['run_id'])['status'] == 'queued' and time.monotonic() < end: time.sleep(0.005)
    assert nm.get_run(r['run_id'])['status'] == 'running' and not nm.list_kernels()[0]['status'] == 'idle'  # its turn: the kernel starts
    nm.close_all()
    g = nm.get_run(r['run_id'], wait=30)
    assert (g['status'], g['reason'], g['done']) == ('interrupted', 'interrupted before it ran', True), g
    assert [o.get('evalue') for o in g['outputs']] in ([], ['The cell was interrupted before it ran.']), g
    assert nbformat.read(proj / 'n.ipynb', as_version=4).cells[0].outputs == []


def test_a_server_killed_mid_run_is_named(tmp_path):
    "The Jupyter server killed while a cell runs: the cell's error says the server at URL closed the connection (no empty `()`)"
    root = tmp_path / 'root'; root.mkdir()
    token = secrets.token_hex(16)
    s = _serve('jupyter server', [sys.executable, '-m', 'jupyter_server', '--no-browser', '--allow-root',
                                  f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root}'], {}, root, token, tmp_path)
    k = RemoteKernel(s.url, s.token)
    try:
        k.run('1')
        import threading
        threading.Timer(2, s.proc.kill).start()
        t = time.monotonic()
        r = k.run('import time; time.sleep(60)')
        assert time.monotonic() - t < 30 and r.status == 'dead', r
        msg = r.outputs[-1]['evalue']
        assert f'the Jupyter server at {s.url} closed it' in msg and '()' not in msg and token not in msg, msg
    finally:
        s.proc.kill(); s.proc.wait()
        k.close()

def test_a_server_that_stops_answering_mid_run_holds_up_no_stop(tmp_path):
    """The Jupyter server frozen (SIGSTOP) while a cell with a timeout prints: the run answers soon after its timeout (each REST
    call of the stop waits `stop_grace` s, not the 60 s of other calls), with the outputs seen so far and a notice that the kernel
    may still run there, rather than raising after minutes; closing the kernel is as quick"""
    import signal, threading
    root = tmp_path / 'root'; root.mkdir()
    token = secrets.token_hex(16)
    s = _serve('jupyter server', [sys.executable, '-m', 'jupyter_server', '--no-browser', '--allow-root',
                                  f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root}'], {}, root, token, tmp_path)
    k = RemoteKernel(s.url, s.token, stop_grace=2)
    try:
        k.run('1')
        threading.Timer(2.5, os.kill, (s.proc.pid, signal.SIGSTOP)).start()
        t = time.monotonic()
        r = k.run('import time\nfor i in range(30): print(i, flush=True); time.sleep(1)', timeout=5)
        assert time.monotonic() - t < 20, time.monotonic() - t
        assert r.status == 'timeout' and joined_streams(r.outputs)[0]['text'].startswith('0\n1\n'), r.outputs
        assert 'did not answer POST /api/kernels/' in (k.take_notice() or ''), 'no notice of the restart left unanswered'
        t = time.monotonic()
        k.close()
        assert time.monotonic() - t < 6, time.monotonic() - t
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
        k.close()
        _stop(s)


def test_a_lost_connection_is_not_a_dead_kernel(server, rk):
    """The kernel's websocket drops while a cell runs, the server still up (its TCP connection shut here, as a network drop
    would): the run says the connection was lost and the kernel kept, not that it died; the next run connects to it again,
    and the cell had run on there"""
    import socket, threading
    rk.run('x = 41')
    def drop():
        time.sleep(1.5)
        rk._client.kc.kernel_socket.sock.sock.shutdown(socket.SHUT_RDWR)
    threading.Thread(target=drop).start()
    r = rk.run('import time\nfor i in range(4): print(i, flush=True); time.sleep(1)\nx += 1', timeout=30)
    assert r.status == 'error' and r.outputs[-1]['ename'] == 'ConnectionLost', r.outputs
    msg = r.outputs[-1]['evalue']
    assert 'the server still has the kernel' in msg and 'variables are kept' in msg and 'lost' in msg, msg
    assert not rk.died
    time.sleep(3)  # (the cell ends there meanwhile)
    r = rk.run('x')
    assert run_text(r) == '42', r.outputs
    rk._client.kc.kernel_socket.sock.sock.shutdown(socket.SHUT_RDWR)  # and between runs
    time.sleep(1)
    assert not rk.died and run_text(rk.run('x')) == '42'
    assert 'connected to it again, its variables kept' in (rk.take_notice() or '')


def test_a_server_that_never_answers_is_bounded_by_the_start_timeout(tmp_path):
    """A port that accepts connections and never answers: starting a kernel there gives up after `startup_timeout`
    (`headlesnb run --start-timeout`), saying the server did not answer (it was reached), not after the REST calls' 60 s;
    `headlesnb run` says what it waits for once the wait is longer than a moment"""
    import socket, threading
    silent = socket.socket(); silent.bind(('127.0.0.1', 0)); silent.listen(16)
    held = []
    threading.Thread(target=lambda: [held.append(silent.accept()) for _ in iter(int, 1)], daemon=True).start()
    url = f'http://127.0.0.1:{silent.getsockname()[1]}'
    try:
        t = time.monotonic()
        with pytest.raises(KernelError) as e: RemoteKernel(url, 't', startup_timeout=2).run('1')
        assert time.monotonic() - t < 10, time.monotonic() - t
        assert str(e.value) == f'the Jupyter server at {url} did not answer GET /api/kernelspecs within 2s', e.value
        (tmp_path / 'ok.ipynb').write_text(json.dumps(nbformat.v4.new_notebook(cells=[new_code_cell('1')])))
        t = time.monotonic()
        r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'run', 'ok.ipynb', 'out.ipynb', '--jupyter-url', url,
                            '--jupyter-token', 't', '--start-timeout', '6'], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert time.monotonic() - t < 20 and r.returncode == 2 and f'{url} did not answer' in r.stderr, (time.monotonic() - t, r.returncode, r.stderr)
        # meanwhile, once the wait is longer than a moment, one line says what the run waits for and how long it may
        assert r.stderr.splitlines()[0] == f'headlesnb: waiting for the kernel to start on {url} (--start-timeout 6s)', r.stderr  # (past SLOW_START, 5 s)
    finally: silent.close()

def test_a_password_in_the_url_is_never_shown():
    "http://user:password@host: messages show the server as ***@host (the password, like the token, never in a message)"
    port = free_port()  # nothing listens there
    for url in (f'http://admin:hunter2pw@127.0.0.1:{port}', f'http://admin:hunter2pw@127.0.0.1:{port}/?token=x'):
        with pytest.raises((KernelError, BadArgumentError)) as e: RemoteKernel(url, 't').run('1')
        assert f'http://***@127.0.0.1:{port}' in str(e.value) and 'hunter2pw' not in str(e.value) and 'admin' not in str(e.value), e.value
        with pytest.raises((KernelError, BadArgumentError)) as e: RemoteKernel(url.replace('http', 'ftp'), 't')
        assert 'hunter2pw' not in str(e.value), e.value
    assert 'hunter2pw' not in repr(RemoteKernel(f'http://admin:hunter2pw@127.0.0.1:{port}', 't'))

OWNER = textwrap.dedent('''
    import sys
    from headlesnb.kernels.remote import RemoteKernel
    k = RemoteKernel(sys.argv[1], sys.argv[2])
    k.run('1')
    print(k.kernel_id, flush=True)
''')  # exits without close()

def test_kernels_we_started_are_shut_down_at_exit(server):
    out = subprocess.run([sys.executable, '-c', OWNER, server.url, server.token], capture_output=True, text=True, timeout=120)
    kid = out.stdout.strip()
    assert out.returncode == 0 and kid, out.stderr
    assert kid not in server.kernel_ids()

def test_kernel_choice_on_a_server(server):
    from headlesnb.base import kernel_for_notebook
    from headlesnb.kernels.subkernel import list_kernelspecs
    specs = list_kernelspecs(server.url, server.token)
    assert 'python3' in specs and specs['python3']['language'] == 'python'
    py_nb = {'kernelspec': {'name': 'my-env', 'language': 'python'}}
    assert kernel_for_notebook(py_nb, installed=specs, remote=True) == 'python3'
    with pytest.raises(KernelError, match=r"needs the 'ir' kernel \(R\), which is not installed; installed: .*python3"):
        kernel_for_notebook({'kernelspec': {'name': 'ir', 'language': 'R'}}, installed=specs, remote=True)
    with make_kernel(None, jupyter_url=server.url, jupyter_token=server.token) as k:
        assert type(k) is RemoteKernel and k.kernel_name == 'python3' and run_text(k.run('6 * 7')) == '42'
    assert type(make_kernel('inprocess', jupyter_url=server.url)).__name__ == 'InProcessKernel'


def test_the_token_is_in_no_debug_log_line(server, caplog):
    "An application's DEBUG logging shows the kernel websocket's address (jupyter-kernel-client logs it): never with the token (it goes in a header)"
    with caplog.at_level(logging.DEBUG):
        k = RemoteKernel(server.url, server.token)
        try: assert k.run('6 * 7').outputs[0]['data']['text/plain'] == ['42']
        finally: k.close()
    assert 'kernel socket: ws://' in caplog.text  # (the line that held it)
    assert server.token not in caplog.text


def test_a_notebooks_kernel_is_looked_for_on_the_server(enterprise_gateway):
    "With a server, a notebook's kernelspec is checked against the server's kernels, not the ones installed here"
    from headlesnb.base import kernel_for_notebook
    g = enterprise_gateway
    assert kernel_for_notebook({'kernelspec': {'name': 'julia-here', 'language': 'julia'}}, jupyter_url=g.url, jupyter_token=g.token) == 'julia-here'
    with pytest.raises(KernelError, match=rf"needs the 'ir' kernel \(R\), which is not installed on {re.escape(g.url)}; installed there: julia-here, python3$"):
        kernel_for_notebook({'kernelspec': {'name': 'ir', 'language': 'R'}}, jupyter_url=g.url, jupyter_token=g.token)


def test_a_gateway_is_not_told_to_install_shared_documents(enterprise_gateway, tmp_path):
    "An Enterprise Gateway runs kernels only: the note says so, not to install jupyter-collaboration there (it cannot take it)"
    from headlesnb import NotebookManager
    g = enterprise_gateway
    nm = NotebookManager(tmp_path, jupyter_url=g.url, jupyter_token=g.token)
    try:
        note = nm.use_notebook(notebook_name='n', mode='create')['note']
        assert note.startswith(f'the server at {g.url} runs kernels only') and 'install' not in note, note
        assert nm.insert_execute_code_cell(-1, '6 * 7')['outputs'][0]['data']['text/plain'] == ['42']
    finally: nm.close_all()


def test_an_unknown_kernel_or_kernelspec_of_the_server_is_refused_at_use(server, tmp_path):
    """With a Jupyter server, `use_notebook(kernel_id=)` and `use_notebook(kernel=)` ask the server at once, as a local kernelspec is
    checked: one it does not have is a KernelError and changes nothing (no file, no notebook in use); a kernel gone from the server
    by its first run is listed as not started, never as an idle kernel"""
    from headlesnb import NotebookManager
    nm = NotebookManager(tmp_path, jupyter_url=server.url, jupyter_token=server.token)
    try:
        with pytest.raises(KernelError, match=rf"the kernel no-such-kernel does not exist \(any more\) on {re.escape(server.url)}: give the id"):
            nm.use_notebook(notebook_name='y', mode='create', kernel_id='no-such-kernel')
        with pytest.raises(KernelError, match=rf"the kernel '\$\(id\)' is not installed on {re.escape(server.url)}; installed there: .*python3"):
            nm.use_notebook(notebook_name='y', mode='create', kernel='$(id)')
        assert (list(tmp_path.iterdir()), nm.list_notebooks(), nm.list_kernels()) == ([], [], [])
        with RemoteKernel(server.url, server.token) as k:
            k.run('1')
            nm.use_notebook(notebook_name='y', mode='create', kernel_id=k.kernel_id)  # one it has
        # (closing it deleted that kernel from the server)
        with pytest.raises(KernelError, match='does not exist'): nm.insert_execute_code_cell(-1, '1', notebook_name='y')
        listed, = nm.list_kernels()
        assert listed['status'] == 'not started' and listed.get('kernel_id') is None, listed
    finally: nm.close_all()


class _OtherJSON:
    "An HTTP server on 127.0.0.1 (in a thread) answering every GET with `get` and every POST with `post`, as JSON: another API's answers"
    def __init__(self, get, post):
        import http.server, threading
        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self, body):
                data = json.dumps(body).encode()
                self.send_response(200); self.send_header('Content-Type', 'application/json'); self.send_header('Content-Length', str(len(data)))
                self.end_headers(); self.wfile.write(data)
            def do_GET(self): self.answer(get)
            def do_POST(self):
                self.rfile.read(int(self.headers.get('Content-Length') or 0))
                self.answer(post)
            def log_message(self, *a): pass
        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = f'http://127.0.0.1:{self.httpd.server_address[1]}'
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
    def __enter__(self): return self
    def __exit__(self, *exc): self.httpd.shutdown(); self.httpd.server_close()

@pytest.mark.parametrize('get, post, asked', [
    ({'message': 'hello'}, {'message': 'hello'}, 'GET /api/kernelspecs'),
    (['a', 'list'], ['a', 'list'], 'GET /api/kernelspecs'),
    ({'kernelspecs': {'python3': {}}}, {'message': 'hello'}, 'POST /api/kernels'),  # (it was "internal error: KeyError: 'id'")
])
def test_a_server_answering_other_json_is_a_clear_error(tmp_path, get, post, asked):
    """A server whose answers are JSON, but not the kernels API's (another service, a proxy): a KernelError naming the server, the
    request and what it answered, as for an answer that is not JSON; `use_notebook(kernel=)` refuses it and makes nothing"""
    from headlesnb import NotebookManager
    from headlesnb.kernels.subkernel import list_kernelspecs
    with _OtherJSON(get, post) as other:
        with pytest.raises(KernelError) as e: RemoteKernel(other.url, 'sekrit').run('1')
        msg = str(e.value)
        assert msg.startswith(f'{other.url} answered {asked} with ') and 'not the API of a Jupyter Server or Enterprise Gateway' in msg, msg
        assert json.dumps(post if asked.startswith('POST') else get) in msg and 'sekrit' not in msg, msg
        if asked.startswith('GET'):
            nm = NotebookManager(tmp_path, jupyter_url=other.url, jupyter_token='sekrit')
            try:
                with pytest.raises(KernelError, match=re.escape(f'{other.url} answered GET /api/kernelspecs with ')):
                    nm.use_notebook(notebook_name='n', mode='create', kernel='python3')
                assert (list(tmp_path.iterdir()), nm.list_notebooks()) == ([], [])
            finally: nm.close_all()
            with pytest.raises(KernelError, match=re.escape(f'{other.url} answered GET /api/kernelspecs with ')):
                list_kernelspecs(other.url, 'sekrit')  # (list_kernels' kernelspecs: it was AttributeError or "installed: none")


CLOSED_AT_EXIT = textwrap.dedent('''
    import concurrent.futures, sys, threading
    from headlesnb.kernels.remote import RemoteKernel
    k = RemoteKernel(sys.argv[1], sys.argv[2])
    k.run('1')
    print(k.kernel_id, flush=True)
    threading.Thread(target=k.run, args=('import time; time.sleep(100)',), daemon=True).start()
    def close_late():  # as a server's shutdown that outlives the main thread: after the interpreter's end began
        threading.main_thread().join()
        while True:  # until no executor takes work any more
            try:
                with concurrent.futures.ThreadPoolExecutor() as ex: ex.submit(int).result()
            except RuntimeError: break
        k.close()
        print('closed', flush=True)
    threading.Thread(target=close_late).start()
''')

def test_a_kernel_closed_as_the_interpreter_ends_is_deleted_quietly(server):
    "Closing a remote kernel (a cell running) once the interpreter's end has begun, when no thread starts any more: no traceback, the kernel deleted"
    out = subprocess.run([sys.executable, '-c', CLOSED_AT_EXIT, server.url, server.token], capture_output=True, text=True, timeout=120)
    kid, *rest = out.stdout.split()
    assert (out.returncode, rest) == (0, ['closed']) and 'Traceback' not in out.stderr, (out.returncode, out.stdout, out.stderr)
    assert kid not in server.kernel_ids()

def test_ctrl_c_of_serve_with_remote_kernels_is_quiet(tmp_path, jupyter_server):
    """`headlesnb serve` with a Jupyter server's kernels, Ctrl-C while a dialog's cell sleeps: exit 130, nothing printed, the kernel
    deleted; several times, as the server's shutdown outlived the main thread only sometimes (then it printed a traceback)"""
    import httpx, signal
    s = jupyter_server
    for i in range(4):
        root, port, log = tmp_path / f'root{i}', free_port(), tmp_path / f'serve{i}.log'
        root.mkdir()
        before = s.kernel_ids()
        with open(log, 'w') as out:
            p = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', str(root), '--port', str(port)],
                                 env={**os.environ, 'JUPYTER_URL': s.url, 'JUPYTER_TOKEN': s.token, 'PYTHONFAULTHANDLER': '1'}, stdout=out, stderr=subprocess.STDOUT)
        http, end = httpx.Client(base_url=f'http://127.0.0.1:{port}', timeout=30), time.monotonic() + 30
        try:
            while True:
                assert p.poll() is None and time.monotonic() < end, log.read_text()
                try:
                    if http.get('/health', timeout=1).status_code == 200: break
                except httpx.TransportError: time.sleep(0.1)
            assert http.post('/create_dialog_', data={'name': 'd'}).status_code == 200
            r = http.post('/add_relative_', data=dict(dlg_name='d', content='import time\ntime.sleep(100)', msg_type='code', placement='at_end', run='true'))
            assert r.status_code == 200, r.text
            while not (new := s.kernel_ids() - before):
                assert time.monotonic() < end + 30, log.read_text()
                time.sleep(0.2)
            time.sleep(2)  # the cell sleeps
            p.send_signal(signal.SIGINT)
            try: rc = p.wait(30)
            except subprocess.TimeoutExpired:  # where it hangs: faulthandler prints every thread's stack on SIGABRT
                p.send_signal(signal.SIGABRT); p.wait(10)
                pytest.fail(f'run {i}: still running 30 s after Ctrl-C:\n{log.read_text()}')
            assert rc == 130, log.read_text()
        finally:
            http.close()
            if p.poll() is None: p.kill(); p.wait()
        said = log.read_text().splitlines()
        assert len(said) == 1 and said[0].startswith('headlesnb serve: serving dialogs'), f'run {i}:\n' + '\n'.join(said)
        assert not new & s.kernel_ids(), f'run {i}: the kernel was left on the server'

def test_a_usage_error_fails_the_cell(server, rk):
    "IPython's UsageError (an unknown magic): an execute_reply of status error with only a stderr stream fails the cell, as nbclient decides"
    r = rk.run('%%nosuchmagic\nx')
    assert (r.status, joined_streams(r.outputs)) == ('error', [{'output_type': 'stream', 'name': 'stderr',
                                                                'text': 'UsageError: Cell magic `%%nosuchmagic` not found.\n'}]), r
    assert run_text(rk.run('1 + 1')) == '2'  # the kernel carries on
