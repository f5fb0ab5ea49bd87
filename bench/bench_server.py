"""The dialoghelper-compatible server over HTTP: `read_msg_` round trips against the trivial `/health`, and `add_relative_`
(the client's `add_msg`) throughput with concurrent clients, with durable replies (the default: a reply comes once the
message is on disk, fsync'd; concurrent requests share writes) against `--no-durable` (replies before the coalesced save).

Starts `headlesnb serve` twice on free ports with temporary roots (default, and `--no-durable`), talks to them with httpx
(form-encoded POSTs, as dialoghelper sends them; one persistent connection per client), prints requests/s and p50/p99
latency, the ratio of `read_msg_` p50 to `/health` p50 (target: at most 3x), and the ratio of durable to non-durable
add throughput with 4 clients (target: at least 0.5x), measured in six alternating rounds so that drift on a shared
machine hits both alike. Stops the servers by PID at the end.

Run: python bench/bench_server.py [N]      (N requests per measurement and client, default 300)
"""
import os, socket, statistics, subprocess, sys, tempfile, threading, time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


ROUNDS = 6  # durable and non-durable rounds alternate: the drift of a shared machine hits both alike


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def pct(xs, p): return sorted(xs)[min(len(xs) - 1, int(len(xs) * p))] * 1000


def timed(fn, n) -> list:
    res = []
    for _ in range(n):
        t = time.perf_counter()
        r = fn()
        res.append(time.perf_counter() - t)
        if r.status_code != 200: raise RuntimeError(f'{r.request.url}: {r.status_code} {r.text}')
    return res


def concurrent(url, n_clients, n, make_call) -> tuple:
    "Each of `n_clients` threads makes `n` calls (`make_call(client, i)`); (latencies, wall time)"
    lats, errs = [], []
    def worker(i):
        with httpx.Client(base_url=url, timeout=30) as h:
            h.get('/health')
            call = make_call(h, i)
            try: lats.extend(timed(call, n))
            except Exception as e: errs.append(e)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_clients)]
    t0 = time.perf_counter()
    for t in threads: t.start()
    for t in threads: t.join()
    if errs: raise errs[0]
    return lats, time.perf_counter() - t0


def line(name, lats, wall=None):
    rps = f'{len(lats) / wall:8.0f} req/s' if wall else ' ' * 14
    print(f'{name:38s} {rps}  p50 {pct(lats, .5):7.2f} ms  p99 {pct(lats, .99):7.2f} ms  (n={len(lats)})')


def start(root, *args):
    port = free_port()
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)}
    srv = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', root, '--port', str(port), *args],
                           cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f'http://127.0.0.1:{port}'
    with httpx.Client(base_url=url, timeout=30) as h:
        for _ in range(600):
            try: h.get('/health'); break
            except httpx.TransportError: time.sleep(0.05)
        h.post('/create_dialog_', data={'name': 'bench'})
        ids = [h.post('/add_relative_', data={'dlg_name': 'bench', 'content': f'Message {i}\n' * 5, 'placement': 'at_end'}).json()['id']
               for i in range(50)]
    return srv, url, ids


def adds(url, n, rounds):
    "add_relative_ with 4 concurrent clients, `rounds` times `n // rounds` calls each: (latencies, wall time)"
    lats, wall = [], 0.0
    for r in range(rounds):
        l, w = concurrent(url, 4, n // rounds, lambda c, i: (lambda: c.post('/add_relative_', data={
            'dlg_name': 'bench', 'content': f'Added by client {i}', 'placement': 'at_end', 'msg_type': 'note'})))
        lats += l; wall += w
    return lats, wall


def main(n=300):
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as root2:
        procs = []
        try:
            srv, url, ids = start(root); procs.append(srv)
            fast, furl, _ = start(root2, '--no-durable'); procs.append(fast)
            with httpx.Client(base_url=url, timeout=30) as h:
                read = {'dlg_name': 'bench', 'id_': ids[25], 'n': '0', 'relative': 'true'}
                health = lambda: h.get('/health')
                read_msg = lambda: h.post('/read_msg_', data=read)
                timed(health, 50); timed(read_msg, 50)  # warm up
                hl, rl = [], []
                for _ in range(4):  # interleave, so drift on a noisy machine hits both alike
                    hl += timed(health, n // 4)
                    rl += timed(read_msg, n // 4)
            print(f'headlesnb server benchmark ({n} requests per measurement)')
            line('/health (1 client)', hl)
            line('read_msg_ (1 client)', rl)
            print(f'ratio read_msg_ / health p50: {statistics.median(rl) / statistics.median(hl):.2f}x (target: at most 3x)')
            lats, wall = concurrent(url, 4, n, lambda c, i: (lambda: c.post('/read_msg_', data=read)))
            line('read_msg_ (4 concurrent clients)', lats, wall)
            dl, dw, cl, cw, rounds = [], 0.0, [], 0.0, []
            for _ in range(ROUNDS):  # alternate durable and coalesced rounds (each client n/ROUNDS calls a round)
                l, w = adds(url, n // ROUNDS, 1); dl += l; dw += w; d = len(l) / w
                l, w = adds(furl, n // ROUNDS, 1); cl += l; cw += w; rounds.append(d / (len(l) / w))
            line('add_msg, durable replies (4 clients)', dl, dw)
            line('add_msg, --no-durable (4 clients)', cl, cw)
            print(f'ratio durable / non-durable add throughput: {(len(dl) / dw) / (len(cl) / cw):.2f}x (target: at least 0.5x; '
                  f'rounds {min(rounds):.2f}x-{max(rounds):.2f}x)')
        finally:
            for p in procs:
                p.terminate()
                try: p.wait(15)
                except subprocess.TimeoutExpired: p.kill(); p.wait()


if __name__ == '__main__':
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
