"""The servers against the attacker audit (A3, A5, A6, A11, A12), through real `headlesnb serve`, `headlesnb mcp --transport
http` and `headlesnb proxy` subprocesses and raw sockets.

- A12: `--allow-host '*'` (any Host) without a token is refused at start (exit 2, saying why: a DNS-rebinding page is
  same-origin), for all three servers; with a token, a foreign Origin is still refused (403), the request's own Host as
  Origin passes with the token and not without it.
- A11: a token no client can send (not printable ASCII, or with a space), from --token or the environment, is refused at
  start (exit 2) naming the characters allowed, never the token.
- A5: the cookie a `?token=` visit to serve sets does not hold the token (browsers send it to every port of 127.0.0.1)
  and opens pages (GET) only: replayed from another process it can POST nothing (the audit's attack, end to end: no
  dialog made, no code run); the page's own POSTs carry its page secret. mcp sets no cookie and takes no ?token=.
- A3: the proxy refuses a chunk size that is not hex digits (`-1`) and a chunk line or trailer past its cap with 400,
  without reading on, and a huge chunk size with 413; the upstream is never reached.
- A6: `--log-requests` masks the values of the path's query.
Every process is stopped by its PID.
"""
import json, os, re, select, socket, subprocess, sys, time
from pathlib import Path

import httpx
import pytest
from conftest import free_port
from fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.timeout(240)
REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)}
for _v in ('HEADLESNB_TOKEN', 'HEADLESNB_MCP_TOKEN', 'HEADLESNB_PROXY_TOKEN', 'JUPYTER_URL'): ENV.pop(_v, None)
CLI = [sys.executable, '-m', 'headlesnb.fronts.cli']
INIT = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
        'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'audit3', 'version': '1'}}}
MCP_HEADERS = {'Accept': 'application/json, text/event-stream', 'Content-Type': 'application/json'}


def command(kind:str, root, port:int) -> list:
    "The command line of server `kind` (serve, mcp, proxy) on `port` of 127.0.0.1"
    extra = {'serve': ['serve'], 'mcp': ['mcp', '--transport', 'http'], 'proxy': ['proxy', '--upstream', 'http://127.0.0.1:9']}[kind]
    return CLI + extra + ['--root', str(root), '--port', str(port)]


def start(kind:str, root, *args, env=None) -> tuple:
    "Server `kind` with `args`, listening: (process, port)"
    port = free_port()
    p = subprocess.Popen(command(kind, root, port) + list(args), cwd=REPO, env=env or ENV, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while True:
        assert p.poll() is None, f'{kind} exited ({p.returncode}): {p.stderr.read()}'
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=0.2): return p, port
        except OSError: assert time.monotonic() < end, f'{kind} did not listen'; time.sleep(0.1)


def stop(p):
    "Stop server `p` by its PID"
    p.terminate()
    try: p.communicate(timeout=20)
    except subprocess.TimeoutExpired: p.kill(); p.communicate()


