"""`headlesnb mcp` as an audit found it wanting, through a real server subprocess and the official MCP client.

- Over HTTP one rule (ours, `Guard`) decides which Hosts are accepted: `--allow-host NAME` and `*` let `/mcp` through, and a
  server bound to another loopback address (127.0.0.2) takes requests to it; the SDK's own check no longer refuses them.
  A 421 names an address the server answers on (`headlesnb serve --host ::1`: `http://[::1]:PORT`, not 127.0.0.1).
- `/mcp`'s refusals are the ones SECURITY.md promises: a text/plain or form POST is a 415, a body over the limit (even sent
  without a length) a 413, each as JSON `{"error": ...}` with a line in the server's log.
- Over stdio: a cut output names a resource that resolves for a notebook in a subfolder, a cut `execute_code` output can be
  read on (`read_output(run_id=...)`), answers name the cell's index and the notebook an interrupt looked at, bytes that are
  not the image they claim are not sent as an image, and `--notebook missing.ipynb` says what to do on the command line.
Servers are real subprocesses, stopped by PID at the end of each test (conftest's reaper).
"""
import base64, json, os, re, select, subprocess, sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio, httpx, pytest
from conftest import free_port
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)}
ENV.pop('JUPYTER_URL', None)
INIT = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
        'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'audit', 'version': '1'}}}
ACCEPT = {'Accept': 'application/json, text/event-stream'}

def http_server(root, host:str, *extra, command=('mcp', '--transport', 'http'), probe='/api/healthz'):
    "A `headlesnb mcp --transport http` (or `command`) on `host`, listening: (process, port)"
    port = free_port()
    p = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', *command, '--host', host, '--port', str(port),
                          '--root', str(root), *extra], env=ENV, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}{probe}"
    for _ in range(600):
        assert p.poll() is None, f'the server exited ({p.returncode}): {p.stderr.read()}'
        try:
            httpx.get(url, timeout=1)
            return p, port
        except httpx.TransportError: anyio.run(anyio.sleep, 0.1)
    raise AssertionError(f'nothing answers on {host}:{port}')

def stop(p) -> str:
    "Stop server `p` (by its PID) and return what it logged"
    p.terminate()
    try: return p.communicate(timeout=20)[1]
    except subprocess.TimeoutExpired: p.kill(); return p.communicate()[1]

