"""`headlesnb proxy` against the fixes2 audit (F2, F3): a request's head and body must arrive within the client timeout
of its first byte, so a client trickling a byte at a time no longer holds its thread for ever, while a long streamed
answer is still whole; a mistyped --upstream or one with a key in its query is refused without printing the secret.
Every process is stopped by its PID.
"""
import select, socket, subprocess, sys, time

import anthropic
import pytest
from fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.timeout(180)
CLI = [sys.executable, '-m', 'headlesnb.fronts.cli']


def trickle(port:int, head:bytes, rest:bytes, every:float=0.4) -> tuple:
    "Send `head` at once, then `rest` a byte every `every` seconds (until the proxy answers or closes); (answer, seconds it took)"
    with socket.create_connection(('127.0.0.1', port), timeout=15) as s:
        t = time.monotonic()
        s.sendall(head)
        for b in rest:
            try: s.sendall(bytes([b]))
            except OSError: break  # closed on us
            if select.select([s], [], [], every)[0]: break  # answered or closed
        answer = b''
        try:
            while (data := s.recv(4096)): answer += data  # (to the close)
        except OSError: pass
        return answer, time.monotonic() - t


def test_trickling_client_is_cut_at_the_deadline_but_long_streams_are_not(tmp_path):
    "F2: a body or head sent a byte per 0.4 s (each read well within the 1 s timeout) is cut about 1 s after its first byte"
    from headlesnb.fronts.proxy import serve
    with FakeAnthropic(['a slow answer'], delay=1.5) as fake:
        srv = serve(tmp_path, fake.url, client_timeout=1)
        port = int(srv.url.rsplit(':', 1)[1])
        try:
            body = b'{"model":"m","max_tokens":5,"messages":[]}'
            head = b'POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n\r\n' % (port, len(body))
            answer, took = trickle(port, head, body)
            assert answer.startswith(b'HTTP/1.1 408 ') and b'within 1 seconds of its first byte' in answer and took < 3, (answer, took)
            lines = b''.join(b'X-Pad-%d: %s\r\n' % (i, b'y' * 3) for i in range(4))
            answer, took = trickle(port, b'POST /v1/messages HTTP/1.1\r\n', lines)  # mid-head: closed, no request to answer
            assert answer == b'' and took < 3, (answer, took)
            with anthropic.Anthropic(api_key='k', base_url=srv.url, max_retries=0) as c, \
                 c.messages.stream(model='m', max_tokens=10, messages=[dict(role='user', content='x')]) as st:
                assert st.get_final_text() == 'a slow answer'  # the answer, slower than the deadline, is not cut
        finally: srv.shutdown()


def test_bad_upstream_is_said_without_its_secret(tmp_path):
    "F3: a mistyped scheme holding USER:PASSWORD@, or a key in the query: one line naming the URL masked, exit 1"
    for up, shown in (('https:user:S3CRETpw@api.example.com', "'https:…@api.example.com'"),
                      ('https://api.example.com/?key=S3CRETpw', "'https://api.example.com/?…'")):
        r = subprocess.run([*CLI, 'proxy', '--root', str(tmp_path), '--port', '0', '--upstream', up], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and r.stderr.count('\n') == 1 and f'not {shown}' in r.stderr, r.stderr
        assert 'S3CRETpw' not in r.stdout + r.stderr and 'Traceback' not in r.stderr
