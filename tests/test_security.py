"""Security of the servers, tried as an attacker and as a crash would: real `headlesnb serve` / `headlesnb mcp` subprocesses,
real sockets, Debian's headless Chromium (through playwright) and the official MCP client.

- A hostile dialog file (HTML, SVG and JavaScript outputs, markdown with raw HTML, a `javascript:` link, attribute
  break-outs) shown in Chromium: nothing runs in the page's origin, no request from the payload reaches the server or
  anything else on this machine, the file is unchanged; scripts do run inside the sandboxed output frames (a control).
- A page on another origin attacks with forms (text/plain, urlencoded, multipart), no-cors fetches, beacons and images:
  all refused, nothing changes. `Origin: null`, a spoofed Host (and Chromium resolving a foreign name to 127.0.0.1:
  DNS rebinding), a foreign-Origin websocket handshake: refused.
- Off loopback: `serve` and `mcp --transport http` refuse to start without a token; with one, every request needs it
  (the page's `?token=` visit sets a cookie that opens pages only, and keeps a page secret the page's POSTs send: the
  interrupt button reaches the server, the cookie replayed alone does not); a foreign Origin is still refused.
- Crashes: SIGKILL right after a reply loses nothing (20 trials; the same harness loses edits with --no-durable);
  a burst of acknowledged adds survives SIGKILL.
- Files: a read-only dialog stays as it is (and readable); a dialog swapped for a symlink is refused, its target untouched.
- Limits: a catastrophic regex is cut off while the server answers other requests; an oversized body gets 413 without
  the server's memory growing by it; every bad input gets a 4xx with a one-line reason (MCP: is_error), never a 500.
- Interrupts: the page's button stops a running cell; MCP `interrupt_dialog` stops a run; an MCP run that waited
  behind another on the same kernel gets only what is left of its timeout.
Every process is stopped by PID at the end of its test.
"""
import hashlib, http.server, json, os, random, re, signal, socket, stat, statistics, subprocess, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import psutil
import pytest
from conftest import free_port

HERE, REPO = Path(__file__).resolve().parent, Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

pytestmark = pytest.mark.timeout(300)
CHROMIUM = '/usr/bin/chromium'
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                 '--disable-background-networking', '--disable-component-update', '--disable-sync']
ENV = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)}
ENV.pop('HEADLESNB_TOKEN', None); ENV.pop('HEADLESNB_MCP_TOKEN', None)


# ---------------------------------------------------------------- helpers
class Server:
    "A running `headlesnb serve` subprocess"
    def __init__(self, root, port, proc, log, token=None):
        self.root, self.port, self.proc, self.log, self.token = root, port, proc, log, token
        self.url = f'http://127.0.0.1:{port}'
        self.http = httpx.Client(base_url=self.url, timeout=60, headers={'Authorization': f'Bearer {token}'} if token else None)

    def post(self, ep, **data): return self.http.post(f'/{ep}', data=data)

    def ok(self, ep, **data):
        r = self.post(ep, **data)
        assert r.status_code == 200, f'{ep} {data}: {r.status_code} {r.text}'
        return r.json() if r.headers['content-type'].startswith('application/json') else r.text

    def logs(self) -> str: return self.log.read_text(errors='replace') if self.log.exists() else ''
    def rss(self) -> int: return psutil.Process(self.proc.pid).memory_info().rss

    def kill(self):
        if self.proc.poll() is None: os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


def start_server(root: Path, *args, port=None, token=None, wait=True) -> Server:
    port = port or free_port()
    log = root.parent / f'{root.name}-{port}.log'
    with open(log, 'w') as out:
        proc = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', str(root), '--port', str(port), *args],
                                cwd=REPO, env=ENV, stdout=out, stderr=subprocess.STDOUT)
    srv = Server(root, port, proc, log, token)
    if wait:
        end = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f'the server exited ({proc.returncode}):\n{srv.logs()[-3000:]}'
            try:
                if srv.http.get('/health', timeout=1).status_code == 200: break
            except httpx.TransportError: pass
            assert time.monotonic() < end, f'the server did not answer /health within 60 s:\n{srv.logs()[-3000:]}'
            time.sleep(0.05)
    return srv


def stop(srv: Server):
    srv.http.close()
    if srv.proc.poll() is None:
        srv.proc.terminate()
        try: srv.proc.wait(15)
        except subprocess.TimeoutExpired: srv.proc.kill(); srv.proc.wait(5)


@contextmanager
def running(root: Path, *args, **kw):
    srv = start_server(root, *args, **kw)
    try: yield srv
    finally: stop(srv)


def messages_on_disk(path: Path) -> list:
    return [''.join(c['source']) for c in json.loads(path.read_text())['cells']]


class Canary:
    "A plain HTTP server on another port: it counts every request (none may come from a payload), and can serve an attacker's page"
    def __init__(self, page: str = ''):
        self.hits, self.page = [], page
        canary = self
        class H(http.server.BaseHTTPRequestHandler):
            def _hit(self):
                canary.hits.append((self.command, self.path))
                body = canary.page.encode() if self.path.startswith('/attack') else b'ok'
                self.send_response(200); self.send_header('Content-Type', 'text/html'); self.send_header('Content-Length', str(len(body)))
                self.end_headers(); self.wfile.write(body)
            do_GET = do_POST = _hit
            def log_message(self, *a): pass
        self.srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
    def payload_hits(self): return [h for h in self.hits if not h[1].startswith('/attack')]
    def close(self): self.srv.shutdown(); self.srv.server_close()


