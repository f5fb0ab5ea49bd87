"""100 `insert_cell` calls over MCP (streamable HTTP, official client) from 4 clients at once, each on its own notebook:
`headlesnb mcp` answering only once each edit is on disk (the default) against `--no-durable` (answers before the write),
both servers started by this script. Each server first gets one untimed round (the first round of a run pays the client's
and the servers' warm-up: 5.5-6.9 s on a busy machine, whichever server it went to, against 0.6-2 s for the rounds after
it); then timed rounds alternate between the servers, the one going first swapping each round, so that drift on a
shared machine hits both alike. All four notebooks of a server are in one folder, so their writes can share that
folder's fsync.

Run: python bench/bench_mcp_durable.py [ROUNDS]      (default 9; target: durable at most 1.5x the time of --no-durable)
"""
import os, socket, statistics, subprocess, sys, tempfile, time

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

CLIENTS, CALLS = 4, 25


def free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


def start(root, *extra):
    port = free_port()
    p = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.mcp', '--root', root, '--transport', 'http', '--port', str(port), *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=0.2): return p, f'http://127.0.0.1:{port}/mcp'
        except OSError: time.sleep(0.1)
    p.kill(); raise RuntimeError('server did not start')


async def client(url, name, n):
    async with httpx2.AsyncClient(timeout=60) as hc, streamable_http_client(url, http_client=hc) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        await s.call_tool('use_notebook', dict(notebook_name=name, mode='create'))
        for i in range(n):
            res = await s.call_tool('insert_cell', dict(cell_index=-1, cell_type='code', cell_source=f'x = {i}', notebook_name=name))
            if res.is_error: raise RuntimeError(res.content[0].text)


async def round_(url, tag) -> float:
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for c in range(CLIENTS): tg.start_soon(client, url, f'{tag}{c}', CALLS)
    return time.perf_counter() - t0


def main(rounds=9):
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        (pd, durable), (pf, fast) = start(a), start(b, '--no-durable')
        try:
            urls = {'durable': durable, 'no-durable': fast}
            warm = {k: anyio.run(round_, url, 'warm') for k, url in urls.items()}
            times = {k: [] for k in urls}
            for i in range(rounds):
                for k in (urls if i % 2 == 0 else reversed(urls)): times[k].append(anyio.run(round_, urls[k], f'r{i}c'))
        finally:
            for p in (pd, pf): p.terminate(); p.wait(10)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:11s} {CLIENTS * CALLS} inserts from {CLIENTS} clients: median {med[k]:.3f} s; rounds: {' '.join(f'{x:.3f}' for x in v)}")
    print('first rounds (untimed): ' + ', '.join(f'{k} {v:.3f} s' for k, v in warm.items()))
    ratio = med['durable'] / med['no-durable']
    print(f"ratio durable / no-durable: {ratio:.2f}x (target: at most 1.5x)")
    return ratio <= 1.5


if __name__ == '__main__': sys.exit(0 if main(int(sys.argv[1]) if len(sys.argv) > 1 else 9) else 1)
