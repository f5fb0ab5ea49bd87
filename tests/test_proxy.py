"""`headlesnb proxy` end to end: a real proxy process between real clients (the `anthropic` SDK, raw HTTP, and the
real Claude Code CLI) and the project's fake Messages API, with `headlesnb mcp` (a real process, driven by the
official MCP client or by Claude Code) changing the workspace.

Checked: what the MCP side does is in the proxy's very next upstream request and never in what the client
sees or keeps; closed tool results are one-line stubs in later requests; up to the client's last cache
breakpoint the upstream request is exactly what the client sent (and the fake's simulated cache is read);
streamed events reach the client unchanged, in order, as they come; upstream errors, a refused connection and
a connection dropped before or during an answer reach the client as the API's errors (the SDK raises); no key
in any log; Host/Origin/CORS refusals; the command line (one line to start, a busy port, Ctrl-C, a token off
loopback); `headlesnb setup --proxy`. Every process is stopped by its PID.
"""
import glob, json, os, re, select, shutil, signal, socket, subprocess, sys, threading, time
from contextlib import asynccontextmanager
from pathlib import Path

import anthropic
import anyio
import httpx
import pytest
from conftest import free_port
from fake_anthropic import FakeAnthropic
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

pytestmark = pytest.mark.timeout(300)

KEY = 'sk-ant-api03-TESTKEY-do-not-log-0123456789'
CC_VERSION = '2.1.332'
CC = Path(os.environ.get('HEADLESNB_CLAUDE_CODE') or Path.home() / f'.cache/headlesnb/claude-code-{CC_VERSION}/node_modules/.bin/claude')


# ---------------------------------------------------------------- helpers
def start_proxy(root, upstream, *extra, log=None):
    "`headlesnb proxy` as a subprocess on a free port: (process, url); its first line, on stderr as mcp's and serve's, gives the url"
    args = [sys.executable, '-m', 'headlesnb.fronts.cli', 'proxy', '--root', str(root), '--port', '0', '--upstream', upstream, *extra]
    if log: args += ['--log-requests', str(log)]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline() if select.select([p.stderr], [], [], 60)[0] else ''  # (a line elsewhere fails here, not at the test's timeout)
    m = re.fullmatch(r"headlesnb proxy: (http://127\.0\.0\.1:\d+) -> \S+, adding workspace '\w+' of \S+; start clients with ANTHROPIC_BASE_URL=\1\n", line)
    if not m:
        p.kill()
        out, errs = p.communicate()
        pytest.fail(f'proxy did not start: {line!r}; stdout {out!r}; stderr {errs!r}')
    return p, m.group(1)


@pytest.fixture
def fake():
    with FakeAnthropic() as f: yield f


@pytest.fixture
def proxy(tmp_path, fake):
    "A proxy on the workspace of tmp_path/root in front of `fake`, logging into tmp_path/logs; checks no key leaked"
    root = tmp_path / 'root'
    root.mkdir()
    p, url = start_proxy(root, fake.url, log=tmp_path / 'logs')
    yield dict(root=root, url=url, proc=p, logs=tmp_path / 'logs')
    p.send_signal(signal.SIGINT)
    out, errs = p.communicate(timeout=20)
    assert p.returncode == 130, (p.returncode, errs)
    assert KEY not in out + errs and 'TESTKEY' not in out + errs
    for f in (tmp_path / 'logs').glob('*.json'): assert 'TESTKEY' not in f.read_text(), f


def wait_for(cond, timeout=10.0) -> bool:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end: return False
        time.sleep(0.05)
    return True


def sdk(url, **kw): return anthropic.Anthropic(api_key=KEY, base_url=url, max_retries=0, **kw)


@asynccontextmanager
async def mcp_session(root, *extra):
    "The official MCP client on `headlesnb mcp --root root` (a subprocess over stdio)"
    params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(root), *extra], env=dict(os.environ))
    with open(os.devnull, 'w') as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


async def call(s, tool, **args) -> str:
    res = await s.call_tool(tool, args)
    text = '\n'.join(b.text for b in res.content if isinstance(b, TextContent))
    assert not res.is_error, f'{tool}({args}): {text}'
    return text


def blocks(content) -> list: return [dict(type='text', text=content)] if isinstance(content, str) else content


def cache_items(body) -> list:
    "The request as the API caches it, in order: tools, system blocks, then every message's blocks (with where they are)"
    items = [('tools', t) for t in body.get('tools') or []] + [('system', b) for b in blocks(body.get('system') or [])]
    for i, m in enumerate(body['messages']): items += [(f"{i}:{m['role']}", b) for b in blocks(m['content'])]
    return items