def refused_at_start(kind:str, root, *args, env=None) -> str:
    "Server `kind` with `args` must refuse to start with argparse's exit 2: its stderr"
    r = subprocess.run(command(kind, root, free_port()) + list(args), cwd=REPO, env=env or ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and 'Traceback' not in r.stderr, (kind, args, r.returncode, r.stderr)
    return r.stderr


# ---------------------------------------------------------------- A12: --allow-host '*'
@pytest.mark.parametrize('kind', ['serve', 'mcp', 'proxy'])
def test_any_host_needs_a_token(tmp_path, kind):
    err = refused_at_start(kind, tmp_path, '--allow-host', '*')
    assert "argument --allow-host" in err and "with --allow-host '*' needs a token" in err and 'DNS rebinding' in err, err
    if kind == 'serve':  # a token from the server's variable is a token
        p, _ = start(kind, tmp_path, '--allow-host', '*', env={**ENV, 'HEADLESNB_TOKEN': 'env-token-1'})
        stop(p)


def test_any_host_keeps_the_origin_rule_serve(tmp_path):
    tok = 'tok-' + os.urandom(8).hex()
    p, port = start('serve', tmp_path, '--allow-host', '*', '--token', tok)
    try:
        url, auth = f'http://127.0.0.1:{port}/create_dialog_', {'Authorization': f'Bearer {tok}'}
        for origin in ('http://other.example', 'https://attacker.example', f'http://rebind.example:{port + 1}'):
            r = httpx.post(url, data={'name': 'csrf'}, headers={**auth, 'Host': f'rebind.example:{port}', 'Origin': origin}, timeout=30)
            assert r.status_code == 403 and 'cross-origin' in r.json()['error'], (origin, r.status_code, r.text)
        own = {'Host': f'rebind.example:{port}', 'Origin': f'http://rebind.example:{port}'}  # a DNS-rebinding page is its own origin
        assert httpx.post(url, data={'name': 'rebound'}, headers=own, timeout=30).status_code == 401  # only the token stops it
        r = httpx.post(url, data={'name': 'ok'}, headers={**own, **auth}, timeout=30)
        assert r.status_code == 200, r.text
        assert not (tmp_path / 'csrf.ipynb').exists() and not (tmp_path / 'rebound.ipynb').exists() and (tmp_path / 'ok.ipynb').exists()
    finally: stop(p)


def test_any_host_keeps_the_origin_rule_mcp_and_proxy(tmp_path):
    tok = 'tok-' + os.urandom(8).hex()
    p, port = start('mcp', tmp_path, '--allow-host', '*', '--token', tok)
    try:
        url, hdr = f'http://127.0.0.1:{port}/mcp', {**MCP_HEADERS, 'Authorization': f'Bearer {tok}'}
        r = httpx.post(url, json=INIT, headers={**hdr, 'Origin': 'http://other.example'}, timeout=30)
        assert r.status_code == 403, (r.status_code, r.text)
        own = {'Host': f'rebind.example:{port}', 'Origin': f'http://rebind.example:{port}'}
        assert httpx.post(url, json=INIT, headers={**MCP_HEADERS, **own}, timeout=30).status_code == 401
        assert httpx.post(url, json=INIT, headers={**hdr, **own}, timeout=30).status_code == 200
    finally: stop(p)
    p, port = start('proxy', tmp_path, '--allow-host', '*', '--token', tok)
    try:
        r = httpx.post(f'http://127.0.0.1:{port}/v1/messages', json={}, headers={'X-Headlesnb-Token': tok, 'Origin': 'http://other.example'}, timeout=30)
        assert r.status_code == 403, (r.status_code, r.text)
    finally: stop(p)


# ---------------------------------------------------------------- A11: a token no client can send
@pytest.mark.parametrize('kind', ['serve', 'mcp', 'proxy'])
def test_a_token_that_cannot_be_sent_is_refused_at_start(tmp_path, kind):
    err = refused_at_start(kind, tmp_path, '--token', 'tökén-secret')
    assert "argument --token" in err and "token holds 'ö', which a client cannot send" in err and 'letters, digits' in err, err
    assert 'tökén-secret' not in err  # (the token is a secret: only the character is named)
    err = refused_at_start(kind, tmp_path, '--token', 'two words')
    assert "token holds ' '" in err, err
    env = {'serve': 'HEADLESNB_TOKEN', 'mcp': 'HEADLESNB_MCP_TOKEN', 'proxy': 'HEADLESNB_PROXY_TOKEN'}[kind]
    err = refused_at_start(kind, tmp_path, env={**ENV, env: 'sécret-token'})
    assert f"argument ${env}" in err and "token holds 'é'" in err, err


# ---------------------------------------------------------------- A5: the cookie is not the token, and opens pages only
@pytest.mark.parametrize('kind', ['serve', 'mcp'])
def test_the_token_cookie_is_not_the_token(tmp_path, kind):
    """Browsers send a host's cookies to every port of it: the cookie a `?token=` visit sets (serve only) holds no token and
    opens pages (GET) only; a POST with it alone is 401. mcp sets no cookie and takes no token from the address"""
    tok = 'TOPSECRET-' + os.urandom(8).hex()
    p, port = start(kind, tmp_path, '--token', tok)
    try:
        base = f'http://127.0.0.1:{port}'
        r = httpx.get(f'{base}/?token={tok}', timeout=30)
        probe = (f'{base}/list_dialogs_', {}, {}) if kind == 'serve' else (f'{base}/mcp', MCP_HEADERS, {'json': INIT})
        def post(headers): return httpx.post(probe[0], headers={**probe[1], **headers}, **probe[2], timeout=30)
        if kind == 'mcp':  # no cookie, and ?token= is no credential: the token goes in a header
            assert r.status_code == 401 and 'set-cookie' not in r.headers, (r.status_code, r.headers)
            assert "send 'Authorization: Bearer TOKEN' (or 'X-Headlesnb-Token: TOKEN')" in r.json()['error'], r.text
            r = httpx.post(f'{probe[0]}?token={tok}', headers=probe[1], json=INIT, timeout=30)
            assert r.status_code == 401 and 'Authorization: Bearer TOKEN' in r.json()['error'], r.text
            for cookie in (f'headlesnb_mcp_token_{port}={tok}', f'headlesnb_token_{port}=x'):  # a cookie is nothing to it
                assert post({'Cookie': cookie}).status_code == 401
            assert post({'Authorization': f'Bearer {tok}'}).status_code == 200
            return
        assert r.status_code == 200 and r.headers['content-type'].startswith('text/html'), (r.status_code, r.text)
        name, _, rest = r.headers['set-cookie'].partition('=')
        value = rest.split(';')[0]
        assert tok not in r.headers['set-cookie'] and len(value) >= 32, r.headers['set-cookie']  # another port's server sees this, not the token
        assert 'HttpOnly' in r.headers['set-cookie'] and 'SameSite=Strict' in r.headers['set-cookie']
        secret = re.search(r'data-secret="([^"]+)"', r.text)[1]
        assert re.search(r'data-next="([^"]*)"', r.text)[1] == '/' and tok not in r.text and secret != value
        csp = r.headers['content-security-policy']
        assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "base-uri 'none'" in csp and "form-action 'none'" in csp, csp
        assert r.headers['cache-control'] == 'no-store' and r.headers['referrer-policy'] == 'no-referrer'
        jar = {'Cookie': f'{name}={value}'}
        r = post(jar)  # the cookie alone: another port's server replaying it
        assert r.status_code == 401 and "a cookie opens this server's pages only" in r.json()['error'], r.text
        assert httpx.get(f'{base}/', headers=jar, timeout=30).status_code == 200  # it opens pages
        assert httpx.get(f'{base}/agents/tree.json', headers=jar, timeout=30).status_code == 200
        assert post({**jar, 'X-Headlesnb-Token': secret}).status_code == 200  # what the page sends with its POSTs
        assert post({'X-Headlesnb-Token': value}).status_code == 401  # the cookie's value is not the page secret
        r = post({'Cookie': f'{name}={tok}'})  # the token itself is no cookie
        assert r.status_code == 401 and tok not in r.text, r.text
        r = httpx.post(f'{probe[0]}?token={tok}', timeout=30)  # nor is ?token= on a POST
        assert r.status_code == 401 and 'Authorization: Bearer TOKEN' in r.json()['error'], r.text
        r = httpx.get(f'{base}/?token={tok}', headers={'Cookie': f'{name}=from-an-earlier-run'}, timeout=30)
        assert r.status_code == 200 and 'set-cookie' in r.headers, (r.status_code, r.text)  # a cookie of an earlier run: a visit with ?token= mends it
    finally: stop(p)


def test_a_replayed_cookie_runs_no_code(tmp_path):
    """The audit's attack, end to end: another local server the browser visits gets serve's cookie (cookies ignore ports) and
    replays it from its own process, with any headers it likes, to make a dialog and run code in it. Refused: nothing runs"""
    tok = 'SRVTOKEN-' + os.urandom(8).hex()
    root = tmp_path / 'root'; root.mkdir()
    pwned = tmp_path / 'PWNED_BY_COOKIE'
    p, port = start('serve', root, '--token', tok)
    try:
        base = f'http://127.0.0.1:{port}'
        r = httpx.get(f'{base}/?token={tok}', follow_redirects=False, timeout=30)  # the user's first visit, in the browser
        cookie = r.headers['set-cookie'].split(';')[0]  # what the browser then sends to every port of 127.0.0.1
        with httpx.Client(base_url=base, headers={'Cookie': cookie}, timeout=30) as attacker:  # the other server, replaying it
            r1 = attacker.post('/create_dialog_', data={'name': 'pwn'})
            r2 = attacker.post('/add_relative_', data={'dlg_name': 'pwn', 'msg_type': 'code', 'placement': 'at_end', 'run': 'true',
                                                       'content': f'open({str(pwned)!r}, "w").write("ran")'})
            time.sleep(2)
            assert (r1.status_code, r2.status_code) == (401, 401), (r1.status_code, r1.text, r2.status_code, r2.text)
            assert not pwned.exists() and not list(root.glob('pwn*')), 'a replayed cookie ran code'
    finally: stop(p)


# ---------------------------------------------------------------- A3: the proxy's chunked bodies
def raw(port:int, data:bytes, wait:float=10.0) -> bytes:
    "Send `data` in one write, keeping the connection open; what the proxy answers within `wait` seconds (to its close)"
    with socket.create_connection(('127.0.0.1', port), timeout=wait) as s:
        s.sendall(data)  # (all of it: the proxy reads it into its buffer, so its close after refusing is no reset that loses the answer)
        answer = b''
        try:
            while (d := s.recv(65536)): answer += d
        except OSError: pass  # (no more within `wait`)
        return answer


def test_proxy_chunked_framing_is_capped(tmp_path):
    with FakeAnthropic() as fake:
        fake.add('ok')
        port = free_port()
        p = subprocess.Popen(CLI + ['proxy', '--root', str(tmp_path), '--port', str(port), '--upstream', fake.url], cwd=REPO, env=ENV,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert select.select([p.stderr], [], [], 60)[0] and 'headlesnb proxy: http://' in p.stderr.readline()
            head = b'POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' % port
            a = raw(port, head + b'-1\r\n' + b'x' * 1000)  # (it read to the end of the connection, unbounded: no answer while it stays open)
            assert a.startswith(b'HTTP/1.1 400 ') and b"a chunk size must be hex digits, not '-1'" in a, a[:300]
            a = raw(port, head + b'1;' + b'e' * 65600)  # a chunk-size line longer than any (it would be read whole, however long)
            assert a.startswith(b'HTTP/1.1 400 ') and b'a line of its chunked framing is over 65,536 bytes' in a, a[:300]
            a = raw(port, head + b'0\r\nX-Trailer: ' + b't' * 65600)  # a trailer line the same
            assert a.startswith(b'HTTP/1.1 400 ') and b'over 65,536 bytes' in a, a[:300]
            for bad in (b'+5\r\n', b'0x5\r\n', b'5 5\r\n', b'\r\n'):
                assert raw(port, head + bad + b'hello\r\n0\r\n\r\n').startswith(b'HTTP/1.1 400 '), bad
            a = raw(port, head + b'5000000\r\n' + b'x' * 1000)  # 80 MiB said: over the limit at once
            assert a.startswith(b'HTTP/1.1 413 '), a[:300]
            assert fake.requests == []  # none of them went on
            body = json.dumps(dict(model='m', max_tokens=5, messages=[dict(role='user', content='hi')])).encode()
            closing = head.replace(b'\r\n\r\n', b'\r\nConnection: close\r\n\r\n')
            a = raw(port, closing + b'%x;ext=1\r\n%s\r\n0\r\nX-T: 1\r\n\r\n' % (len(body), body))  # a well-formed one still goes through
            assert a.startswith(b'HTTP/1.1 200 ') and len(fake.requests) == 1, a[:300]
        finally:
            p.terminate(); p.communicate(timeout=20)


# ---------------------------------------------------------------- A6: a key in the query, in the request log
def test_proxy_log_masks_the_query(tmp_path):
    with FakeAnthropic() as fake:
        fake.add('ok')
        port, logs = free_port(), tmp_path / 'logs'
        p = subprocess.Popen(CLI + ['proxy', '--root', str(tmp_path), '--port', str(port), '--upstream', fake.url, '--log-requests', str(logs)],
                             cwd=REPO, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert select.select([p.stderr], [], [], 60)[0] and 'headlesnb proxy: http://' in p.stderr.readline()
            r = httpx.post(f'http://127.0.0.1:{port}/v1/messages?api_key=SECRETQUERY1&beta=on', timeout=30,
                           json=dict(model='m', max_tokens=5, messages=[dict(role='user', content='hi')]))
            assert r.status_code == 200, r.text
            assert fake.requests  # (forwarded with its query as sent: the log alone masks it)
        finally:
            p.terminate(); p.communicate(timeout=20)
        saved = [json.loads(f.read_text()) for f in logs.glob('*.json')]
        assert len(saved) == 1 and saved[0]['path'] == '/v1/messages?api_key=…&beta=…', saved
        assert 'SECRETQUERY1' not in json.dumps(saved, ensure_ascii=False)
