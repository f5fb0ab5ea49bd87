"""`headlesnb serve` against what a second audit found: each test starts real servers as subprocesses (stopped by PID).

- A request carrying two Host (or Origin, Sec-Fetch-Site, Authorization) headers is 400, for HTTP and websocket
  routes, on serve, the MCP HTTP server and the proxy (only the last one was checked: a foreign Host before ours passed).
- A 413 names `--max-body-mb`; `search_` says serve has no web search (it told a serve user to call `build_app`).
- The dialog page shows why a prompt failed (`run_error`, escaped: it was only in the meta), draws a reply as it
  streams (the whole reply came at the end: a long answer looked hung; `read_msg_` shows it too), and says a deleted
  dialog was deleted (it said "live" and kept the deleted messages).
"""
import json, os, re, select, socket, subprocess, sys, time
from pathlib import Path

import httpx
import pytest
from conftest import free_port
from fake_anthropic import FakeAnthropic
import test_serve_audit as serve_audit

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(180)


def raw(port:int, head:str, body:bytes=b'') -> bytes:
    "Send one HTTP/1.1 request as given (header lines joined by CRLF): its answer's status line and body (the server closes)"
    with socket.create_connection(('127.0.0.1', port), timeout=10) as s:
        s.sendall(head.replace('\n', '\r\n').encode() + b'\r\n\r\n' + body)
        got = b''
        while (more := s.recv(65536)): got += more
    return got.split(b'\r\n', 1)[0] + b' ' + got.partition(b'\r\n\r\n')[2]

REFUSED = re.compile(rb'HTTP/1.1 400 .*more than one [A-Za-z-]+ header: a request has at most one; send it once', re.S)  # (the guard's, not the app's 400)


def twice(port:int, path:str, extra:str='') -> dict:
    "The status lines of requests to `path` carrying two of a header the guard decides by, both orders, and of one with one"
    me, evil = f'127.0.0.1:{port}', 'evil.example'
    ct = 'Content-Type: application/json\nContent-Length: 2'
    cases = {'host evil first': f'Host: {evil}:{port}\nHost: {me}', 'host ours first': f'Host: {me}\nHost: {evil}:{port}',
             'origin evil first': f'Host: {me}\nOrigin: http://{evil}\nOrigin: http://{me}',
             'origin ours first': f'Host: {me}\nOrigin: http://{me}\nOrigin: http://{evil}',
             'sec-fetch-site': f'Host: {me}\nSec-Fetch-Site: cross-site\nSec-Fetch-Site: same-origin',
             'authorization': f'Host: {me}\nAuthorization: Bearer a\nAuthorization: Bearer b'}
    return {k: raw(port, f'POST {path} HTTP/1.1\n{v}\n{ct}\n{extra}Connection: close', b'{}') for k, v in cases.items()}


def ws_twice(port:int) -> bytes:
    "A websocket handshake with two Hosts, ours last (two Origins the websocket library refuses itself)"
    return raw(port, f'GET /wsx?chan=a HTTP/1.1\nHost: evil.example:{port}\nHost: 127.0.0.1:{port}\n'
                     'Upgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Version: 13')


def test_two_hosts_or_origins_are_refused_on_every_server(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with serve_audit.serve(root) as (http, log):
        port = http.base_url.port
        got = twice(port, '/list_dialogs_')
        assert all(REFUSED.match(v) for v in got.values()), got
        assert REFUSED.match(ws_twice(port)), ws_twice(port)
        assert raw(port, f'POST /list_dialogs_ HTTP/1.1\nHost: 127.0.0.1:{port}\nContent-Length: 0\nConnection: close').startswith(b'HTTP/1.1 200 ')  # (one of each: served)
        assert 'more than one Host header: a request has at most one; send it once' in log.read_text()
    # the MCP HTTP server and the proxy check with the same guard
    port = free_port()
    mcp = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.mcp', '--root', str(root), '--transport', 'http', '--port', str(port)],
                           cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 60
        while True:
            assert mcp.poll() is None and time.monotonic() < end, 'the MCP server did not start'
            try:
                with socket.create_connection(('127.0.0.1', port), timeout=0.2): break
            except OSError: time.sleep(0.1)
        got = twice(port, '/mcp', 'Accept: application/json, text/event-stream\n')
        assert all(REFUSED.match(v) for v in got.values()), got
    finally:
        mcp.terminate(); mcp.wait(15)
    proxy = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'proxy', '--root', str(root), '--port', '0', '--upstream', 'http://127.0.0.1:9'],
                             cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proxy.stderr.readline() if select.select([proxy.stderr], [], [], 60)[0] else ''
        port = int(re.search(r'http://127\.0\.0\.1:(\d+)', line).group(1))
        got = twice(port, '/v1/messages/count_tokens')
        assert all(REFUSED.match(v) for v in got.values()), got
    finally:
        proxy.terminate(); proxy.wait(15); proxy.stderr.close()


