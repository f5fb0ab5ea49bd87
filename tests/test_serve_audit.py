"""`headlesnb serve` against what an audit found: each test starts a real `headlesnb serve` subprocess (stopped by PID).

- A FIFO named `*.ipynb` under the root is a row saying it cannot be read; the index never waits on it (it hung, then
  every endpoint once the worker threads were all blocked on it).
- A dialog's page is live for an edit made on disk by another program (it updated only after an API request).
- Bad input is a 400 naming the field, and changes nothing: a JSON value of the wrong type (a list kept its last item, a
  number read as no name), a multipart field sent as a file (dropped, and an empty message made), NaN or infinity
  where a number is read (a ValueError and a traceback), a name ending in `.ipynb` twice.
- `stop_kernel_` says what it did: it stops the dialog its file holds, and says so when nothing was running.
- After a first visit with `?token=`, the page it answers goes on to this server, whatever the path (`//evil.example/`).
"""
import json, os, re, subprocess, sys, threading, time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from conftest import free_port

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(120)


@contextmanager
def serve(root: Path, *args, env:dict|None=None, timeout:float=10):
    "`headlesnb serve --root root ARGS` on a free port (`env` added to ours): (an httpx client, the log's path); stopped by PID at the end"
    port, log = free_port(), root.parent / f'{root.name}-serve.log'
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep), **(env or {})}
    with open(log, 'w') as out:
        proc = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', str(root), '--port', str(port), *args],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    http = httpx.Client(base_url=f'http://127.0.0.1:{port}', timeout=timeout)
    try:
        end = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f'the server exited ({proc.returncode}):\n{log.read_text()}'
            try:
                if http.get('/health', timeout=1).status_code in (200, 401): break
            except httpx.TransportError: pass
            assert time.monotonic() < end, f'the server did not answer within 30 s:\n{log.read_text()}'
            time.sleep(0.1)
        yield http, log
    finally:
        http.close()
        proc.terminate()
        try: proc.wait(15)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait(5)


def ok(http, ep, **data):
    r = http.post(f'/{ep}', data=data)
    assert r.status_code == 200, (ep, r.status_code, r.text)
    return r.json()


def base(http) -> str: return str(http.base_url).rstrip('/')


def messages(http, name) -> list:
    return [m['content'] for m in ok(http, 'curr_dialog_', dlg_name=name, with_messages='true')['messages']]


