"""`headlesnb proxy` and `headlesnb setup --proxy` against the audit's cases (#1, #2, #4,
#6, #7, #11): bodies the proxy cannot add the workspace to are forwarded as they came and answered, never dropped;
a lone surrogate escape is forwarded with the workspace; credentials in --upstream are refused without being printed;
a client that stalls while sending its request is answered 408 (or closed) after the client timeout, while a slow
streamed answer is not cut; a bad --log-requests or setup --proxy port is one line. Every process is stopped by its PID.
"""
import http.server, json, os, re, select, signal, socket, subprocess, sys, threading, time
from pathlib import Path

import anthropic
import httpx
import pytest
from fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.timeout(180)
CLI = [sys.executable, '-m', 'headlesnb.fronts.cli']


def start_proxy(root, upstream, *extra):
    "`headlesnb proxy` on a free port: (process, url), from its start line on stderr"
    p = subprocess.Popen([*CLI, 'proxy', '--root', str(root), '--port', '0', '--upstream', upstream, *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline() if select.select([p.stderr], [], [], 60)[0] else ''
    if not (m := re.match(r'headlesnb proxy: (http://127\.0\.0\.1:\d+) ', line)):
        p.kill(); pytest.fail(f'proxy did not start: {line!r} {p.communicate()}')
    return p, m.group(1)


def stop(p) -> str:
    "Ctrl-C the proxy (by its PID); what it printed on stderr after its start line"
    p.send_signal(signal.SIGINT)
    out, errs = p.communicate(timeout=20)
    assert p.returncode == 130 and out == '', (p.returncode, out, errs)
    return errs


class Recorder(http.server.BaseHTTPRequestHandler):
    "An upstream that keeps each body as received (bytes) and answers as the API answers a body it cannot take"
    bodies = []
    def do_POST(self):
        self.bodies.append(self.rfile.read(int(self.headers['content-length'])))
        body = json.dumps(dict(type='error', error=dict(type='invalid_request_error', message='recorder: bad request'))).encode()
        self.send_response(400); self.send_header('content-type', 'application/json'); self.send_header('content-length', str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass


@pytest.fixture
def recorder():
    Recorder.bodies = []
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Recorder)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv, f'http://127.0.0.1:{srv.server_address[1]}'
    srv.shutdown(); srv.server_close()


def post_raw(url, body:bytes):
    "POST `body` as it is (no client-side JSON encoding); (status, answer) or (None, the error) when the connection was dropped"
    try: r = httpx.post(url + '/v1/messages', content=body, headers={'content-type': 'application/json'}, timeout=60)
    except httpx.HTTPError as e: return None, repr(e)
    return r.status_code, r.text


def test_bodies_it_cannot_change_are_forwarded_as_they_came(tmp_path, recorder):
    "#1: unhashable tool ids and nesting deeper than Python's decoder goes: the upstream gets the body unchanged and its answer reaches the client; the console stays quiet"
    _, up = recorder
    turn = lambda use_id, result_id: json.dumps(dict(model='m', max_tokens=10, messages=[
        dict(role='assistant', content=[dict(type='tool_use', id=use_id, name='a', input={})]),
        dict(role='user', content=[dict(type='tool_result', tool_use_id=result_id, content='r')])])).encode()
    deep = b'{"model":"m","messages":' + b'[' * 100_000 + b']' * 100_000 + b'}'
    bodies = [turn('x', ['x']), turn({'a': 1}, 'x'), turn(['x'], ['x']), deep]
    p, url = start_proxy(tmp_path, up)
    try:
        for body in bodies:
            status, text = post_raw(url, body)
            assert status == 400 and 'recorder: bad request' in text, (body[:80], status, text)
        assert Recorder.bodies == bodies
    finally: errs = stop(p)
    assert errs == '', errs


def test_lone_surrogate_is_forwarded_with_the_workspace(tmp_path):
    "#11: a lone surrogate escape (valid JSON, as Node writes half an emoji) goes upstream as the same string, with the workspace added"
    with FakeAnthropic(['ok']) as fake:
        p, url = start_proxy(tmp_path, fake.url)
        try:
            status, text = post_raw(url, b'{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"cut emoji \\ud83d here"}]}')
            assert status == 200, text
            got = fake.requests[-1]['messages'][0]['content']
            assert got[0] == dict(type='text', text='cut emoji \ud83d here') and '---WORKSPACE_STATUS' in got[1]['text']
        finally: errs = stop(p)
    assert errs == '', errs


def test_credentials_in_upstream_are_refused_unprinted(tmp_path):
    "#2: user:password in --upstream: one line saying so, exit 1, the password nowhere"
    for up in ('http://gwuser:gwPASSWORD123@127.0.0.1:1', 'https://svc:gwPASSWORD123@gateway.invalid/anthropic'):
        p = subprocess.Popen([*CLI, 'proxy', '--root', str(tmp_path), '--port', '0', '--upstream', up], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try: out, errs = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill(); out, errs = p.communicate()
            pytest.fail(f'the proxy started with credentials in --upstream: {errs!r}')
        assert p.returncode == 1 and errs.count('\n') == 1 and 'user name or password' in errs, errs
        assert 'gwPASSWORD123' not in out + errs and 'Traceback' not in errs


def test_stalled_client_is_timed_out_but_slow_streams_are_not(tmp_path):
    "#4: a client that stops mid-body gets a 408 and is closed, one that stops mid-head is closed; a stream with pauses longer than that timeout is whole"
    from headlesnb.fronts.proxy import serve
    with FakeAnthropic(['a slow answer'], delay=1.5) as fake:
        srv = serve(tmp_path, fake.url, client_timeout=1)
        port = int(srv.url.rsplit(':', 1)[1])
        try:
            for stalled, said in ((b'Content-Length: 100\r\n\r\n{}', b'HTTP/1.1 408 '), (b'Content-Length: 100\r\n', b'')):
                with socket.create_connection(('127.0.0.1', port), timeout=10) as s:
                    s.sendall(b'POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n' % port + stalled)
                    t = time.monotonic()
                    answer = b''
                    while (data := s.recv(4096)): answer += data  # (to the close)
                    assert answer.startswith(said) and (said or answer == b'') and time.monotonic() - t < 5, answer
            with anthropic.Anthropic(api_key='k', base_url=srv.url, max_retries=0) as c, \
                 c.messages.stream(model='m', max_tokens=10, messages=[dict(role='user', content='x')]) as st:
                assert st.get_final_text() == 'a slow answer'
        finally: srv.shutdown()


def test_log_requests_that_is_no_folder_is_one_line(tmp_path):
    "#7: --log-requests naming a file, or a folder that cannot be made: one line naming it, exit 1, no traceback"
    (tmp_path / 'afile').write_text('x')
    for where in (tmp_path / 'afile', Path('/proc/nope')):
        r = subprocess.run([*CLI, 'proxy', '--root', str(tmp_path), '--port', '0', '--log-requests', str(where)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and r.stderr.count('\n') == 1 and str(where) in r.stderr and 'give a folder' in r.stderr, r.stderr


def test_setup_proxy_port_out_of_range(tmp_path):
    "#6: setup --proxy 0 or 99999: refused like proxy --port, nothing written (neither the proxy's files nor the hooks)"
    root, home = tmp_path / 'proj', tmp_path / 'home'
    root.mkdir(); home.mkdir()
    env = dict(os.environ, HOME=str(home)); env.pop('CLAUDE_CONFIG_DIR', None)
    for port in ('0', '99999'):
        r = subprocess.run([*CLI, 'setup', '--project', str(root), '--proxy', port], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 1 and f'{port}: a port is a number from 1 to 65535' in r.stderr and r.stderr.count('\n') == 1, r
        assert not any(root.iterdir()) and not any(home.iterdir())