@pytest.fixture
def browser():
    assert Path(CHROMIUM).exists(), f'{CHROMIUM} is not installed (tests/setup.sh installs it)'
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS + ['--host-resolver-rules=MAP rebind.test 127.0.0.1'])
        try: yield b
        finally: b.close()


# ---------------------------------------------------------------- a hostile dialog in the browser
def hostile_dialog(root: Path, port: int, canary: int):
    "Write dialog `evil.ipynb`, whose every message tries to run code in the page or reach a server"
    from headlesnb.dialog import DialogManager
    srv, can = f'http://127.0.0.1:{port}', f'http://127.0.0.1:{canary}'
    attack = f"""
      document.body.append('FRAME-RAN');
      try {{ parent.document.body.dataset.pwned = 'parent'; }} catch (e) {{}}
      try {{ top.document.title = 'pwned'; }} catch (e) {{}}
      try {{ parent.hnb.swap(String.fromCharCode(60) + 'p id="pwned">x'); }} catch (e) {{}}
      try {{ localStorage.setItem('pwned', '1'); }} catch (e) {{}}
      fetch('{srv}/add_relative_', {{method: 'POST', body: new URLSearchParams({{dlg_name: 'evil', content: 'PWNED-FETCH'}})}}).catch(() => {{}});
      fetch('{srv}/add_relative_', {{method: 'POST', mode: 'no-cors', headers: {{'Content-Type': 'text/plain'}}, body: 'dlg_name=evil&content=PWNED-NOCORS'}}).catch(() => {{}});
      fetch('{can}/fetch').catch(() => {{}});
      try {{ navigator.sendBeacon('{srv}/add_relative_?dlg_name=evil&content=PWNED-BEACON', 'x'); }} catch (e) {{}}
      new Image().src = '{can}/image';
      try {{ const w = new WebSocket('ws://127.0.0.1:{port}/wsx?chan=pwn'); w.onopen = () => w.send('PWNED-WS'); }} catch (e) {{}}
      try {{ const f = document.createElement('form'); f.method = 'POST'; f.action = '{srv}/add_relative_';
             const i = document.createElement('input'); i.name = 'content'; i.value = 'PWNED-FORM'; f.append(i);
             document.body.append(f); f.submit(); }} catch (e) {{}}
      try {{ window.open('{can}/popup'); }} catch (e) {{}}
      try {{ top.location = '{can}/navigated'; }} catch (e) {{}}"""
    out = lambda mime, v: {'output_type': 'display_data', 'data': {mime: v}, 'metadata': {}}
    dm = DialogManager(root)
    dm.use_dialog('evil', mode='create')
    dm.add_message(f"""# Hostile notes <img src=x onerror="document.body.dataset.pwned='md-img'">
<script>document.body.dataset.pwned = 'md-script'</script>

[click me](javascript:document.body.dataset.pwned='js-link') <a id="jslink" href="javascript:document.body.dataset.pwned='a-link'">and me</a>
<iframe src="{can}/md-iframe"></iframe> <img src="{can}/md-image"> <img src="{srv}/add_relative_?content=PWNED-IMG">
<form action="{srv}/add_relative_" method="post"><input name="content" value="PWNED-MDFORM"><button id="mdbtn">go</button></form>
<div id="messages" name="hnb" style="position:fixed;top:0;left:0;width:100%;height:100%">overlay</div>
<svg><animate onbegin="document.body.dataset.pwned='md-svg'" attributeName="x" dur="1s"/></svg>""", 'note', dialog_name='evil')
    dm.add_message('display(HTML(...))', 'code', dialog_name='evil',
                   output=[out('text/html', f'<b>html output</b><img src="{can}/html-img"><script>{attack}</script>')])
    dm.add_message('display(SVG(...))', 'code', dialog_name='evil',
                   output=[out('image/svg+xml', f'<svg xmlns="http://www.w3.org/2000/svg" onload="parent.document.body.dataset.pwned=\'svg\'">'
                                                f'<script>{attack}</script><circle r="5"/></svg>')])
    dm.add_message('display(Javascript(...))', 'code', dialog_name='evil', output=[out('application/javascript', attack)])
    dm.add_message('print(1)', 'code', dialog_name='evil', output=[
        {'output_type': 'stream', 'name': 'stdout" onmouseover="document.body.dataset.pwned=\'stream\'" x="', 'text': 'text'},
        out('image/png', 'AAAA" onerror="document.body.dataset.pwned=\'png\'" x="'),
        out('text/markdown', f'<img src=x onerror="document.body.dataset.pwned=\'out-md\'"> [l](javascript:alert(1))')])
    dm.add_message(f'<script>document.body.dataset.pwned="raw"</script>', 'raw', dialog_name='evil')
    # a frame can still navigate itself (no sandbox flag or CSP stops that): it lands on the server as a refused GET
    dm.add_message('navigate', 'code', dialog_name='evil', output=[out('text/html', f'<meta http-equiv="refresh" content="1;url={srv}/add_relative_?content=PWNED-REFRESH">'
                   f'<script>setTimeout(() => {{ location.href = "{srv}/rm_dialog_?name=evil"; }}, 500)</script>')])
    dm.close_all()