def assert_prefix_kept(sent, got):
    "Up to and including the client's last cache breakpoint, `got` (the upstream request) is exactly `sent`"
    a, b = cache_items(sent), cache_items(got)
    marks = [i for i, (_, blk) in enumerate(a) if 'cache_control' in blk]
    assert marks, 'the client set no breakpoint'
    assert b[:marks[-1] + 1] == a[:marks[-1] + 1]
    assert {k: v for k, v in got.items() if k not in ('messages',)} == {k: v for k, v in sent.items() if k not in ('messages',)}


def workspace_block(body) -> str:
    "The text of the block the proxy added (the last block of the request); fails if there is none or several"
    text = json.dumps(body)
    assert text.count('---WORKSPACE_STATUS\\n') == 1, 'the workspace is in the request once, at its end'
    last = body['messages'][-1]['content'][-1]
    assert last['type'] == 'text' and '---WORKSPACE_STATUS\n' in last['text']
    return last['text']


# ---------------------------------------------------------------- the anthropic SDK as the client
def test_workspace_from_mcp_in_next_request(proxy, fake):
    "A file window opened over MCP is in the next upstream request, at its end; closed, it is gone from the one after"
    root = proxy['root']
    (root / 'notes.txt').write_text('ALPHA-LINE\nsecond\n')
    fake.add('one', 'two', 'three')
    cl = sdk(proxy['url'])
    sent = dict(model='claude-x', max_tokens=100, system=[dict(type='text', text='Be brief. ' * 50, cache_control=dict(type='ephemeral'))],
                messages=[dict(role='user', content=[dict(type='text', text='hello ' * 300, cache_control=dict(type='ephemeral'))])])

    async def go():
        async with mcp_session(root) as s:
            r = cl.messages.create(**sent)
            assert r.content[0].text == 'one'
            assert 'ALPHA-LINE' not in workspace_block(fake.requests[0])
            assert (await call(s, 'file_windows', operation='open_range', file_path='notes.txt')) == 'opened f1: notes.txt lines 1-2 of 2'
            r = cl.messages.create(**sent)
            assert r.content[0].text == 'two' and 'ALPHA' not in r.model_dump_json()  # the client never sees it
            assert '1: ALPHA-LINE' in workspace_block(fake.requests[1])
            assert_prefix_kept(sent, fake.requests[1])
            assert r.usage.cache_read_input_tokens > 0 and r.usage.cache_creation_input_tokens == 0  # the changed workspace cost no cache write
            await call(s, 'file_windows', operation='close', window_id='f1')
            cl.messages.create(**sent)
            assert 'ALPHA-LINE' not in workspace_block(fake.requests[2])
    anyio.run(go)
    h = fake.headers[0]
    assert h.get('x-api-key') == KEY or h.get('authorization') == f'Bearer {KEY}'  # the key goes on, untouched, as the SDK sent it
    assert wait_for(lambda: len(list(proxy['logs'].glob('*.json'))) == 3)


def test_cache_prefix_kept_for_every_shape(proxy, fake):
    "Whatever the request's shape, everything up to its last breakpoint goes upstream as sent, and the workspace after it"
    fake.validate = False  # role "system" messages: a beta the fake does not know
    cc = dict(cache_control=dict(type='ephemeral'))
    tools = [dict(name='Read', description='read', input_schema=dict(type='object', properties={}), **cc)]
    shapes = [
        dict(messages=[dict(role='user', content=[dict(type='text', text='hi', **cc)])]),
        dict(system=[dict(type='text', text='a'), dict(type='text', text='b', **cc)], messages=[dict(role='user', content='plain string')], tools=tools),
        dict(messages=[dict(role='user', content='read it'), dict(role='assistant', content=[dict(type='tool_use', id='toolu_9', name='Read', input={})]),
                       dict(role='user', content=[dict(type='tool_result', tool_use_id='toolu_9', content='data', **cc)])], tools=tools),
        dict(system=[dict(type='text', text='s', **cc)], messages=[dict(role='user', content=[dict(type='text', text='u')]),
                                                                dict(role='system', content=[dict(type='text', text='reminder', **cc)])]),
        dict(messages=[dict(role='user', content=[dict(type='text', text='q', **cc)]), dict(role='assistant', content='{"a":')]),  # a prefill
    ]
    with httpx.Client() as c:
        for i, shape in enumerate(shapes):
            fake.add('ok')
            sent = dict(model='claude-x', max_tokens=50, **shape)
            r = c.post(proxy['url'] + '/v1/messages?beta=true', json=sent, headers={'x-api-key': KEY, 'anthropic-version': '2023-06-01'})
            assert r.status_code == 200, r.text
            got = fake.requests[-1]
            assert_prefix_kept(sent, got)
            added = [b for m in got['messages'] for b in blocks(m['content']) if '---WORKSPACE_STATUS' in b.get('text', '')]
            assert len(added) == 1, shape
            if i == 4: assert got['messages'][-1] == sent['messages'][-1] and got['messages'][0]['content'][-1] is not None  # the prefill is untouched
            else: assert got['messages'][:-1] == sent['messages'][:-1] and got['messages'][-1]['content'][-1] == added[0]