@pytest.mark.parametrize('allow', ['myhost.test', '*'])
def test_allow_host_lets_mcp_through(tmp_path, allow):
    "'*' (any Host: a DNS-rebinding page is same-origin) needs a token"
    token = ['--token', 'tok'] if allow == '*' else []
    p, port = http_server(tmp_path, '127.0.0.1', '--allow-host', allow, *token)
    auth = {'Authorization': 'Bearer tok'} if token else {}
    r = httpx.post(f'http://127.0.0.1:{port}/mcp', json=INIT, headers={**ACCEPT, **auth, 'Host': f'myhost.test:{port}'}, timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    r = httpx.post(f'http://127.0.0.1:{port}/mcp', json=INIT, headers={**ACCEPT, **auth, 'Host': f'other.test:{port}'}, timeout=30)
    assert r.status_code == (200 if allow == '*' else 421), (r.status_code, r.text)
    if allow != '*': assert r.headers['content-type'] == 'application/json' and 'not this server' in r.json()['error']
    stop(p)

def test_a_server_bound_to_another_loopback_address_takes_requests_to_it(tmp_path):
    p, port = http_server(tmp_path, '127.0.0.2', '--token', 'tok')
    r = httpx.post(f'http://127.0.0.2:{port}/mcp', json=INIT, headers={**ACCEPT, 'Authorization': 'Bearer tok'}, timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    r = httpx.post(f'http://127.0.0.2:{port}/mcp', json=INIT, headers={**ACCEPT, 'Authorization': 'Bearer tok', 'Host': f'evil.test:{port}'}, timeout=30)
    assert r.status_code == 421 and f'use http://127.0.0.2:{port}' in r.json()['error'], r.text
    stop(p)

def test_serve_bound_to_ipv6_loopback_names_it_in_a_421(tmp_path):
    p, port = http_server(tmp_path, '::1', command=('serve',), probe='/')
    r = httpx.get(f'http://[::1]:{port}/', headers={'Host': f'evil.test:{port}'}, timeout=30)
    assert r.status_code == 421 and f'use http://[::1]:{port} ' in r.json()['error'], r.text
    assert httpx.get(f'http://[::1]:{port}/', timeout=30).status_code == 200
    stop(p)

def test_mcp_refusals_are_json_with_a_log_line(tmp_path):
    p, port = http_server(tmp_path, '127.0.0.1')
    url = f'http://127.0.0.1:{port}/mcp'
    for ct in ('text/plain', 'application/x-www-form-urlencoded'):
        r = httpx.post(url, content=json.dumps(INIT), headers={**ACCEPT, 'Content-Type': ct}, timeout=30)
        assert (r.status_code, r.headers['content-type']) == (415, 'application/json'), (r.status_code, r.text)
        assert 'application/json' in r.json()['error']
    def chunks():  # 34 MB without a Content-Length: cut off at the 32 MiB limit
        for _ in range(34): yield b' ' * 1_000_000
    try:
        r = httpx.post(url, content=chunks(), headers={**ACCEPT, 'Content-Type': 'application/json'}, timeout=60)
        assert (r.status_code, r.headers['content-type']) == (413, 'application/json'), (r.status_code, r.text)
        assert 'limit' in r.json()['error']
    except httpx.WriteError: pass  # the server answered and closed before the client finished sending: the log says which
    r = httpx.post(url, content=b' ' * 5_000_000, headers={**ACCEPT, 'Content-Type': 'application/json'}, timeout=60)
    assert r.status_code != 413, r.text  # under our 32 MB limit: not the SDK's 4 MB one (a body of spaces is bad JSON, a 400)
    log = stop(p)
    assert log.count('(415)') == 2 and '(413)' in log, log

def test_a_missing_notebook_on_the_command_line_says_what_to_do_there(tmp_path):
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(tmp_path), '--notebook', 'missing.ipynb'],
                       env=ENV, text=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 1 and r.stderr.count('\n') == 1, r.stderr
    assert r.stderr.startswith('headlesnb mcp: --notebook missing.ipynb: there is no such notebook under ') and "mode='create' to make it" not in r.stderr, r.stderr

@asynccontextmanager
async def stdio_session(root):
    "The official MCP client over stdio to `headlesnb mcp --root ROOT`"
    params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.cli', 'mcp', '--root', str(root)], env=ENV)
    with open(root / 'mcp.log', 'w') as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s

def text(res) -> str: return '\n'.join(c.text for c in res.content if c.type == 'text')

def test_what_a_cut_names_resolves_over_stdio(tmp_path):
    "The resource a cut names for a notebook in a folder, and read_output(run_id=...) for execute_code's output, as a client sends them"
    async def main():
        async with stdio_session(tmp_path) as s:
            await s.call_tool('use_notebook', dict(notebook_name='sub/x', mode='create'))
            await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source='print("x" * 30000)'))
            uri = re.search(r'the resource (\S+) holds it whole', text(await s.call_tool('read_cell', dict(cell_index=0))))[1]
            for u in (uri, uri.replace('%2F', '/')):
                assert (await s.read_resource(u)).contents[0].text == 'x' * 30000 + '\n', u
            r = await s.call_tool('execute_code', dict(code='print("q" * 40000)'))
            call = re.search(r"read_output\(run_id='(run-\w+)', output_index=0, offset=(\d+)\)", text(r))
            assert call, text(r)
            page = text(await s.call_tool('read_output', dict(run_id=call[1], output_index=0, offset=int(call[2]))))
            at = int(call[2])
            assert page.split('\n', 1)[1] == ('q' * 40000 + '\n')[at:at + 20_000], page[:300]  # a page: one answer's worth (text_limit)
    anyio.run(main)


