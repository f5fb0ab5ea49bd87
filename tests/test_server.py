"""The dialoghelper-compatible server end to end: `headlesnb serve` as a real subprocess.

- The real client: dialoghelper 0.2.41 from PyPI, in its own cached Python 3.12 venv (tests/dh_venv.py; built once,
  ~90 s), runs tests/dh_client_script.py, which calls every client function that reaches the server and checks
  the answers; the dialog file written at the end must hold what the client last saw.
- A browser: Debian's headless Chromium, driven by playwright, shows a dialog's page; the real client's `js_eval`,
  `js_run`, `add_html`, `event_get` go through it (tests/dh_browser_script.py), and a message added by the client
  appears on the open page without a reload.
- Concurrency: 8 clients x 200 mixed calls on one dialog; the file ends with exactly the expected messages, in order.
- Responsiveness: reads and /health answer within 100 ms while a 10 s cell runs.
- Bad requests: each gets a JSON error; the server keeps working and the dialog file is untouched.
Every server process and browser is stopped by PID at the end of its test, whatever happens.
"""
import json, os, random, re, subprocess, sys, threading, time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from conftest import free_port

HERE, REPO = Path(__file__).resolve().parent, Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
import dh_venv, sc_venv  # noqa: E402

pytestmark = pytest.mark.timeout(300)


# ---------------------------------------------------------------- helpers
class Server:
    "A running `headlesnb serve` and an HTTP client for it"
    def __init__(self, root: Path, port: int, proc: subprocess.Popen, log: Path):
        self.root, self.port, self.proc, self.log = root, port, proc, log
        self.url = f'http://127.0.0.1:{port}'
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def post(self, ep, **data) -> httpx.Response: return self.http.post(f'/{ep}', data=data)

    def ok(self, ep, **data):
        "POST `ep`; it must succeed; the JSON (or text) answer"
        r = self.post(ep, **data)
        assert r.status_code == 200, f'{ep} {data}: {r.status_code} {r.text}'
        return r.json() if r.headers['content-type'].startswith('application/json') else r.text

    def logs(self) -> str: return self.log.read_text(errors='replace')[-5000:] if self.log.exists() else ''


@contextmanager
def running_server(root: Path):
    "`headlesnb serve --root root` on a free port (this repo's code), stopped by PID at the end"
    port, log = free_port(), root.parent / f'{root.name}-server.log'
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)}
    with open(log, 'w') as out:
        proc = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', str(root), '--port', str(port)],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    srv = Server(root, port, proc, log)
    try:
        end = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f'the server exited ({proc.returncode}):\n{srv.logs()}'
            try:
                if srv.http.get('/health', timeout=1).json() == {'ok': True}: break
            except httpx.TransportError: pass
            assert time.monotonic() < end, f'the server did not answer /health within 30 s:\n{srv.logs()}'
            time.sleep(0.1)
        yield srv
    finally:
        srv.http.close()
        proc.terminate()
        try: proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill(); proc.wait(5)


@pytest.fixture(scope='session')
def dh_python():
    "The Python of the real client's venv (built on first use, then cached)"
    return str(dh_venv.ensure_venv())  # no Python 3.12 is a failure, not a skip: CI must run the real client


@pytest.fixture(scope='session')
def sc_python():
    "The Python of solveit-client's own venv (built on first use, then cached)"
    return str(sc_venv.ensure_venv())


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp('dialogs')
    with running_server(root) as srv: yield srv


def run_client(py, script, srv, dialog, timeout=180) -> dict:
    "Run a client script in the client's venv against `srv`; it must succeed; its RESULT"
    env = {**os.environ, '__DIALOG_NAME': dialog, 'DH_PORT': str(srv.port), 'SOLVEIT_URL': srv.url}
    env.pop('PYTHONPATH', None)
    t0 = time.monotonic()
    r = subprocess.run([py, str(HERE / script)], env=env, capture_output=True, text=True, timeout=timeout, cwd=srv.root)
    print(f"{script}: {time.monotonic() - t0:.1f}s")
    assert r.returncode == 0, f'{script} failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}\n--- server log:\n{srv.logs()}'
    line = [l for l in r.stdout.splitlines() if l.startswith('RESULT ')][-1]
    return json.loads(line.removeprefix('RESULT '))