def test_closed_tool_results_and_notifications(proxy, fake):
    "A tool result closed over MCP by its tool_use id is a one-line stub in every later request, until reopened"
    root = proxy['root']
    fake.add('a', 'b', 'c')
    cl = sdk(proxy['url'])
    big = 'x' * 5000
    msgs = [dict(role='user', content='read both'),
            dict(role='assistant', content=[dict(type='tool_use', id='toolu_A', name='Read', input=dict(file_path='/w/a.py')),
                                            dict(type='tool_use', id='toolu_B', name='Bash', input=dict(command='make test'))]),
            dict(role='user', content=[dict(type='tool_result', tool_use_id='toolu_A', content=big),
                                       dict(type='tool_result', tool_use_id='toolu_B', content='failed', is_error=True)])]

    async def go():
        async with mcp_session(root) as s:
            cl.messages.create(model='m', max_tokens=10, messages=msgs)
            ws = workspace_block(fake.requests[-1])
            assert 'tool Read /w/a.py: ok' in ws and 'tool Bash make test: error' in ws  # the latest turn's tool calls
            assert fake.requests[-1]['messages'][2]['content'][0]['content'] == big
            assert (await call(s, 'tool_results', operation='close', ids='toolu_A')) == 'closed toolu_A: effective from your next request'
            cl.messages.create(model='m', max_tokens=10, messages=msgs)
            got = fake.requests[-1]['messages'][2]['content']
            assert got[0]['content'] == ('[tool result toolu_A (Read) closed: 5,000 characters, 1 lines; '
                                         'reopen it with the tool_results tool (operation reopen) if you need it again]')
            assert got[1]['content'] == 'failed'
            await call(s, 'tool_results', operation='reopen', ids='toolu_A')
            cl.messages.create(model='m', max_tokens=10, messages=msgs)
            assert fake.requests[-1]['messages'][2]['content'][0]['content'] == big
    anyio.run(go)


def test_stream_passes_unchanged_in_order(tmp_path):
    "The bytes of a stream through the proxy are the upstream's; events arrive as they are sent, not when it ends"
    usage = dict(input_tokens=5, output_tokens=3, cache_creation_input_tokens=0, cache_read_input_tokens=0)
    item = dict(text='Hello there, streaming world', thinking='hmm', tool_calls=[('Read', dict(file_path='a'))], usage=usage)
    body = dict(model='m', max_tokens=2000, stream=True, messages=[dict(role='user', content='hi')])
    with FakeAnthropic([item]) as direct, FakeAnthropic([item]) as up:
        with httpx.Client() as c:
            with c.stream('POST', direct.url + '/v1/messages', json=body) as r: want = r.read()
        p, url = start_proxy(tmp_path, up.url)
        try:
            with httpx.Client() as c:
                with c.stream('POST', url + '/v1/messages', json=body) as r:
                    assert r.headers['content-type'] == 'text/event-stream'
                    got = r.read()
            assert got == want and got.count(b'event: ') == 19  # thinking, text and tool_use blocks, each in pieces
            up.delay = 0.4  # now watch the events come one by one
            up.add('one two three')
            seen = []
            with anthropic.Anthropic(api_key=KEY, base_url=url, max_retries=0) as cl:
                t = time.monotonic()
                with cl.messages.stream(model='m', max_tokens=10, messages=[dict(role='user', content='x')]) as st:
                    for ev in st: seen.append((ev.type, time.monotonic() - t))
            assert [e for e, _ in seen][:2] == ['message_start', 'content_block_start'] and seen[-1][0] == 'message_stop'
            assert seen[-1][1] - seen[0][1] > 1.5  # spread over the upstream's delays: passed on as they came
        finally: p.kill(); p.wait()