def test_413_and_search_say_what_a_serve_user_can_do(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    with serve_audit.serve(root, '--max-body-mb', '0.01') as (http, log):
        serve_audit.ok(http, 'create_dialog_', name='d')
        r = http.post('/add_relative_', data={'dlg_name': 'd', 'content': 'x' * 20000})
        assert r.status_code == 413, r.text
        assert r.json()['error'].endswith('send a smaller body, or restart headlesnb serve with a larger --max-body-mb'), r.text
        for ep, data in (('search_', {'q': 'x'}), ('searches_', {'searches': 'x'})):
            r = http.post(f'/{ep}', data=data)
            assert r.status_code == 501 and 'headlesnb serve has no web search' in r.json()['error'], r.text


def wait_for(cond, secs=30, what='a condition'):
    end = time.monotonic() + secs
    while not (v := cond()):
        assert time.monotonic() < end, f'timed out waiting for {what}'
        time.sleep(0.05)
    return v


def test_page_shows_errors_streams_replies_and_says_deleted(tmp_path, browser):
    root, words = tmp_path / 'root', [f'w{i:02d} ' for i in range(30)]
    root.mkdir()
    hostile = '<img src=x onerror="window.__pwned=1"> Overloaded'
    with FakeAnthropic(replies=[FakeAnthropic.error(529, hostile), [{'type': 'text', 'text': w} for w in words]], delay=0.05) as fake, \
         serve_audit.serve(root, env={'ANTHROPIC_API_KEY': 't', 'ANTHROPIC_BASE_URL': fake.url}, timeout=60) as (http, log):
        serve_audit.ok(http, 'create_dialog_', name='d', template='false')
        page = browser.new_page()
        page.goto(f'{serve_audit.base(http)}/dialog_?name=d')
        page.wait_for_function('window.hnb && hnb.ready', timeout=15_000)
        # 1. a prompt that fails: why is drawn under it, escaped
        p1 = serve_audit.ok(http, 'add_relative_', dlg_name='d', msg_type='prompt', content='first', run='true')['id']
        err = page.wait_for_selector(f'#_{p1} .run-error', timeout=30_000).inner_text()
        assert err.startswith('its last run failed: ') and hostile in err, err
        assert page.evaluate('window.__pwned') is None
        # 2. a reply streaming slowly (30 blocks, about 0.25 s each): the page and read_msg_ show it as it grows
        p2 = serve_audit.ok(http, 'add_relative_', dlg_name='d', msg_type='prompt', content='second', run='true')['id']
        wait_for(lambda: page.evaluate(f"(document.querySelector('#_{p2} .reply') || {{}}).textContent || ''").startswith('w0'), what='the reply so far on the page')
        shown = page.evaluate(f"document.querySelector('#_{p2}').className")
        assert 'running' in shown, shown  # drawn while the prompt still runs, not at its end
        d = http.post('/read_msg_', data={'dlg_name': 'd', 'id_': p2, 'n': 0}).json()
        assert d['run'] and d['output'].startswith('w0') and len(d['output']) < len(''.join(words)), d
        wait_for(lambda: not http.post('/read_msg_', data={'dlg_name': 'd', 'id_': p2, 'n': 0}).json()['run'], what='the prompt to end')
        wait_for(lambda: page.evaluate(f"document.querySelector('#_{p2} .reply').textContent").split() == ''.join(words).split(), what='the whole reply')
        # 3. the dialog deleted: the page says so, and stops saying live
        serve_audit.ok(http, 'rm_dialog_', name='d')
        wait_for(lambda: page.inner_text('#status') == 'deleted', 10, 'the page to say deleted')
        assert 'This dialog was deleted' in page.inner_text('#messages') and p1 not in page.inner_text('#messages')
        time.sleep(1)
        assert page.inner_text('#status') == 'deleted'  # (it does not reconnect and say live again)
        # a page opened (or reconnected) on a dialog already gone says so too
        page.goto(f'{serve_audit.base(http)}/dialog_?name=d')
        assert 'There is no dialog' in page.inner_text('body')