def file_messages(path: Path) -> list:
    "(id, type, content) of each message of a dialog file, as the client names them"
    from headlesnb.dialog import cell2msg
    nb = json.loads(path.read_text())
    return [[m.id, m.msg_type, m.content] for m in (cell2msg({**c, 'source': ''.join(c['source'])}) for c in nb['cells'])]


# ---------------------------------------------------------------- the real client
def test_real_client(server, dh_python):
    assert server.ok('create_dialog_', name='main') == {'success': '"main" is now running'}
    res = run_client(dh_python, 'dh_client_script.py', server, 'main')
    assert res['run_output'] == '42'
    assert len(res['order']) == 8
    # what the client saw last is in memory, and in the file once the dialog is stopped (saved and closed)
    msgs = json.loads(server.ok('find_msgs_', dlg_name='main', include_output='false', include_skipped='true', context=0))['msgs']
    assert [[m['id'], m['msg_type'], m['content']] for m in msgs] == res['final']
    assert server.ok('stop_kernel_', name='main') == {'success': 'dialog stopped'}
    assert file_messages(server.root / 'main.ipynb') == res['final']
    assert not (server.root / 'other.ipynb').exists() and not (server.root / 'folder').exists()  # rm_dialog removed them


def test_solveit_client(server, sc_python):
    "solveit-client 0.1.0, a second real client written against Solveit itself: every call, checked by its effect"
    res = run_client(sc_python, 'sc_client_script.py', server, 'sc/main')
    assert res['stop_seconds'] < 3
    assert not (server.root / 'sc' / 'main.ipynb').exists()  # the client deleted its dialog
    assert [t for _, t, _ in res['final']] == ['note', 'note', 'note', 'code', 'code', 'code', 'code', 'code']


# ---------------------------------------------------------------- the browser


def test_browser(server, dh_python, browser):
    server.ok('create_dialog_', name='web')
    first = server.ok('add_relative_', dlg_name='web', content='# A page\nwith **bold** text', placement='at_end')['id']
    page = browser.new_page()
    errors = []
    page.on('pageerror', lambda e: errors.append(str(e)))
    page.goto(f'{server.url}/dialog_?name=web')
    assert page.inner_html(f'#_{first} .md').startswith('<h1>A page</h1>')  # markdown rendered by the server
    page.wait_for_function('window.hnb && hnb.ready', timeout=10_000)
    page.evaluate('window.__loaded_once = 1')  # gone if the page reloads
    res = run_client(dh_python, 'dh_browser_script.py', server, 'web')
    assert (res['js_eval'], res['event_get']) == (3, 42)
    assert res['js_eval_s'] < 5
    # the message the client added shows up on the open page, without a reload
    page.wait_for_selector(f"#_{res['added']}", timeout=5_000)
    assert page.inner_html(f"#_{res['added']} .md") == '<p>A <em>live</em> message from the client</p>\n'
    assert page.inner_text('#hnb-note') == 'Hello from add_html'
    assert page.evaluate('window.__loaded_once') == 1
    # a change made through another door (here a run's output) shows up too
    code = server.ok('add_relative_', dlg_name='web', content='print("from a run")', msg_type='code', placement='at_end', run='true')['id']
    page.wait_for_function(f"document.querySelector('#_{code} pre.out')?.textContent === 'from a run\\n'", timeout=10_000)
    assert not errors, errors


def test_page_is_self_contained(server):
    server.ok('create_dialog_', name='offline')
    r = server.http.get('/dialog_', params={'name': 'offline'})
    assert r.status_code == 200 and r.headers['content-type'].startswith('text/html')
    assert not re.search(r'(src|href)="(https?:)?//', r.text)  # no CDN: nothing is loaded from elsewhere
    assert 'window.pushData' in r.text and 'id="ephemeral"' in r.text and 'id="js-event"' in r.text
    assert server.http.get('/dialog_', params={'name': 'no-such-dialog'}).status_code == 404