def test_errors_reach_the_client(proxy, fake):
    "Upstream errors come back as given; a broken stream ends with an error event; the SDK raises each"
    cl = sdk(proxy['url'])
    fake.add(FakeAnthropic.error(529), FakeAnthropic.error(400, 'messages: bad thing', 'invalid_request_error'),
             {'stream_error': {'type': 'overloaded_error', 'message': 'Overloaded'}, 'text': 'partial'})
    msg = dict(model='m', max_tokens=10, messages=[dict(role='user', content='x')])
    with pytest.raises(anthropic.APIStatusError) as e: cl.messages.create(**msg)
    assert e.value.status_code == 529 and e.value.body['error']['type'] == 'overloaded_error'
    with pytest.raises(anthropic.BadRequestError, match='messages: bad thing'): cl.messages.create(**msg)
    with pytest.raises(anthropic.APIStatusError, match='Overloaded'):
        with cl.messages.stream(**msg) as st:
            for _ in st: pass


def serve_raw(answer):
    "A one-shot upstream on a free port that reads a request and writes `answer` (bytes), then drops the connection"
    srv = socket.create_server(('127.0.0.1', 0))
    def go():
        while True:
            try: conn, _ = srv.accept()
            except OSError: return
            with conn:
                conn.recv(1 << 20)
                if answer: conn.sendall(answer); time.sleep(0.2)
    threading.Thread(target=go, daemon=True).start()
    return srv, f'http://127.0.0.1:{srv.getsockname()[1]}'


def test_dropped_and_refused_upstreams(tmp_path):
    "No upstream, one that hangs up before answering, and one that hangs up mid-stream: each is an API error the SDK raises"
    msg = dict(model='m', max_tokens=10, messages=[dict(role='user', content='x')])
    port = free_port()  # nothing listens there
    head = b'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n'
    ev = b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
    mid, mid_url = serve_raw(head + b'%x\r\n%s\r\n' % (len(ev), ev))
    before, before_url = serve_raw(b'')
    try:
        for upstream, what in ((f'http://127.0.0.1:{port}', 'cannot reach the upstream'), (before_url, 'cannot reach the upstream')):
            p, url = start_proxy(tmp_path, upstream)
            try:
                with pytest.raises(anthropic.InternalServerError, match=what) as e: sdk(url).messages.create(**msg)
                assert e.value.status_code == 502 and e.value.body['error']['type'] == 'api_error'
            finally: p.kill(); p.wait()
        p, url = start_proxy(tmp_path, mid_url)
        try:
            types = []
            with pytest.raises(anthropic.APIStatusError, match='dropped the connection mid-stream'):
                with sdk(url).messages.stream(**msg) as st:
                    for ev in st: types.append(ev.type)
            assert types == ['message_start']  # what came before the drop was passed on
        finally: p.kill(); p.wait()
    finally: mid.close(); before.close()


def test_upstream_connections(tmp_path):
    "A kept-open upstream connection the upstream closed while idle is not reused; an answer given before the whole body was read is passed on"
    ok = b'{"input_tokens":3}'
    ans = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s' % (len(ok), ok)  # keep-alive, then dropped
    err = b'{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}'
    early = b'HTTP/1.1 413 Request Entity Too Large\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s' % (len(err), err)
    (srv, up), (srv2, up2) = serve_raw(ans), serve_raw(early)
    try:
        p, url = start_proxy(tmp_path, up)
        try:
            for _ in range(3):
                r = httpx.post(url + '/v1/messages/count_tokens', json=dict(model='m', messages=[]))
                assert r.status_code == 200 and r.json() == {'input_tokens': 3}, r.text
                time.sleep(0.5)  # the upstream has closed that connection meanwhile
        finally: p.kill(); p.wait()
        p, url = start_proxy(tmp_path, up2)
        try:
            r = httpx.post(url + '/v1/messages/count_tokens', content=b'x' * (32 << 20), timeout=60)
            assert r.status_code == 413 and r.json()['error']['type'] == 'request_too_large', r.text
        finally: p.kill(); p.wait()
    finally: srv.close(); srv2.close()