def test_hostile_dialog_runs_nothing_in_the_page(tmp_path, browser):
    root = tmp_path / 'root'; root.mkdir()
    canary, port = Canary(), free_port()
    try:
        hostile_dialog(root, port, canary.port)
        path = root / 'evil.ipynb'
        before = path.read_bytes()
        with running(root, port=port) as srv:
            page = browser.new_page()
            requests, errors = [], []
            # requests that got an answer (one the browser blocked, e.g. by CSP, is reported as failed: it never left), and every one started
            sent = []
            page.on('requestfinished', lambda r: requests.append((r.method, r.url, r.frame == page.main_frame, r.is_navigation_request())))
            page.on('request', lambda r: sent.append((r.method, r.url, r.frame == page.main_frame, r.is_navigation_request())))
            page.on('pageerror', lambda e: errors.append(str(e)))
            page.goto(f'{srv.url}/dialog_?name=evil')
            page.wait_for_function('window.hnb && hnb.ready', timeout=15_000)
            # every output frame has loaded and run its scripts and inline handlers (the control: they do run, isolated)
            page.wait_for_function("[...document.querySelectorAll('iframe.frame')].length === 4", timeout=10_000)
            def ran(f):
                try: return 'FRAME-RAN' in (f.evaluate('document.body.innerText') or '')
                except Exception: return False  # (the frame that navigated away)
            deadline = time.monotonic() + 15
            while sum(map(ran, page.frames[1:])) < 3:  # the HTML, SVG and JavaScript outputs
                assert time.monotonic() < deadline, 'the outputs\' scripts did not run in their frames'
                time.sleep(0.2)
            page.click('text=click me'); page.click('text=and me')
            for f in page.frames[1:]:  # the frames' own content: a click there cannot reach the page either
                try: f.click('body', timeout=1000)
                except Exception: pass
            time.sleep(2)  # what the payload started (fetches, beacons, refreshes, sockets) has had its chance
            state = page.evaluate("""({pwned: document.body.dataset.pwned || null, title: document.title, extra: !!document.getElementById('pwned'),
                                       storage: localStorage.getItem('pwned'), frames: document.querySelectorAll('iframe').length,
                                       url: location.origin + location.pathname + location.search, overlay: [...document.querySelectorAll('#messages')].length})""")
            assert state == {'pwned': None, 'title': 'evil · headlesnb', 'extra': False, 'storage': None, 'frames': 4,
                             'url': f'{srv.url}/dialog_?name=evil', 'overlay': 1}, state
            assert len(browser.contexts[0].pages) == 1  # no popup opened
            # nothing from the payload made a request (fetch, XHR, beacon, image, form, websocket, popup): not to the server, not elsewhere;
            # the one thing a sandboxed frame keeps, navigating itself, reached the server as a GET the guard refused
            assert canary.payload_hits() == [], canary.payload_hits()
            ours = {'/dialog_', '/events_', '/favicon.ico'}
            page_own = [r for r in requests if r[2] and r[0] == 'GET' and httpx.URL(r[1]).path in ours]
            frame_loads = [r for r in sent if not r[2] and r[0] == 'GET' and r[3] and r[1] == f'{srv.url}/_frame']  # each frame's fixed document
            self_nav = [r for r in sent if not r[2] and r[0] == 'GET' and r[3] and r[1].startswith(srv.url) and r not in frame_loads]
            assert len(frame_loads) == 4, frame_loads
            stray = [r for r in requests if r not in page_own and r not in self_nav and r not in frame_loads]
            assert stray == [], stray
            refused = [l for l in srv.logs().splitlines() if 'refused' in l]
            assert len(refused) == len(self_nav) and all('fetch mode navigate, for iframe' in l for l in refused), (refused, self_nav)
            assert srv.ok('list_dialogs_')['items'] == ['evil']
            msgs = json.loads(srv.ok('find_msgs_', dlg_name='evil', include_skipped='true', context=0, include_output='false'))['msgs']
            assert len(msgs) == 7 and path.read_bytes() == before  # nothing added, nothing written
            # the one way in stays open: code in the dialog (here the real endpoint it calls) scripts its own page
            srv.ok('add_html_', dlg_name='evil', content='<div hx-swap-oob="beforeend:body"><script>document.body.dataset.trusted = "add_html"</script></div>')
            page.wait_for_function("document.body.dataset.trusted === 'add_html'", timeout=5_000)
            # the SVG output's onload now runs, and its reach for the page stops at the frame's opaque origin; nothing else failed
            blocked = [e for e in errors if 'Blocked a frame with origin "null" from accessing a cross-origin frame' in e]
            assert blocked and len(blocked) == len(errors), errors
        assert path.read_bytes() == before
    finally: canary.close()