def test_half_an_emoji_in_a_stdio_call_is_answered(tmp_path):
    """A lone surrogate escape (`\\ud83d`, as Node's JSON writes half an emoji) is valid JSON that the SDK's parser refused: the call
    was never answered and its client waited for ever. It is answered, the half character stored as U+FFFD"""
    p = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.mcp', '--root', str(tmp_path)], env=ENV, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    def call(id_, method, **params):
        p.stdin.write(json.dumps({'jsonrpc': '2.0', 'id': id_, 'method': method, 'params': params}) + '\n'); p.stdin.flush()
        assert select.select([p.stdout], [], [], 60)[0], f'no answer to {method} (id {id_}) in 60 s'
        return json.loads(p.stdout.readline())
    try:
        assert call(1, 'initialize', **INIT['params'])['id'] == 1
        p.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        call(2, 'tools/call', name='use_notebook', arguments={'notebook_name': 'n', 'mode': 'create'})
        # json.dumps writes the lone surrogate as the escape `\ud83d`, as Node does
        r = call(3, 'tools/call', name='insert_cell', arguments={'cell_index': 0, 'cell_type': 'markdown', 'cell_source': 'half \ud83d emoji'})
        assert r['id'] == 3 and not r['result']['isError'], r
        assert ''.join(json.loads((tmp_path / 'n.ipynb').read_text())['cells'][0]['source']) == 'half \ufffd emoji'
    finally:
        p.kill(); p.wait()


def test_half_an_emoji_in_an_http_call_is_answered(tmp_path):
    "The same over HTTP: the SDK answered a lone surrogate escape with a parse error (-32700); it is answered as over stdio"
    p, port = http_server(tmp_path, '127.0.0.1')
    url = f'http://127.0.0.1:{port}/mcp'
    hdr = {'Accept': 'application/json, text/event-stream', 'Content-Type': 'application/json'}
    def post(hc, body:bytes, sid=None) -> dict|None:
        r = hc.post(url, content=body, headers={**hdr, **({'mcp-session-id': sid} if sid else {})})
        assert r.status_code in (200, 202), (r.status_code, r.text)
        data = [l[5:] for l in r.text.splitlines() if l.startswith('data:') and l[5:].strip()] if 'event-stream' in r.headers.get('content-type', '') else [r.text]
        return (json.loads(data[-1]), r.headers.get('mcp-session-id')) if data and data[-1].strip() else (None, None)
    with httpx.Client(timeout=60) as hc:
        (init, sid) = post(hc, json.dumps(INIT).encode())
        assert init['id'] == INIT['id'] and sid, init
        post(hc, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', sid)
        r, _ = post(hc, json.dumps({'jsonrpc': '2.0', 'id': 2, 'method': 'tools/call', 'params': {'name': 'use_notebook', 'arguments': {'notebook_name': 'n', 'mode': 'create'}}}).encode(), sid)
        assert not r['result']['isError'], r
        body = json.dumps({'jsonrpc': '2.0', 'id': 3, 'method': 'tools/call',  # (json.dumps writes the lone surrogate as the escape `\ud83d`, as Node does)
                           'params': {'name': 'insert_cell', 'arguments': {'cell_index': 0, 'cell_type': 'markdown', 'cell_source': 'half \ud83d emoji'}}}).encode()
        assert b'\\ud83d' in body
        r, _ = post(hc, body, sid)
        assert r['id'] == 3 and not r['result']['isError'], r
    stop(p)
    assert ''.join(json.loads((tmp_path / 'n.ipynb').read_text())['cells'][0]['source']) == 'half \ufffd emoji'


def test_requests_the_sdk_cannot_read_are_answered_over_stdio(tmp_path):
    """Valid JSON that is no request the SDK reads (`params: 5`, nesting past its parser's depth, a NUL after the object, no
    method) was dropped without a word: its client waited for ever. A request with an id gets a JSON-RPC error; the server goes on"""
    p = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.mcp', '--root', str(tmp_path)], env=ENV, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    def send(line):
        p.stdin.write(line + '\n'); p.stdin.flush()
        assert select.select([p.stdout], [], [], 60)[0], f'no answer to {line[:80]!r} in 60 s'
        return json.loads(p.stdout.readline())
    try:
        assert send(json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': INIT['params']}))['id'] == 1
        p.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        deep = '[' * 100_000 + ']' * 100_000
        for rid, line in [(2, '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":5}'),
                          (3, '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ping","arguments":{"x":%s}}}' % deep),
                          (4, '{"jsonrpc":"2.0","id":4,"method":"ping"}\x00'), ('x5', '{"jsonrpc":"2.0","id":"x5"}')]:
            r = send(line)
            assert r['id'] == rid and r['error']['code'] == -32600 and 'not a JSON-RPC message the server can read' in r['error']['message'], r
        assert send('{"jsonrpc":"2.0","id":6,"method":"ping"}') == {'jsonrpc': '2.0', 'id': 6, 'result': {}}  # it goes on
    finally:
        p.kill(); p.wait()