@pytest.mark.skipif(not shutil.which('openssl'), reason='needs the openssl command to make a certificate')
def test_tls_upstream(tmp_path, monkeypatch):
    "An https upstream: its certificate is checked (against SSL_CERT_FILE when set, else certifi's), the answer passed on"
    import ssl
    cert, key = tmp_path / 'cert.pem', tmp_path / 'key.pem'
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', str(key), '-out', str(cert), '-days', '2',
                    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv = socket.create_server(('127.0.0.1', 0))
    ok = b'{"input_tokens":5}'
    def go():
        while True:
            try: conn, _ = srv.accept()
            except OSError: return
            try:
                with ctx.wrap_socket(conn, server_side=True) as c:
                    c.recv(1 << 16)
                    c.sendall(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s' % (len(ok), ok))
                    time.sleep(0.2)
            except (OSError, ssl.SSLError): pass  # the proxy that refused the certificate hung up
    threading.Thread(target=go, daemon=True).start()
    up = f'https://127.0.0.1:{srv.getsockname()[1]}'
    try:
        p, url = start_proxy(tmp_path, up)  # certifi's authorities: a self-signed certificate is refused
        try:
            r = httpx.post(url + '/v1/messages/count_tokens', json=dict(model='m', messages=[]))
            assert r.status_code == 502 and 'CERTIFICATE_VERIFY_FAILED' in r.json()['error']['message'], r.text
        finally: p.kill(); p.wait()
        monkeypatch.setenv('SSL_CERT_FILE', str(cert))
        p, url = start_proxy(tmp_path, up)
        try:
            r = httpx.post(url + '/v1/messages/count_tokens', json=dict(model='m', messages=[]))
            assert r.status_code == 200 and r.json() == {'input_tokens': 5}, r.text
        finally: p.kill(); p.wait()
    finally: srv.close()


def test_other_paths_and_keys(proxy, fake):
    "count_tokens and other paths go on unchanged, with both kinds of key; the logs hold no key"
    fake.count_tokens = 42
    cl = sdk(proxy['url'])
    assert cl.messages.count_tokens(model='m', messages=[dict(role='user', content='hi')]).input_tokens == 42
    assert fake.count_requests[-1] == dict(model='m', messages=[dict(role='user', content='hi')])  # no workspace added there
    fake.add('hi')
    bearer = anthropic.Anthropic(auth_token=KEY, base_url=proxy['url'], max_retries=0)
    assert bearer.messages.create(model='m', max_tokens=5, messages=[dict(role='user', content='x ' + KEY)]).content[0].text == 'hi'
    assert fake.headers[-1]['authorization'] == f'Bearer {KEY}'
    assert KEY in json.dumps(fake.requests[-1])  # the body goes on as sent ...
    assert wait_for(lambda: len(list(proxy['logs'].glob('*.json'))) == 2)  # (written once the answer is sent)
    logged = [json.loads(f.read_text()) for f in sorted(proxy['logs'].glob('*.json'))]
    assert logged[1]['headers']['authorization'] == '[redacted]' and '[redacted]' in logged[1]['request']
    # ... and the fixture checks that no log file and no output of the proxy holds the key


def test_refuses_foreign_pages(proxy):
    "Another Host (DNS rebinding), a web page's Origin, a CORS preflight: refused, nothing forwarded"
    with httpx.Client() as c:
        u = proxy['url'] + '/v1/messages'
        r = c.post(u, json={}, headers={'host': 'attacker.example:80'})
        assert r.status_code == 421 and r.json()['type'] == 'error'
        r = c.post(u, json={}, headers={'origin': 'https://attacker.example'})
        assert r.status_code == 403
        r = c.options(u, headers={'origin': 'https://attacker.example', 'access-control-request-method': 'POST'})
        assert r.status_code in (403, 405) and not any(k.startswith('access-control-') for k in r.headers)
    port = int(proxy['url'].rsplit(':', 1)[1])
    for target in (b'@attacker.example/v1/messages', b'http://attacker.example/v1/messages'):  # not a forward proxy
        with socket.create_connection(('127.0.0.1', port)) as s:
            s.sendall(b'GET ' + target + b' HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 0\r\n\r\n' % port)
            assert s.recv(100).startswith(b'HTTP/1.1 400 ')
    with socket.create_connection(('127.0.0.1', port)) as s:  # a folded header line: refused, not passed on as two
        s.sendall(b'POST /v1/messages/count_tokens HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Note: a\r\n b\r\nContent-Length: 0\r\n\r\n' % port)
        assert s.recv(200).startswith(b'HTTP/1.1 400 ')


def test_command_line(tmp_path, fake):
    "A busy port and a non-loopback address without a token are one line; a bad option is argparse's exit 2; with a token, requests must carry it"
    p, url = start_proxy(tmp_path, fake.url)
    try:
        port = url.rsplit(':', 1)[1]
        r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'proxy', '--root', str(tmp_path), '--port', port], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and r.stderr.strip().count('\n') == 0 and 'already in use' in r.stderr
    finally: p.kill(); p.wait()
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'proxy', '--root', str(tmp_path), '--host', '0.0.0.0', '--port', '0'], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and 'without a token' in r.stderr and r.stderr.strip().count('\n') == 0
    # `--token "$SECRET"` with SECRET unset: refused, as serve and mcp refuse it (the proxy took it as no token, and served)
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'proxy', '--root', str(tmp_path), '--port', '0', '--token', ''], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.strip() == 'headlesnb proxy: --token is empty (an unset variable?): give the token, or leave --token out', r.stderr
    for bad, said in ((['--root', str(tmp_path / 'nope')], f"argument --root: {str(tmp_path / 'nope')!r} is not a folder"),  # (options: argparse's exit 2)
                      (['--workspace', '../x'], "argument --workspace: invalid workspace name '../x'"),
                      (['--timeout', '-5'], "argument --timeout: '-5': must be a number of seconds more than 0"),
                      (['--port', '99999'], 'argument --port: 99999: a port is a number from 1 to 65535')):  # (it bound 99999 mod 65536)
        r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'proxy', '--root', str(tmp_path), '--port', '0', *bad], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and said in r.stderr, r.stderr
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', '--help'], capture_output=True, text=True, timeout=60)
    assert 'proxy' in r.stdout
    p, url = start_proxy(tmp_path, fake.url, '--token', 's3cret-token')
    try:
        fake.add('ok')
        assert httpx.post(url + '/v1/messages', json={}).status_code == 401
        r = httpx.post(url + '/v1/messages', json=dict(model='m', max_tokens=5, messages=[dict(role='user', content='x')]),
                       headers={'x-headlesnb-token': 's3cret-token'})
        assert r.status_code == 200 and 'x-headlesnb-token' not in fake.headers[-1]
    finally: p.kill(); p.wait()