def test_cross_origin_attacks_are_refused(tmp_path, browser):
    "A page elsewhere posts forms (text/plain, urlencoded, multipart), no-cors fetches and beacons: every one refused, nothing changes"
    root = tmp_path / 'root'; root.mkdir()
    with running(root) as srv:
        srv.ok('create_dialog_', name='target')
        srv.ok('add_relative_', dlg_name='target', content='keep me')
        before = srv.ok('find_msgs_', dlg_name='target', include_output='false', context=0)
        u = f'{srv.url}/add_relative_'
        forms = ''.join(f'<form target="f{i}" method="POST" action="{u}" enctype="{ct}"><input name="dlg_name" value="target">'
                        f'<input name="content" value="PWNED-{i}"><input name="msg_type" value="code"><input name="run" value="true"></form>'
                        f'<iframe name="f{i}"></iframe>' for i, ct in enumerate(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data']))
        attacker = Canary(f"""<!doctype html><html><body>{forms}<script>
            for (const f of document.forms) f.submit();
            fetch('{u}', {{method: 'POST', mode: 'no-cors', headers: {{'Content-Type': 'text/plain'}}, body: 'dlg_name=target&content=PWNED-nocors'}});
            fetch('{u}', {{method: 'POST', mode: 'no-cors', body: new URLSearchParams({{dlg_name: 'target', content: 'PWNED-urlenc'}})}});
            navigator.sendBeacon('{u}?dlg_name=target&content=PWNED-beacon', 'x');
            new Image().src = '{srv.url}/dialog_?name=target';
            document.title = 'sent';
        </script></body></html>""")
        try:
            for origin in (f'http://127.0.0.1:{attacker.port}', f'http://localhost:{attacker.port}'):  # same site (another port), another site
                n = srv.logs().count('refused')
                page = browser.new_page()
                page.goto(f'{origin}/attack')
                page.wait_for_function("document.title === 'sent'")
                deadline = time.monotonic() + 10
                while srv.logs().count('refused') < n + 7 and time.monotonic() < deadline: time.sleep(0.1)
                assert srv.logs().count('refused') >= n + 7, srv.logs()[-3000:]  # 3 forms, 2 fetches, a beacon, an image
                page.close()
            # the same by hand: every simple content type, Origin null (a sandboxed frame), a cross-site marker without Origin
            for ct in ('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'):
                for hdr in ({'Origin': 'https://evil.example'}, {'Origin': 'null'}, {'Sec-Fetch-Site': 'cross-site', 'Sec-Fetch-Mode': 'no-cors'}):
                    r = srv.http.post('/add_relative_', content=b'dlg_name=target&content=PWNED', headers={'Content-Type': ct, **hdr})
                    assert r.status_code == 403 and r.json()['error'], (ct, hdr, r.status_code, r.text)
            assert srv.ok('find_msgs_', dlg_name='target', include_output='false', context=0) == before
            srv.ok('stop_kernel_', name='target')
            assert messages_on_disk(root / 'target.ipynb') == ['keep me']
        finally: attacker.close()


def test_spoofed_host_and_dns_rebinding_refused(tmp_path, browser):
    root = tmp_path / 'root'; root.mkdir()
    with running(root) as srv:
        srv.ok('create_dialog_', name='d')
        for host in ('evil.example', f'evil.example:{srv.port}', f'127.0.0.1:{srv.port + 1}', f'localhost.evil.example:{srv.port}'):
            r = srv.http.post('/read_msg_', data={'dlg_name': 'd'}, headers={'Host': host})
            assert r.status_code == 421 and 'Host' in r.json()['error'], (host, r.text)
        for host in (f'localhost:{srv.port}', f'127.0.0.1:{srv.port}', f'[::1]:{srv.port}'):
            assert srv.http.get('/health', headers={'Host': host}).status_code == 200, host
        # Chromium resolves rebind.test to 127.0.0.1: what a rebinding attacker's page would reach
        page = browser.new_page()
        resp = page.goto(f'http://rebind.test:{srv.port}/dialog_?name=d')
        assert resp.status == 421
        r = page.evaluate(f"fetch('http://rebind.test:{srv.port}/list_dialogs_', {{method: 'POST'}}).then(r => r.status)")
        assert r == 421


def test_foreign_origin_websocket_refused(tmp_path):
    from websockets.sync.client import connect
    from websockets.exceptions import InvalidStatus
    root = tmp_path / 'root'; root.mkdir()
    with running(root) as srv:
        url = f'ws://127.0.0.1:{srv.port}/wsx?chan=c'
        for origin in ('https://evil.example', 'null', f'http://localhost:{srv.port + 1}'):
            with pytest.raises(InvalidStatus) as ei: connect(url, origin=origin, open_timeout=10)
            assert ei.value.response.status_code == 403
        with connect(url, open_timeout=10) as a, connect(url, origin=f'http://127.0.0.1:{srv.port}', open_timeout=10) as b:
            a.send('hi'); assert b.recv(timeout=10) == 'hi'  # local clients and the server's own page relay as before


# ---------------------------------------------------------------- off loopback: the token
def test_serve_off_loopback_needs_a_token(tmp_path, browser):
    root = tmp_path / 'root'; root.mkdir()
    port = free_port()
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', str(root), '--host', '0.0.0.0', '--port', str(port)],
                       cwd=REPO, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and 'token' in r.stderr, r.stderr
    token = 'tok-' + os.urandom(8).hex()
    with running(root, '--host', '0.0.0.0', '--token', token, token=token) as srv:
        bare = httpx.Client(base_url=srv.url, timeout=30)
        assert bare.post('/list_dialogs_').status_code == 401
        assert bare.post('/list_dialogs_', headers={'Authorization': 'Bearer wrong'}).status_code == 401
        srv.ok('create_dialog_', name='d')
        assert srv.http.post('/list_dialogs_', headers={'Origin': 'https://evil.example'}).status_code == 403  # a token does not excuse that
        # a browser: the first visit with ?token= sets the cookie (pages, GET only) and keeps the page secret; the page and its
        # event stream carry the cookie, the interrupt button the secret
        page = browser.new_page()
        assert page.goto(f'{srv.url}/dialog_?name=d').status == 401
        page.goto(f'{srv.url}/dialog_?name=d&token={token}')
        assert page.url == f'{srv.url}/dialog_?name=d'  # the token left the address bar
        page.wait_for_function('window.hnb && hnb.ready', timeout=15_000)
        srv.ok('add_relative_', dlg_name='d', content='seen live')
        page.wait_for_function("document.body.innerText.includes('seen live')", timeout=10_000)
        # the page's own POSTs carry its page secret (the cookie alone opens pages only): the interrupt button reaches the server
        with page.expect_response(lambda r: r.url.endswith('/interrupt_')) as resp: page.click('#hnb-interrupt')
        assert resp.value.status == 200, (resp.value.status, resp.value.text())
        assert resp.value.request.headers.get('x-headlesnb-token') == page.evaluate("localStorage.getItem('headlesnb-secret')")
        page.wait_for_function("document.getElementById('status').textContent !== 'live'", timeout=10_000)
        assert 'interrupt: 401' not in page.inner_text('#status') and 'token' not in page.inner_text('#status')
        assert page.evaluate("pushData('x', {a: 1})") is True  # (pushData too)
        cookie = next(c for c in page.context.cookies() if c['name'].startswith('headlesnb_serve_token_'))
        assert token not in cookie['value'] and cookie['httpOnly'] and cookie['sameSite'] == 'Strict'
        r = bare.post('/list_dialogs_', headers={'Cookie': f"{cookie['name']}={cookie['value']}"})  # that cookie, replayed elsewhere
        assert r.status_code == 401 and "a cookie opens this server's pages only" in r.json()['error'], r.text
        bare.close()


def test_mcp_http_off_loopback(tmp_path):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    import httpx2
    port = free_port()
    args = [sys.executable, '-m', 'headlesnb.fronts.mcp', '--root', str(tmp_path), '--transport', 'http', '--host', '0.0.0.0', '--port', str(port)]
    r = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and 'token' in r.stderr, r.stderr
    token = 'mcp-' + os.urandom(8).hex()
    p = subprocess.Popen(args + ['--token', token], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f'http://127.0.0.1:{port}/mcp'
        end = time.monotonic() + 60
        while True:
            assert p.poll() is None, p.stderr.read().decode()[-2000:]
            try:
                with socket.create_connection(('127.0.0.1', port), timeout=0.2): break
            except OSError: assert time.monotonic() < end; time.sleep(0.1)
        init = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
                'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}}}
        hdr = {'Accept': 'application/json, text/event-stream', 'Content-Type': 'application/json', 'Authorization': f'Bearer {token}'}
        with httpx.Client(timeout=30) as h:
            assert h.post(url, json=init, headers={k: v for k, v in hdr.items() if k != 'Authorization'}).status_code == 401
            for bad, status in [({'Origin': 'https://evil.example'}, 403), ({'Origin': 'null'}, 403), ({'Host': f'evil.example:{port}'}, 421),
                                ({'Content-Type': 'text/plain', 'Origin': 'https://evil.example'}, 403)]:
                r = h.post(url, json=init, headers={**hdr, **bad})
                assert r.status_code == status, (bad, r.status_code, r.text)
        async def session():
            async with httpx2.AsyncClient(headers={'Authorization': f'Bearer {token}'}, timeout=httpx2.Timeout(30, read=120)) as hc:
                async with streamable_http_client(url, http_client=hc) as (rd, wr), ClientSession(rd, wr) as s:
                    await s.initialize()
                    res = await s.call_tool('ping', {})
                    assert not res.is_error and res.content[0].text == 'pong'
        anyio.run(session)
    finally:
        p.terminate()
        try: p.wait(10)
        except subprocess.TimeoutExpired: p.kill(); p.wait()
        p.stderr.close()


# ---------------------------------------------------------------- crashes: what is acknowledged is on disk
def _kill_after_reply(base: Path, k: int, *args) -> bool:
    "Start a server, add a message, SIGKILL it as soon as the reply is in; True if the message is in the file"
    root = base / f'try{k}'; root.mkdir(parents=True)
    srv = start_server(root, *args)
    try:
        srv.ok('create_dialog_', name='d')
        content = f'acknowledged {k} {os.urandom(4).hex()}'
        r = srv.post('add_relative_', dlg_name='d', content=content, placement='at_end')
        assert r.status_code == 200, r.text
        srv.kill()
        return content in messages_on_disk(root / 'd.ipynb')
    finally: stop(srv)


def test_sigkill_right_after_the_reply_loses_nothing(tmp_path):
    with ThreadPoolExecutor(4) as ex: kept = list(ex.map(lambda k: _kill_after_reply(tmp_path / 'durable', k), range(20)))
    assert all(kept), f'{kept.count(False)} of 20 acknowledged messages lost'
    # the harness does see a loss when replies go out before the save (so the check above can fail)
    with ThreadPoolExecutor(4) as ex: kept = list(ex.map(lambda k: _kill_after_reply(tmp_path / 'coalesced', k, '--no-durable'), range(4)))
    assert not all(kept), 'with --no-durable nothing was lost: this harness could not tell'


def test_a_burst_of_acknowledged_adds_survives_sigkill(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    srv = start_server(root)
    try:
        srv.ok('create_dialog_', name='burst')
        acked, stop_at = [], time.monotonic() + 2
        def client(i):
            with httpx.Client(base_url=srv.url, timeout=30) as h:
                j = 0
                while time.monotonic() < stop_at:
                    c = f'c{i}-{j}'
                    try: r = h.post('/add_relative_', data={'dlg_name': 'burst', 'content': c, 'placement': 'at_end'})
                    except httpx.TransportError: return  # killed: no reply, so not acknowledged
                    if r.status_code == 200: acked.append(c)
                    j += 1
        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads: t.start()
        time.sleep(1.5)
        srv.kill()  # while the clients are still sending
        for t in threads: t.join(30)
    finally: stop(srv)
    on_disk = set(messages_on_disk(root / 'burst.ipynb'))
    lost = [c for c in acked if c not in on_disk]
    assert len(acked) > 50, f'only {len(acked)} adds acknowledged: too few to mean much'
    assert not lost, f'{len(lost)} of {len(acked)} acknowledged adds lost, e.g. {lost[:5]}'


# ---------------------------------------------------------------- files
def test_read_only_dialog_stays(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with running(root) as srv:
        srv.ok('create_dialog_', name='ro')
        mid = srv.ok('add_relative_', dlg_name='ro', content='frozen')['id']
        srv.ok('stop_kernel_', name='ro')
    path = root / 'ro.ipynb'
    path.chmod(0o444)
    before, st = path.read_bytes(), path.stat()
    with running(root) as srv:
        assert srv.ok('read_msg_', dlg_name='ro', id_=mid, n=0)['content'] == 'frozen'  # readable
        for ep, data in [('add_relative_', dict(content='x')), ('update_msg_', dict(id_=mid, content='y')), ('rm_msg_', dict(msid=mid)),
                         ('bookmark_', dict(id_=mid, n='1')), ('toggle_export_', dict(ids=mid))]:
            r = srv.post(ep, dlg_name='ro', **data)
            assert r.status_code == 409 and 'read-only' in (r.text + r.headers.get('x-headlesnb-error', '')), (ep, r.status_code, r.text)
        assert srv.ok('read_msg_', dlg_name='ro', id_=mid, n=0)['content'] == 'frozen'
        srv.ok('stop_kernel_', name='ro')
    assert path.read_bytes() == before and path.stat().st_ino == st.st_ino and stat.S_IMODE(path.stat().st_mode) == 0o444


def test_symlink_swapped_in_is_refused(tmp_path):
    root, outside = tmp_path / 'root', tmp_path / 'outside'
    root.mkdir(); outside.mkdir()
    with running(root) as srv:
        srv.ok('create_dialog_', name='sw')
        srv.ok('add_relative_', dlg_name='sw', content='ours')
        secret = outside / 'secret.ipynb'
        secret.write_bytes((root / 'sw.ipynb').read_bytes().replace(b'ours', b'SECRET'))
        target = secret.read_bytes()
        (root / 'sw.ipynb').unlink(); (root / 'sw.ipynb').symlink_to(secret)  # swapped while open
        for ep, data in [('add_relative_', dict(content='through the link')), ('read_msg_', dict(n=0, relative='false'))]:
            r = srv.post(ep, dlg_name='sw', **data)
            assert r.status_code == 403 and 'symbolic link' in r.json()['error'], (ep, r.status_code, r.text)
        srv.post('stop_kernel_', name='sw')
    assert secret.read_bytes() == target and (root / 'sw.ipynb').is_symlink()


# ---------------------------------------------------------------- limits
def test_catastrophic_regex_is_cut_off_while_the_server_answers(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with running(root) as srv:
        srv.ok('create_dialog_', name='re')
        srv.ok('add_relative_', dlg_name='re', content='a' * 60)
        res, lat = {}, []
        def search():
            t = time.monotonic()
            r = srv.post('find_msgs_', dlg_name='re', re_pattern='(a|aa)+b')
            res.update(status=r.status_code, error=r.json().get('error'), took=time.monotonic() - t)
        th = threading.Thread(target=search); th.start()
        time.sleep(0.3)
        with httpx.Client(base_url=srv.url, timeout=30) as h:
            while th.is_alive():
                t = time.perf_counter()
                assert h.get('/health').status_code == 200
                assert h.post('/read_msg_', data={'dlg_name': 're', 'n': '0', 'relative': 'false'}).status_code == 200
                lat.append(time.perf_counter() - t)
                time.sleep(0.05)
        th.join()
        assert res['status'] == 400 and 'took longer than' in res['error'], res
        assert res['took'] < 30, res
        # answered all along (a frozen process would show one answer as slow as the whole search, seconds)
        assert len(lat) >= 5 and statistics.median(lat) < 0.1 and max(lat) < 2, (len(lat), statistics.median(lat), max(lat), res)
        # the workspace's grep (a caller's pattern over files) is cut off the same way
        (root / 'big.txt').write_text('a' * 60 + '\n')
        r = srv.post('workspace_', dlg_name='re', tool='grep', args=json.dumps({'pattern': '(a|aa)+b'}))
        assert r.status_code == 400 and 'took longer than' in r.json()['error'], r.text


def _raw_request(port, head: bytes, body_chunks, timeout=30) -> bytes:
    "Send a request by hand (headers, then body chunks, stopping when the server closes); the raw answer (head and body)"
    s = socket.create_connection(('127.0.0.1', port), timeout=timeout)
    try:
        s.sendall(head)
        for ch in body_chunks:
            try: s.sendall(ch)
            except OSError: break  # the server answered and closed: it did not read the rest
        out = b''
        while True:
            if b'\r\n\r\n' in out:
                h, _, rest = out.partition(b'\r\n\r\n')
                m = re.search(rb'(?im)^content-length:\s*(\d+)', h)
                if m and len(rest) >= int(m.group(1)): return out
            try: d = s.recv(65536)
            except OSError: return out
            if not d: return out
            out += d
    finally: s.close()


def test_oversized_body_gets_413_and_memory_does_not_grow(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with running(root) as srv:
        srv.ok('create_dialog_', name='big')
        for _ in range(5): srv.ok('read_msg_', dlg_name='big', n=0)  # warm
        rss0 = srv.rss()
        n = 50 * 1024 * 1024
        head = (f'POST /add_relative_ HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nContent-Type: application/x-www-form-urlencoded\r\n'
                f'Content-Length: {n}\r\n\r\n').encode()
        chunk = b'dlg_name=big&content=' + b'x' * (1024 * 1024 - 21)
        t = time.monotonic()
        answer = _raw_request(srv.port, head, [chunk] * 50)
        assert answer.startswith(b'HTTP/1.1 413'), answer[:300]
        assert time.monotonic() - t < 20
        rss1 = srv.rss()
        assert rss1 - rss0 < 8 * 1024 * 1024, f'the server grew by {(rss1 - rss0) / 2**20:.1f} MB'
        # sent without a length (chunked): cut off at the limit, with a 413 too
        head = (f'POST /add_relative_ HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nContent-Type: application/x-www-form-urlencoded\r\n'
                'Transfer-Encoding: chunked\r\n\r\n').encode()
        answer = _raw_request(srv.port, head, [b'%x\r\n%s\r\n' % (len(chunk), chunk)] * 40 + [b'0\r\n\r\n'])
        assert answer.startswith(b'HTTP/1.1 413'), answer[:300]
        assert srv.ok('find_msgs_', dlg_name='big', include_output='false') == '{"msgs": []}'  # nothing was added
        assert srv.http.get('/health').status_code == 200
        # just under the limit is fine, and is parsed off the event loop while /health answers
        big = 'y' * (20 * 1024 * 1024)
        th = threading.Thread(target=lambda: srv.ok('add_relative_', dlg_name='big', content=big)); th.start()
        lat = []
        while th.is_alive():
            t = time.perf_counter(); srv.http.get('/health'); lat.append(time.perf_counter() - t); time.sleep(0.02)
        th.join()
        assert max(lat) < 1.0, max(lat)


def test_every_bad_input_is_a_4xx_with_one_line(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with running(root) as srv:
        srv.ok('create_dialog_', name='safe')
        mid = srv.ok('add_relative_', dlg_name='safe', content='keep me')['id']
        srv.ok('stop_kernel_', name='safe')
        before = (root / 'safe.ipynb').read_bytes()
        d = dict(dlg_name='safe')
        deep = '[' * 100_000 + ']' * 100_000
        bad = [('create_dialog_', dict(name='a' * 250)), ('create_dialog_', dict(name='name\n')), ('create_dialog_', dict(name=' padded')),
               ('create_dialog_', dict(name='tab\there')), ('read_msg_', dict(dlg_name='safe\r')), ('read_msg_', dict(dlg_name='x' * 5000)),
               ('update_msg_', dict(d, id_=mid, meta=deep)), ('update_msg_', dict(d, id_=mid, meta='{"a": ' * 50_000)),
               ('add_relative_', dict(d, content='x', msg_type='code', output=deep)), ('find_msgs_', dict(d, re_pattern='x' * 5000)),
               ('find_msgs_', dict(d, re_pattern='(?P<')), ('find_msgs_', dict(d, limit='9' * 5000)), ('read_msg_', dict(d, n='9' * 5000)),
               ('read_msg_', dict(d, n='1e999')), ('bookmark_', dict(d, id_=mid, n='-1')),
               ('realpath_', dict(subpath='a\x00b')), ('pop_data_blocking_', dict(data_id='x', timeout='soon')),
               ('workspace_', dict(d, tool='grep', args='{"pattern": 1}')), ('workspace_', dict(d, tool='nope')),
               ('load_dialog_', dict(d, src_dname='a' * 300)), ('rm_dialog_', dict(name='\x7f')), ('interrupt_', dict(dlg_name='../x'))]
        for ep, data in bad:
            r = srv.post(ep, **data)
            msg = r.json().get('error', '') if r.headers['content-type'].startswith('application/json') else r.headers.get('x-headlesnb-error', '')
            assert 400 <= r.status_code < 500, (ep, {k: v[:50] for k, v in data.items()}, r.status_code, r.text[:500])
            assert msg and '\n' not in msg and 'Traceback' not in msg, (ep, msg)
        for body, ct in [(b'{"a": ' * 100_000, 'application/json'), (b'\xff' * 100, 'application/x-www-form-urlencoded'),
                         (b'--x\r\nbroken', 'multipart/form-data; boundary=x'), (b'dlg_name=safe', 'text/plain'), (b'x', 'application/xml')]:
            r = srv.http.post('/read_msg_', content=body, headers={'content-type': ct})
            assert 400 <= r.status_code < 500 and r.json()['error'], (ct, r.status_code, r.text[:300])
        r = srv.http.post('/push_data_blocking_', content=b'{"data_id": ' * 100_000, headers={'content-type': 'application/json'})
        assert r.status_code == 400, r.text[:300]
        assert srv.ok('read_msg_', dlg_name='safe', n=0, id_=mid)['content'] == 'keep me'
        srv.ok('stop_kernel_', name='safe')
        assert (root / 'safe.ipynb').read_bytes() == before
        assert srv.proc.poll() is None
        logs = srv.logs()
        assert 'unexpected error' not in logs, logs[-3000:]  # nothing was a bug (a 500); what Python raised is logged with its traceback
        assert 'Traceback' in logs  # e.g. the RecursionError of the deep JSON


def test_mcp_bad_inputs_are_one_line_errors(tmp_path):
    from test_mcp import stdio_session, ok, err, run
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'create_dialog', dialog_name='d')
            for tool, args in [('create_dialog', dict(dialog_name='a' * 250)), ('create_dialog', dict(dialog_name='x\n')),
                               ('use_dialog', dict(dialog_name='../../etc/passwd')), ('find_msgs', dict(re_pattern='(?P<', dialog_name='d')),
                               ('find_msgs', dict(re_pattern='x' * 5000, dialog_name='d')), ('read_msg', dict(msg_id='nope', dialog_name='d')),
                               ('use_notebook', dict(notebook_name='n', notebook_path='\x00'))]:
                await err(s, tool, **args)
            await ok(s, 'add_msg', content='a' * 60, dialog_name='d')
            msg = await err(s, 'find_msgs', re_pattern='(a|aa)+b', dialog_name='d')
            assert 'took longer than' in msg
            assert await ok(s, 'ping') == 'pong'
    run(main)


# ---------------------------------------------------------------- interrupts and timeouts
def test_page_interrupt_button_stops_the_run(tmp_path, browser):
    root = tmp_path / 'root'; root.mkdir()
    with running(root) as srv:
        srv.ok('create_dialog_', name='loop')
        mid = srv.ok('add_relative_', dlg_name='loop', content='import time\nfor i in range(600): time.sleep(0.05)', msg_type='code', run='true')['id']
        nxt = srv.ok('add_relative_', dlg_name='loop', content='print("queued")', msg_type='code', run='true')['id']
        page = browser.new_page()
        page.goto(f'{srv.url}/dialog_?name=loop')
        page.wait_for_function('window.hnb && hnb.ready', timeout=15_000)
        time.sleep(0.5)
        assert srv.ok('read_msg_', dlg_name='loop', id_=mid, n=0)['run'] is True
        t = time.monotonic()
        page.click('#hnb-interrupt')
        page.wait_for_function("document.getElementById('status').textContent.includes('interrupted')", timeout=10_000)
        while srv.ok('read_msg_', dlg_name='loop', id_=mid, n=0)['run']:
            assert time.monotonic() - t < 10; time.sleep(0.05)
        assert time.monotonic() - t < 5
        assert 'interrupted' in srv.ok('read_msg_', dlg_name='loop', id_=mid, n=0)['output']
        assert srv.ok('read_msg_', dlg_name='loop', id_=nxt, n=0)['output'] == ''  # the queued run was dropped


def test_mcp_interrupt_and_queued_time_counts(tmp_path):
    from test_mcp import stdio_session, ok, err, run
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'create_dialog', dialog_name='d')
            slow = (await ok(s, 'add_msg', content='import time\ntime.sleep(4)', msg_type='code', dialog_name='d')).split()[3]
            quick = (await ok(s, 'add_msg', content='21 * 2', msg_type='code', dialog_name='d')).split()[3]
            await ok(s, 'run_msg', msg_id=quick, dialog_name='d')  # the kernel is up
            out = {}
            async def call(key, args):
                t = time.monotonic()
                res = await s.call_tool('run_msg', dict(dialog_name='d', **args))
                out[key] = (res, time.monotonic() - t)
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, 'slow', dict(msg_id=slow, timeout=30))
                await anyio.sleep(0.5)
                tg.start_soon(call, 'quick', dict(msg_id=quick, timeout=2))
            res, took = out['quick']
            text = res.content[0].text
            assert 'timeout' in text and 'did not start' in text, text
            assert took < 3.0, took  # its 2 s included the wait behind the slow run: it answered at its deadline, not after the slow run
            assert 'ok' in out['slow'][0].content[0].text
            # interrupting a dialog's run from MCP
            long = (await ok(s, 'add_msg', content='import time\nfor i in range(600): time.sleep(0.05)', msg_type='code', dialog_name='d')).split()[3]
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, 'long', dict(msg_id=long, timeout=60))
                await anyio.sleep(1)
                t = time.monotonic()
                assert 'interrupted' in await ok(s, 'interrupt_dialog', dialog_name='d')
            res, _ = out['long']
            assert 'interrupted' in res.content[0].text and time.monotonic() - t < 5, res.content[0].text
    run(main)


def test_security_md_is_the_docs_page():
    assert (REPO / 'SECURITY.md').read_text() == (REPO / 'nbs' / 'security.md').read_text()