def test_a_file_name_utf8_cannot_hold_leaves_the_index_and_lists_working(server):
    "A dialog file whose name holds a Latin-1 byte (Python gives a lone surrogate): it used to make the index page an error (400)"
    server.ok('create_dialog_', name='fine')
    (odd := server.root / os.fsdecode(b'caf\xe9.ipynb')).write_bytes((server.root / 'fine.ipynb').read_bytes())
    try:
        r = server.http.get('/')
        assert r.status_code == 200 and 'fine' in r.text, (r.status_code, r.text[:300])
        listed = str(server.ok('list_dialogs_'))
        assert 'fine' in listed and 'caf' not in listed, listed
    finally: odd.unlink()

def test_a_lone_surrogate_a_request_sent_leaves_the_dialog_readable(server):
    "A JSON body may escape a lone surrogate (`\\udc80`): the message is kept, and every answer and page shows it as U+FFFD (they were errors)"
    server.ok('create_dialog_', name='odd-text')
    body = json.dumps({'dlg_name': 'odd-text', 'msg_type': 'note', 'content': 'caf\udce9 **bold**'})  # (json escapes it)
    r = server.http.post('/add_relative_', content=body, headers={'content-type': 'application/json'})
    assert r.status_code == 200 and r.json()['id'], r.text
    assert json.loads((server.root / 'odd-text.ipynb').read_text())['cells'][-1]['source'] in ('caf\udce9 **bold**', ['caf\udce9 **bold**'])
    found = json.loads(server.ok('find_msgs_', dlg_name='odd-text'))  # (JSON as text/plain, as Solveit answers it)
    assert found['msgs'][-1]['content'] == 'caf\ufffd **bold**', found
    for r in (server.http.get('/'), server.http.get('/dialog_', params={'name': 'odd-text'})):
        assert r.status_code == 200 and 'caf\ufffd' in r.text, (r.status_code, r.text[:300])
    with server.http.stream('GET', '/events_', params={'name': 'odd-text', 'v': 'stale'}) as ev:
        lines = ev.iter_lines()
        seen = next(l for l in lines if l.startswith('event: messages'))
        data = next(lines)
    assert seen and 'caf\ufffd' in data and '<strong>bold</strong>' in data, data[:300]

# ---------------------------------------------------------------- concurrency
def test_concurrent_clients(server):
    "8 clients x 200 mixed calls on one dialog; every answer right; the file holds exactly the expected messages, in order"
    server.ok('create_dialog_', name='busy')
    n_clients, n_calls, failures = 8, 200, []

    def client(i, out):
        rnd, alive, content = random.Random(i), [], {}  # this client's messages in the order it added them; their contents
        with httpx.Client(base_url=server.url, timeout=30) as h:
            def call(ep, **data):
                r = h.post(f'/{ep}', data={'dlg_name': 'busy', **data})
                if r.status_code != 200: failures.append(f'client {i} {ep} {data}: {r.status_code} {r.text}')
                return r.json() if r.headers['content-type'].startswith('application/json') else json.loads(r.text)
            for j in range(n_calls):
                op = j % 5 if alive else 0
                if op == 0:
                    c = f'c{i}-{j:03d}'
                    mid = call('add_relative_', content=c, placement='at_end', msg_type=rnd.choice(['note', 'code', 'raw']))['id']
                    alive.append(mid); content[mid] = c
                elif op == 1:
                    mid = rnd.choice(alive)
                    got = call('read_msg_', id_=mid, n=0)['content']
                    if got != content[mid]: failures.append(f'client {i}: read {mid} gave {got!r}, not {content[mid]!r}')
                elif op == 2:
                    mid = rnd.choice(alive)
                    content[mid] = content[mid].split('/')[0] + f'/u{j}'
                    call('update_msg_', id_=mid, content=content[mid], pinned=str(j % 2))
                elif op == 3:
                    got = [m['id'] for m in call('find_msgs_', re_pattern=f'^c{i}-', context=0, include_output='false')['msgs']]
                    if got != alive: failures.append(f'client {i}: find gave {got}, not {alive}')
                elif j % 10 == 4:
                    mid = alive.pop(0)
                    del content[mid]
                    call('rm_msg_', msid=mid)
                else:  # (indexes shift as others delete: only check that it answers one)
                    idx = call('msg_idx_', id_=alive[-1])['idx']
                    if not isinstance(idx, int) or idx < len(alive) - 1: failures.append(f'client {i}: msg_idx gave {idx!r}')
        out[i] = (alive, content)

    outs, t0 = {}, time.monotonic()
    threads = [threading.Thread(target=client, args=(i, outs)) for i in range(n_clients)]
    for t in threads: t.start()
    for t in threads: t.join(120)
    took = time.monotonic() - t0
    assert not failures, failures[:10]
    assert len(outs) == n_clients
    expected = {mid: c for alive, content in outs.values() for mid, c in content.items()}
    msgs = json.loads(server.ok('find_msgs_', dlg_name='busy', include_output='false', include_skipped='true', context=0))['msgs']
    assert {m['id']: m['content'] for m in msgs} == expected
    order = [m['id'] for m in msgs]
    for alive, _ in outs.values(): assert [x for x in order if x in alive] == alive  # each client's messages in its order
    server.ok('stop_kernel_', name='busy')  # saved and closed
    on_disk = file_messages(server.root / 'busy.ipynb')
    assert [[m, c] for m, _, c in on_disk] == [[m['id'], m['content']] for m in msgs]
    print(f'{n_clients * n_calls} calls in {took:.1f}s')