def test_start_line_on_stderr(tmp_path, fake):
    "The start line is a status line, on stderr as `headlesnb mcp`'s and `serve`'s: stdout carries nothing"
    p, url = start_proxy(tmp_path, fake.url)  # (it reads the line from stderr)
    p.send_signal(signal.SIGINT)
    out, errs = p.communicate(timeout=20)
    assert p.returncode == 130 and out == '', (p.returncode, out, errs)


def test_mcp_workspace_name_and_shell(tmp_path, fake):
    "`--workspace NAME` on both sides selects another workspace; the shell tool is offered only with --shell, its output in a window"
    root = tmp_path / 'r'
    root.mkdir()
    p, url = start_proxy(root, fake.url, '--workspace', 'team')
    fake.add('ok')

    async def go():
        async with mcp_session(root) as s:
            assert 'shell' not in {t.name for t in (await s.list_tools()).tools}
        async with mcp_session(root, '--workspace', 'team', '--shell') as s:
            assert 'shell' in {t.name for t in (await s.list_tools()).tools}
            assert (await call(s, 'shell', command='echo SHELL-OUT')).startswith('t1: exit 0, 2 lines of output')
    try:
        anyio.run(go)
        assert (root / 'team.workspace.json').exists() and not (root / 'default.workspace.json').exists()
        sdk(url).messages.create(model='m', max_tokens=5, messages=[dict(role='user', content='x')])
        assert 'SHELL-OUT' in workspace_block(fake.requests[-1])
    finally: p.kill(); p.wait()


def test_setup_proxy(tmp_path):
    "`headlesnb setup --proxy` writes the base URL and the MCP server for the root, merged, idempotent, and says how to start"
    root, home = tmp_path / 'proj', tmp_path / 'home'
    root.mkdir(); home.mkdir()
    (root / '.claude').mkdir()
    (root / '.claude' / 'settings.local.json').write_text(json.dumps(dict(permissions=dict(allow=['Read']))))
    env = dict(os.environ, HOME=str(home))
    env.pop('CLAUDE_CONFIG_DIR', None)
    cmd = [sys.executable, '-m', 'headlesnb.fronts.cli', 'setup', '--project', str(root), '--proxy', '8799']
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f'headlesnb proxy --root {root} --port 8799' in r.stdout
    s = json.loads((root / '.claude' / 'settings.local.json').read_text())
    assert s == dict(permissions=dict(allow=['Read']), env=dict(ANTHROPIC_BASE_URL='http://127.0.0.1:8799'), enabledMcpjsonServers=['headlesnb'])
    assert json.loads((root / '.mcp.json').read_text())['mcpServers']['headlesnb']['args'] == ['mcp', '--root', str(root)]
    before = {p: p.read_text() for p in (root / '.claude' / 'settings.local.json', root / '.mcp.json')}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and 'proxy: already set up' in r.stdout
    assert before == {p: p.read_text() for p in before}


