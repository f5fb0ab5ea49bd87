"""Benchmark: a request through `headlesnb proxy` against the same request made directly to the same upstream.

The upstream is the project's fake Messages API (`tests/fake_anthropic.py`) on loopback, so the figure is the
cost of the hop itself: the proxy parses the request, reads and renders the workspace, adds it, forwards the
request over its kept-open upstream connection and passes the answer back. The direct call sends the request
as the proxy forwards it (the workspace included), so the upstream does the same work both ways. Targets: a non-streaming request
through the proxy at most 2x the direct one (p50 of 200), the first byte of a streamed answer likewise, and
the workspace rendered for a request with 20 open file windows in at most 10 ms (wall time, and the CPU time it
took, which a loaded machine does not inflate).

The fake and the proxy (`headlesnb proxy`) run in their own processes, as they would for real (in one process
their threads would queue for one GIL). Requests alternate (direct, proxy, direct, ...) so that a busy machine
slows both alike. Both clients are
`httpx` clients with TCP_NODELAY, kept-open connections, as the Anthropic SDKs use. The proxy's workspace
has 20 file windows of 100 lines open (about 15k tokens added to each request).
The CPU time the proxy process used per request is printed too: on a loaded machine the wall times include
waiting for a core, which a hop through another process pays twice more than a direct call.
Run `python bench/bench_proxy.py` from the repo root (no asserts).
"""
import json, os, re, socket, statistics, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's headlesnb, whatever is installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))
import httpx, psutil
from headlesnb.workspace import WorkspaceManager
from headlesnb.fronts.proxy import WorkspaceReader, serve
import headlesnb

N, WARMUP, WINDOWS = 200, 20, 20


FAKE = """
import sys, time
from fake_anthropic import FakeAnthropic
class Forever(list):  # a script that never runs out
    def pop(self, i=0): return 'Hello! How can I help you today?'
    def __bool__(self): return True
fake = FakeAnthropic(validate=False).start()
fake.replies = Forever()
print(fake.url, flush=True)
sys.stdin.read()
"""


def start(cmd, pattern, stream='stdout', **kw):
    "A server process, and the URL its first line on `stream` gives (headlesnb's servers print theirs on stderr)"
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE if stream == 'stderr' else None, text=True, **kw)
    line = getattr(p, stream).readline()
    if not (m := re.search(pattern, line)): p.kill(); sys.exit(f'bench_proxy: server did not start: {line!r}')
    return p, m.group(1)


def workspace(root: Path):
    ws = WorkspaceManager(root).open_workspace('default')
    for i in range(WINDOWS):
        p = root / f'mod_{i:02d}.py'
        p.write_text(''.join(f'    value_{k} = compute(arg_{k}, {k * 7919 % 10007})  # line {k}\n' for k in range(1, 301)))
        ws.open_range(p.name, 100, 199)
    ws.add_todo('keep the tests green')
    return ws


def client():
    return httpx.Client(transport=httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]), timeout=30)


BODY = dict(model='claude-sonnet-4-5', max_tokens=1024, system=[dict(type='text', text='You are helpful. ' * 200, cache_control=dict(type='ephemeral'))],
            messages=[dict(role='user', content=[dict(type='text', text='Tell me about line %d. ' % i * 5) for i in range(20)])])


HEADERS = {'x-api-key': 'sk-ant-bench', 'anthropic-version': '2023-06-01', 'content-type': 'application/json'}


def plain(c, url, body) -> float:
    "One request; `body` is the pair (non-streaming, streaming) of encoded bodies, made once: the client's JSON encoding is not timed"
    t = time.perf_counter()
    r = c.post(url + '/v1/messages', content=body[0], headers=HEADERS)
    dt = time.perf_counter() - t
    assert r.status_code == 200, r.text
    return dt


def first_byte(c, url, body) -> float:
    t = time.perf_counter()
    with c.stream('POST', url + '/v1/messages', content=body[1], headers=HEADERS) as r:
        it = r.iter_raw()
        next(it)
        dt = time.perf_counter() - t
        for _ in it: pass
    assert r.status_code == 200
    return dt


def encoded(body) -> tuple: return json.dumps(body).encode(), json.dumps(dict(body, stream=True)).encode()
SENT = encoded(BODY)


def compare(fn, direct_url, proxy_url, forwarded):
    cd, cp, d, p = client(), client(), [], []
    for i in range(WARMUP + N):
        a, b = fn(cd, direct_url, forwarded), fn(cp, proxy_url, SENT)
        if i >= WARMUP: d.append(a); p.append(b)
    return statistics.median(d), statistics.median(p)


def main():
    root = Path(tempfile.mkdtemp())
    workspace(root)
    reader = WorkspaceReader(root)
    text = reader.render()[0]
    renders, cpu = [], []
    for _ in range(200):
        reader.sig = None  # read the state file again each time, as after an MCP tool changed it
        t, c = time.perf_counter(), time.process_time(); reader.render()
        renders.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
    cached = []
    for _ in range(200):
        t = time.perf_counter(); reader.render(); cached.append(time.perf_counter() - t)
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo), str(repo / 'tests')]))
    fake, fake_url = start([sys.executable, '-c', FAKE], r'(http://\S+)', env=env)
    try:
        for what, r in ((f'{WINDOWS} file windows', root), ('no windows (an empty workspace)', Path(tempfile.mkdtemp()))):
            proxy, proxy_url = start([sys.executable, '-m', 'headlesnb.fronts.cli', 'proxy', '--root', str(r), '--port', '0', '--upstream', fake_url],
                                     r'proxy: (http://\S+) ', 'stderr', env=env)
            try:
                from headlesnb.fronts.proxy import Proxy
                forwarded = json.loads(Proxy(r, fake_url, port=1).body_for_upstream('/v1/messages', json.dumps(BODY).encode()))
                print(f'workspace of {what}: {len(json.dumps(forwarded)) - len(json.dumps(BODY)):,} characters added to each request; '
                      f'{N} requests each way, alternating')
                cpu0 = psutil.Process(proxy.pid).cpu_times()
                d, p = compare(plain, fake_url, proxy_url, encoded(forwarded))
                cpu1 = psutil.Process(proxy.pid).cpu_times()
                per = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / (WARMUP + N)
                print(f'  non-streaming p50: direct {d * 1e3:.2f} ms, through the proxy {p * 1e3:.2f} ms: ratio {p / d:.2f}x (target <= 2x); '
                      f'the proxy process used {per * 1e3:.2f} ms of CPU per request')
                d, p = compare(first_byte, fake_url, proxy_url, encoded(forwarded))
                print(f'  first streamed byte p50: direct {d * 1e3:.2f} ms, through the proxy {p * 1e3:.2f} ms: ratio {p / d:.2f}x (target <= 2x)')
            finally: proxy.kill(); proxy.wait()
    finally: fake.kill(); fake.wait()
    print(f'workspace render, {WINDOWS} windows: p50 {statistics.median(renders) * 1e3:.2f} ms read from its state file '
          f'(CPU {statistics.median(cpu) * 1e3:.2f} ms), {statistics.median(cached) * 1e3:.2f} ms when unchanged (target <= 10 ms)')


if __name__ == '__main__': main()