def test_fifo_dialog_does_not_hang_the_index(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with serve(root) as (http, log):
        ok(http, 'create_dialog_', name='ok')
        os.mkfifo(root / 'trap.ipynb')
        for _ in range(3):  # (each time: a read that waited would hold a worker thread for ever)
            r = http.get('/', timeout=5)
            assert r.status_code == 200
            row = r.text.split('data-name="trap">')[1].split('</li>')[0]
            assert 'cannot be read: ' in row and 'not a regular file' in row, row
            assert 'data-name="ok"' in r.text
        assert http.get('/health', timeout=5).json() == {'ok': True}
        assert 'no dialog' in http.post('/stop_kernel_', data={'name': 'trap'}).json()['error']


def test_page_is_live_for_an_edit_on_disk(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with serve(root) as (http, log):
        ok(http, 'create_dialog_', name='c1', template='false')
        ok(http, 'add_relative_', dlg_name='c1', content='first message')
        assert http.get('/dialog_', params={'name': 'c1'}).status_code == 200  # the page opens the dialog
        events, stop = [], threading.Event()
        def listen():
            with httpx.stream('GET', f'{base(http)}/events_', params={'name': 'c1'}, timeout=30) as r:
                for line in r.iter_lines():
                    events.append(line)
                    if stop.is_set(): return
        th = threading.Thread(target=listen, daemon=True); th.start()
        end = time.monotonic() + 10
        while not any('first message' in l for l in events):
            assert time.monotonic() < end, events[-20:]
            time.sleep(0.05)
        # another program replaces the file atomically, adding a message; no request touches the dialog after it
        nb = json.loads((root / 'c1.ipynb').read_text())
        nb['cells'].append({'cell_type': 'markdown', 'id': 'ondisk01', 'metadata': {}, 'source': 'written on disk'})
        (root / 'c1.tmp').write_text(json.dumps(nb)); os.replace(root / 'c1.tmp', root / 'c1.ipynb')
        end = time.monotonic() + 10
        while not any('written on disk' in l for l in events):
            assert time.monotonic() < end, f'the page was not sent the edit made on disk: {events[-10:]}'
            time.sleep(0.05)
        stop.set()


def test_wrong_types_and_files_are_refused_naming_the_field(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with serve(root) as (http, log):
        ok(http, 'create_dialog_', name='d', template='false')
        ok(http, 'add_relative_', dlg_name='d', content='keep me')
        before = (root / 'd.ipynb').read_bytes()
        for body, want in [({'dlg_name': 'd', 'msg_type': 'code', 'content': ['x = 1\n', 'print(x)']}, 'content must be a string, not a list'),
                           ({'dlg_name': ['a', 'd'], 'content': 'x'}, 'dlg_name must be a string, not a list'),
                           ({'dlg_name': 5, 'content': 'x'}, 'dlg_name must be a string, not a number'),
                           ({'dlg_name': 'd', 'content': 'x', 'pinned': 1.5}, 'pinned must be true/false or a number'),
                           ({'dlg_name': 'd', 'content': 'x', 'output': 7, 'msg_type': 'code'}, 'output must be text or a list'),
                           ({'dlg_name': 'd', 'content': 'x', 'meta': [1]}, 'meta must be a JSON object')]:
            r = http.post('/add_relative_', json=body)
            assert r.status_code == 400 and want in r.json()['error'], (body, r.status_code, r.text)
        r = http.post('/add_relative_', content=b'{"dlg_name": "d", "content": "x", "bookmark": NaN}', headers={'content-type': 'application/json'})
        assert r.status_code == 400 and 'NaN is not a JSON value' in r.json()['error'], r.text
        r = http.post('/add_relative_', data={'dlg_name': 'd'}, files={'content': ('f.txt', b'from a file')})
        assert r.status_code == 400 and "field 'content' came as a file upload" in r.json()['error'], r.text
        assert (root / 'd.ipynb').read_bytes() == before and messages(http, 'd') == ['keep me']
        for v in ('nan', 'inf', '-inf', 'NaN'):
            r = http.post('/pop_data_blocking_', data={'data_id': 'x', 'timeout': v})
            assert r.status_code == 400 and r.json()['error'] == f"timeout must be a finite number, not {v!r}", r.text
        for field, v in [('n', 'nan'), ('n', '1e999'), ('n', 'inf')]:
            r = http.post('/read_msg_', data={'dlg_name': 'd', field: v})
            assert r.status_code == 400 and r.json()['error'] == f"{field} must be an integer, not {v!r}", r.text
        r = http.post('/read_msg_', content=b'{"dlg_name": "d", "n": Infinity}', headers={'content-type': 'application/json'})
        assert r.status_code == 400 and 'Infinity is not a JSON value' in r.json()['error'], r.text
        r = http.post('/read_msg_', json={'dlg_name': 'd', 'n': 0.5})
        assert r.status_code == 400 and r.json()['error'] == 'n must be an integer, not a number', r.text
        assert http.post('/read_msg_', json={'dlg_name': 'd', 'n': 0, 'relative': False}).json()['content'] == 'keep me'  # right types work
        assert 'Traceback' not in log.read_text(), log.read_text()[-3000:]  # all refused by a check, none by Python
        ok(http, 'add_relative_', dlg_name='d', content='as multipart')  # (nothing else changed)
        assert http.post('/add_relative_', files={'dlg_name': (None, 'd'), 'content': (None, 'a multipart text field')}).status_code == 200
        assert messages(http, 'd') == ['keep me', 'as multipart', 'a multipart text field']


def test_double_ipynb_name_refused_and_stop_kernel_says_what_it_did(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with serve(root) as (http, log):
        r = http.post('/create_dialog_', data={'name': 'x.ipynb.ipynb'})
        assert r.status_code == 400 and "ends in .ipynb twice: name the dialog 'x'" in r.json()['error'], r.text
        assert not list(root.iterdir())  # nothing was made
        ok(http, 'create_dialog_', name='x')
        assert ok(http, 'stop_kernel_', name='x') == {'success': 'dialog stopped'}
        assert ok(http, 'stop_kernel_', name='x') == {'success': "dialog 'x' was not running: nothing to stop"}
        assert messages(http, 'x') == []  # the dialog is usable under its name


def test_token_redirect_stays_on_this_server(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with serve(root, '--token', 't') as (http, log):
        for path in ('//evil.example/', '/%2F%2Fevil.example/', '/%5Cevil.example/', '/%09/evil.example/'):
            r = httpx.get(f'{base(http)}{path}?token=t', follow_redirects=False)  # (no cookie yet)
            nxt = re.search(r'data-next="([^"]*)"', r.text)  # the page that keeps the page secret goes on to this address
            assert r.status_code == 200 and 'location' not in r.headers and nxt and nxt[1] == '/evil.example/', (path, r.status_code, r.text)
        r = httpx.get(f'{base(http)}/dialog_?name=d&token=t', follow_redirects=False)
        assert r.status_code == 200 and re.search(r'data-next="([^"]*)"', r.text)[1] == '/dialog_?name=d'  # the ordinary case
        assert 'set-cookie' in r.headers and 'content-security-policy' in r.headers


def test_output_frames_run_scripts_and_inline_handlers_in_an_opaque_origin(tmp_path, browser):
    """What SECURITY.md says runs in an output frame: <script>, the handlers scripts attach, inline handler attributes and an SVG's
    onload (these did not run while frames inherited the page's policy); all of it in an opaque origin, the page untouched"""
    root = tmp_path / 'root'; root.mkdir()
    html = ("<p id='r'>not run</p><button id='inline' onclick=\"document.body.dataset.inline = 'yes'\">inline</button>"
            "<script>document.getElementById('r').textContent = 'script ran'; const b = document.createElement('button');"
            "b.id = 'attached'; b.textContent = 'attached'; b.onclick = () => { document.body.dataset.attached = 'yes' }; document.body.append(b)</script>"
            "<div style='height:321px'></div>")
    svg = "<svg xmlns='http://www.w3.org/2000/svg' width='20' height='20' onload=\"document.body.dataset.svg = 'yes'\"><rect width='9' height='9'/></svg>"
    outs = [{'output_type': 'display_data', 'data': {mime: v}, 'metadata': {}} for mime, v in (('text/html', html), ('image/svg+xml', svg))]
    with serve(root) as (http, log):
        ok(http, 'create_dialog_', name='h', template='false')
        ok(http, 'add_relative_', dlg_name='h', msg_type='code', content='display(...)', output=json.dumps(outs))
        page = browser.new_page()
        page.goto(f'{base(http)}/dialog_?name=h')
        page.wait_for_function('window.hnb && hnb.ready', timeout=15_000)
        page.wait_for_function("document.querySelectorAll('iframe.frame').length === 2", timeout=10_000)
        end = time.monotonic() + 10
        while not (fs := [f for f in page.frames[1:] if f.query_selector('#attached')]):
            assert time.monotonic() < end, 'the output frame\'s script did not run'
            time.sleep(0.1)
        f, svg_frame = fs[0], next(x for x in page.frames[1:] if x.query_selector('svg'))
        assert f.inner_text('#r') == 'script ran'
        f.click('#attached'); f.click('#inline')
        time.sleep(0.5)
        assert f.evaluate('({...document.body.dataset})') == {'attached': 'yes', 'inline': 'yes'}
        assert svg_frame.evaluate('document.body.dataset.svg || null') == 'yes'
        assert f.evaluate('origin') == 'null'  # an opaque origin; the page as it was
        assert not {'inline', 'attached', 'svg'} & set(page.evaluate('Object.keys(document.body.dataset)'))
        assert page.evaluate("[...document.querySelectorAll('iframe.frame')].every(f => f.getAttribute('sandbox') === 'allow-scripts')")
        page.wait_for_function("parseInt(document.querySelector('iframe.frame.html').style.height) > 321", timeout=5_000)  # it told the page its height
        # the frames' fixed document, opened on its own: no output in it, and sandboxed by its own headers
        r = httpx.get(f'{base(http)}/_frame')
        assert r.status_code == 200 and 'hnbFrameDoc' in r.text and 'script ran' not in r.text
        assert r.headers['content-security-policy'].startswith('sandbox allow-scripts;') and "frame-ancestors 'self'" in r.headers['content-security-policy']
        top = browser.new_page()
        top.goto(f'{base(http)}/_frame')
        assert top.evaluate('origin') == 'null'
        top.close()


def test_a_refused_handshake_or_token_says_one_thing_to_do(tmp_path):
    "A refused websocket handshake leaves one log line (uvicorn added an ERROR line after each); a POST without the token names a page to open, not itself"
    import asyncio, websockets.exceptions
    root = tmp_path / 'root'; root.mkdir()
    with serve(root, '--token', 't') as (http, log):
        async def handshake():
            with pytest.raises(websockets.exceptions.InvalidStatus):
                async with websockets.connect(f"ws://127.0.0.1:{http.base_url.port}/wsx", origin='http://evil.example'): pass
        asyncio.run(handshake())
        r = http.post('/list_dialogs_')
        assert r.status_code == 401 and 'open /?token=TOKEN once in the browser' in r.json()['error'], r.text
        time.sleep(0.5)
        lines = [l for l in log.read_text().splitlines() if 'WEBSOCKET' in l or 'ASGI' in l]
        assert len(lines) == 1 and 'refused WEBSOCKET /wsx (403)' in lines[0], lines