def test_setup_proxy_does_not_enable_a_cloned_repositorys_server(tmp_path):
    """A project (a cloned repository) whose .mcp.json already names a server 'headlesnb' that setup did not write: setup refuses
    (exit 1, saying what the entry runs) and writes nothing, neither the approval nor the hooks (Claude Code would run it unasked)"""
    root, home = tmp_path / 'proj', tmp_path / 'home'
    root.mkdir(); home.mkdir()
    evil = {'mcpServers': {'headlesnb': {'command': 'sh', 'args': ['-c', f'touch {tmp_path}/PWNED; exec headlesnb mcp']}}}
    (root / '.mcp.json').write_text(json.dumps(evil))
    env = dict(os.environ, HOME=str(home)); env.pop('CLAUDE_CONFIG_DIR', None)
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'setup', '--project', str(root), '--proxy', '8799'],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1 and "already has an MCP server named 'headlesnb' that setup did not write" in r.stderr, r
    assert sorted(p.name for p in root.iterdir()) == ['.mcp.json'] and json.loads((root / '.mcp.json').read_text()) == evil
    assert not any(home.iterdir())  # (no hooks installed either)


# ---------------------------------------------------------------- the real Claude Code CLI as the client
@pytest.mark.skipif(os.environ.get('HEADLESNB_NO_CLAUDE_CODE') == '1', reason='HEADLESNB_NO_CLAUDE_CODE=1')
def test_claude_code_through_the_proxy(tmp_path):
    """Claude Code reads a file, opens a file window over MCP, then closes its Read result by tool_use id: the window
    is in the next request and never in its transcript; the closed result is a stub; its cache prefixes hold"""
    assert CC.exists(), f'Claude Code {CC_VERSION} is not installed at {CC}: run tests/setup.sh (or set HEADLESNB_NO_CLAUDE_CODE=1 to skip)'
    root, home = tmp_path / 'root', tmp_path / 'home'
    root.mkdir(); home.mkdir()
    (root / 'notes.txt').write_text('MARKER-LINE-ONE\nsecond line\n')
    results = lambda body: [b for m in body['messages'] if isinstance(m['content'], list) for b in m['content'] if b.get('type') == 'tool_result']

    def reply(body):
        if not body.get('tools'): return 'ok'  # a side request (a title, a check)
        n = len(results(body))
        if n == 0: return {'tool_calls': [('Read', {'file_path': str(root / 'notes.txt')}, 'toolu_read1')]}
        if n == 1: return {'tool_calls': [('mcp__headlesnb__file_windows', {'operation': 'open_range', 'file_path': 'notes.txt'}, 'toolu_fw1')]}
        if n == 2: return {'tool_calls': [('mcp__headlesnb__tool_results', {'operation': 'close', 'ids': 'toolu_read1'}, 'toolu_tr1')]}
        return 'all done'
    cfg = home / 'mcp.json'
    cfg.write_text(json.dumps({'mcpServers': {'headlesnb': {'command': sys.executable, 'args': ['-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(root)]}}}))
    with FakeAnthropic([reply] * 12, validate=False) as fake:
        p, url = start_proxy(root, fake.url, log=tmp_path / 'logs')
        try:
            env = dict(os.environ, HOME=str(home), ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=KEY,
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC='1', DISABLE_TELEMETRY='1', DISABLE_AUTOUPDATER='1',
                       MCP_CONNECTION_NONBLOCKING='0', MCP_CONNECT_TIMEOUT_MS='60000',
                       # the proxy's user, whose key marks the workspace state both write (only Claude Code's HOME is its own)
                       XDG_CONFIG_HOME=os.environ.get('XDG_CONFIG_HOME') or str(Path.home() / '.config'))
            env.pop('CLAUDE_CONFIG_DIR', None)
            r = subprocess.run([str(CC), '-p', 'read notes.txt', '--output-format', 'json', '--mcp-config', str(cfg), '--strict-mcp-config',
                                '--allowedTools', 'mcp__headlesnb', 'Read'], env=env, cwd=root, capture_output=True, text=True, timeout=240)
        finally:
            p.send_signal(signal.SIGINT)
            out, errs = p.communicate(timeout=20)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)['result'] == 'all done'
        reqs = [b for b in fake.requests if b.get('tools')]
    assert len(reqs) == 4
    for b in reqs: workspace_block(b)  # every request: the workspace once, at its end
    assert 'MARKER-LINE-ONE' not in workspace_block(reqs[1])
    assert '1: MARKER-LINE-ONE' in workspace_block(reqs[2]) and '1: MARKER-LINE-ONE' in workspace_block(reqs[3])  # the MCP call's window, next request
    assert 'tool mcp__headlesnb__file_windows notes.txt: ok' in workspace_block(reqs[2])
    read = lambda b: next(x for x in results(b) if x['tool_use_id'] == 'toolu_read1')['content']
    assert 'MARKER-LINE-ONE' in json.dumps(read(reqs[2]))
    assert read(reqs[3]).startswith('[tool result toolu_read1 (Read) closed: ')
    # the client's own history holds no workspace: its next request carries only the newly added block
    for prev, nxt in zip(reqs, reqs[1:]):
        assert workspace_block(prev) not in json.dumps(nxt)
    transcripts = glob.glob(str(home / '.claude' / 'projects' / '**' / '*.jsonl'), recursive=True)
    assert transcripts and not any('WORKSPACE_STATUS' in Path(t).read_text() for t in transcripts)
    # caching held: each request reads the prefix the one before wrote, in the fake's simulation of the API's cache
    # (after the Read result was closed, from the stub on the prefix is written anew, once)
    sim = FakeAnthropic()
    usage = [sim._usage(b, [dict(type='text', text='x')], {}) for b in reqs]
    assert usage[0]['cache_read_input_tokens'] == 0 and all(u['cache_read_input_tokens'] > 10_000 for u in usage[1:]), usage
    assert all(u['cache_creation_input_tokens'] < 1_000 for u in usage[1:3]), usage
    assert KEY not in out + errs and not any(KEY in f.read_text() for f in (tmp_path / 'logs').glob('*.json'))


def claude_p(url, home, cwd, *args, **env_extra):
    "Claude Code run headless (`-p`) against `url`; its JSON result"
    env = dict(os.environ, HOME=str(home), ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=KEY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC='1',
               DISABLE_TELEMETRY='1', DISABLE_AUTOUPDATER='1', **env_extra)
    env.pop('CLAUDE_CODE_CONFIG_DIR', None); env.pop('CLAUDE_CONFIG_DIR', None)
    r = subprocess.run([str(CC), '-p', 'hi', '--output-format', 'json', *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=240)
    return json.loads(r.stdout)


@pytest.mark.skipif(os.environ.get('HEADLESNB_NO_CLAUDE_CODE') == '1', reason='HEADLESNB_NO_CLAUDE_CODE=1')
def test_claude_code_sees_api_errors(tmp_path):
    "Through the proxy, Claude Code reports the upstream's error, a refused upstream and a stream broken midway as API errors"
    assert CC.exists(), f'Claude Code {CC_VERSION} is not installed at {CC}: run tests/setup.sh (or set HEADLESNB_NO_CLAUDE_CODE=1 to skip)'
    head = b'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n'
    ev = b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
    mid, mid_url = serve_raw(head + b'%x\r\n%s\r\n' % (len(ev), ev))
    try:
        with FakeAnthropic([FakeAnthropic.error(400, 'messages.0: UNIQUE-ERROR-TEXT', 'invalid_request_error')] * 20, validate=False) as fake:
            for upstream, want in ((fake.url, 'API Error: 400 messages.0: UNIQUE-ERROR-TEXT'),
                                   (f'http://127.0.0.1:{free_port()}', 'API Error: 502 headlesnb proxy: cannot reach the upstream'),
                                   (mid_url, 'API Error: ')):  # (Claude Code words a stream's error event itself)
                p, url = start_proxy(tmp_path, upstream)
                try: res = claude_p(url, tmp_path, tmp_path, CLAUDE_CODE_MAX_RETRIES='0')
                finally: p.kill(); p.wait()
                assert res['is_error'] and res['terminal_reason'] == 'api_error' and want in res['result'], res
    finally: mid.close()