# ---------------------------------------------------------------- responsiveness
def test_reads_answer_while_a_cell_runs(server):
    "A 10 s cell runs in the background; /health, read_msg_ and find_msgs_ each answer within 100 ms meanwhile"
    server.ok('create_dialog_', name='slow')
    t0 = time.monotonic()
    mid = server.ok('add_relative_', dlg_name='slow', content='import time\ntime.sleep(10)', msg_type='code',
                    placement='at_end', run='true')['id']
    assert time.monotonic() - t0 < 1  # add_msg(run=True) answers at once
    deadline = time.monotonic() + 5
    while not server.ok('read_msg_', dlg_name='slow', n=0, id_=mid)['run']:
        assert time.monotonic() < deadline
    time.sleep(0.3)  # the cell is sleeping now
    lat = {'health': [], 'read_msg_': [], 'find_msgs_': []}
    for _ in range(20):
        for ep, call in [('health', lambda: server.http.get('/health')),
                         ('read_msg_', lambda: server.post('read_msg_', dlg_name='slow', n=0, id_=mid)),
                         ('find_msgs_', lambda: server.post('find_msgs_', dlg_name='slow', re_pattern='sleep'))]:
            t = time.perf_counter()
            assert call().status_code == 200
            lat[ep].append(time.perf_counter() - t)
    assert server.ok('read_msg_', dlg_name='slow', n=0, id_=mid)['run'] is True  # still running: we measured during the run
    assert time.monotonic() - t0 < 9
    worst = {k: max(v) for k, v in lat.items()}
    assert all(w < 0.1 for w in worst.values()), worst
    assert server.ok('stop_kernel_', name='slow') == {'success': 'dialog stopped'}  # interrupts what runs; answers quickly
    assert server.http.get('/health').json() == {'ok': True}


# ---------------------------------------------------------------- bad requests
def test_bad_requests_get_json_errors(server):
    server.ok('create_dialog_', name='safe')
    mid = server.ok('add_relative_', dlg_name='safe', content='keep me', placement='at_end')['id']
    server.ok('stop_kernel_', name='safe')  # saved; the next call opens it again
    before = (server.root / 'safe.ipynb').read_bytes()
    d = dict(dlg_name='safe')
    bad = [
        ('no_such_endpoint_', {}), ('read_msg_', {}), ('read_msg_', dict(dlg_name='../outside')), ('read_msg_', dict(dlg_name='/etc/passwd')),
        ('read_msg_', dict(dlg_name='nope')), ('read_msg_', dict(d, n='many')), ('read_msg_', dict(d, relative='perhaps')),
        ('read_msg_', dict(d, id_='zzz', n=0)), ('read_msg_', dict(d, view_range=['1', '2', '3'])), ('read_msg_', dict(d, view_range=['0', '-1'], id_=mid, n=0)),
        ('msg_idx_', dict(d, id_='zzz')), ('find_msgs_', dict(d, re_pattern='[')), ('find_msgs_', dict(d, msg_type='picture')),
        ('find_msgs_', dict(d, limit='-3')), ('find_msgs_', dict(d, headers_only='true', header_section='x')),
        ('add_relative_', dict(d, content='x', placement='sideways')), ('add_relative_', dict(d, content='x', msg_type='video')),
        ('add_relative_', dict(d, content='x', id_='zzz', placement='add_after')), ('add_relative_', dict(d, content='x', colour='red')),
        ('add_relative_', dict(d, content='x', msg_type='note', output='not for notes')), ('add_relative_', dict(d, content='x', pinned='maybe')),
        ('update_msg_', dict(d, content='x')), ('update_msg_', dict(d, id_='zzz', content='x')), ('update_msg_', dict(d, id_=mid, meta='{bad')),
        ('update_msg_', dict(d, id_=mid, meta='[1, 2]')), ('update_msg_', dict(d, id_=mid, bookmark='12')), ('update_msg_', dict(d, id_=mid, msg_type='video')),
        ('rm_msg_', dict(d)), ('rm_msg_', dict(d, msid='zzz')), ('add_runq_', dict(d)), ('add_runq_', dict(d, ids=mid)),
        ('msg_paste_', dict(d, id_='zzz')), ('bookmark_', dict(d, id_=mid, n='0')), ('toggle_export_', dict(d, ids='zzz')),
        ('list_dialogs_', dict(subpath='../..')), ('list_dialogs_', dict(depth='0')), ('list_dialogs_', dict(subpath='nofolder')),
        ('realpath_', dict(subpath='../../etc')), ('create_dialog_', dict(name='../evil')), ('create_dialog_', dict(name='a\x00b')),
        ('create_dialog_', dict(name='x' * 300)), ('create_dialog_', {}), ('rm_dialog_', dict(name='/')), ('rm_dialog_', dict(name='..')),
        ('rm_dialog_', dict(name='nothing-here')), ('stop_kernel_', dict(name='nothing-here')), ('restart_kernel_', dict(name='../x')),
        ('load_dialog_', dict(d, src_dname='../x')), ('load_dialog_', dict(d, src_dname='nothing-here')), ('pop_data_blocking_', {}),
        ('search_', dict(q='x')), ('searches_', dict(searches='x')), ('web_answer_', dict(pr='x', qs='y')), ('add_html_', {}),
    ]
    for ep, data in bad:
        r = server.post(ep, **data)
        assert 400 <= r.status_code < 600 and r.headers['content-type'].startswith('application/json'), (ep, data, r.status_code, r.text)
        assert isinstance(r.json().get('error'), str) and r.json()['error'], (ep, data, r.text)
    # bodies that are not what they claim
    for body, ct in [(b'\xff\xfe\xfd', 'application/x-www-form-urlencoded'), (b'{not json', 'application/json'),
                     (b'[1, 2]', 'application/json'), (b'\x00' * 1000, 'application/json')]:
        r = server.http.post('/read_msg_', content=body, headers={'content-type': ct})
        assert r.status_code == 400 and 'error' in r.json(), (body, r.text)
    r = server.http.get('/read_msg_')
    assert r.status_code == 405 and 'error' in r.json()
    r = server.http.post('/push_data_blocking_', json={'no': 'id'})
    assert r.status_code == 400 and 'data_id' in r.json()['error']
    # the endpoints whose client only checks for a non-empty text body answer errors with an empty one
    r = server.post('msg_clipboard_', dlg_name='safe', ids='zzz')
    assert (r.status_code, r.text) == (404, '') and 'zzz' in r.headers['x-headlesnb-error']
    # nothing changed, and everything still works
    assert server.ok('read_msg_', dlg_name='safe', n=0, id_=mid)['content'] == 'keep me'
    server.ok('stop_kernel_', name='safe')
    assert (server.root / 'safe.ipynb').read_bytes() == before
    assert not (server.root.parent / 'evil.ipynb').exists()
    assert server.http.get('/health').json() == {'ok': True}
    assert server.proc.poll() is None


def test_empty_token_is_refused(tmp_path):
    "`headlesnb serve --token \"$SECRET\"` with SECRET unset must not serve without auth"
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', str(tmp_path), '--token', ''],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode != 0 and '--token is empty (an unset variable?)' in r.stderr, r.stderr
