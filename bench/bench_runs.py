"""Runs that outlive the call, over MCP stdio (official client) and in the Python API:

1. `get_run` of a running cell with nothing new, against `ping` on the same server (target: at most 1.5x);
2. a run started with `wait=0` while a cell blocks the notebook: the answer's time, worst of N (target: at most 50 ms);
3. a cell printing a line every millisecond, with its outputs written into the notebook as they come (every 0.5 s here,
   2 s by default) against the same run with that writer off (target: at most 1.2x);
4. memory: four notebooks one after another, each a cell printing 50 MB (a notebook keeps its 10 MB cap): the process's
   resident memory above what it was, while one is open and after all are closed (target: at most 100 MB above what a
   notebook keeps, given back: what closed ones held must not pile up).

Run: python bench/bench_runs.py [N]      (N calls for 1 and 2, default 200)
"""
import gc, os, statistics, sys, tempfile, time

import anyio, psutil
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from bench_mcp import timed  # (bench/ is on the path of a script run from it)


async def over_mcp(n):
    with tempfile.TemporaryDirectory() as root:
        params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.mcp', '--root', root], env=dict(os.environ))
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            for nb in ('a', 'b'): await s.call_tool('use_notebook', dict(notebook_name=nb, mode='create'))
            long = await s.call_tool('execute_code', dict(code='import time; time.sleep(600)', notebook_name='a', wait=0))
            rid = long.structured_content['run_id']
            await anyio.sleep(0.3)
            args = dict(run_id=rid, since=10**6)  # a poll that has seen everything
            await timed(s, 'ping', {}, 20); await timed(s, 'get_run', args, 20)
            ping, poll = [], []
            for _ in range(5): ping += await timed(s, 'ping', {}, n // 5); poll += await timed(s, 'get_run', args, n // 5)
            p, g = statistics.median(ping), statistics.median(poll)
            print(f"ping      median {p * 1000:.2f} ms\nget_run   median {g * 1000:.2f} ms (nothing new)")
            print(f"ratio get_run / ping: {g / p:.2f}x (target: at most 1.5x)")
            # 2. wait=0 behind the blocked notebook 'a': queued at once
            starts = await timed(s, 'execute_code', dict(code='1 + 1', notebook_name='a', wait=0), 50)
            print(f"wait=0 start behind a running cell: median {statistics.median(starts) * 1000:.2f} ms, worst {max(starts) * 1000:.2f} ms (target: at most 50 ms)")
            await s.call_tool('interrupt', dict(notebook_name='a'))
            return g / p <= 1.5 and max(starts) <= 0.05


def autosave_cost():
    from headlesnb import NotebookManager
    code = 'import time\nt = time.monotonic()\nwhile time.monotonic() - t < 3:\n    print("tick", time.monotonic())\n    time.sleep(0.001)\nn = 0'
    cpu = 'sum(i * i for i in range(3_000_000))'  # the same CPU work after the printing, timed
    def once(every):
        with tempfile.TemporaryDirectory() as root:
            nm = NotebookManager(root)
            nm.live_every = every
            nm.use_notebook('n', mode='create')
            c = nm.insert_cell(-1, 'code', code + '\n' + cpu)
            t0 = time.perf_counter(); nm.execute_cell(c['id'], wait=0); r = nm.get_run(nm.list_runs()[-1]['run_id'], wait=60)
            while not r['done']: r = nm.get_run(r['run_id'], wait=60)
            took = time.perf_counter() - t0
            nm.close_all()
            return took
    on, off = [], []
    for _ in range(3): on.append(once(0.5)); off.append(once(10**6))
    a, b = statistics.median(on), statistics.median(off)
    print(f"a cell printing every ms for 3 s: {a:.3f} s with its outputs written as they come (every 0.5 s), {b:.3f} s without: {a / b:.2f}x (target: at most 1.2x)")
    return a / b <= 1.2


def memory(notebooks=4):
    from headlesnb import NotebookManager
    proc = psutil.Process()
    with tempfile.TemporaryDirectory() as root:
        nm = NotebookManager(root)
        nm.use_notebook('warm', mode='create')
        nm.execute_code('1')
        gc.collect(); base = proc.memory_info().rss
        during = []
        for i in range(notebooks):  # one after another: what a closed one held must not pile up
            nm.use_notebook(f'm{i}', mode='create')
            c = nm.insert_cell(-1, 'code', "print(('x' * 99 + '\\n') * 500_000)", notebook_name=f'm{i}')
            nm.execute_cell(c['id'], notebook_name=f'm{i}')
            kept = sum(len(''.join(o.get('text', ''))) for o in nm.read_cell(c['id'], notebook_name=f'm{i}')['outputs'])
            gc.collect(); during.append(proc.memory_info().rss)
            nm.unuse_notebook(f'm{i}')
        time.sleep(1)  # the background saver lets go of a document it had scheduled
        gc.collect(); after = proc.memory_info().rss
    mb, top = 1024 * 1024, max(during)
    print(f"{notebooks} notebooks, each a cell printing 50 MB, one after another: each keeps {kept / mb:.1f} MB; resident memory at most "
          f"+{(top - base) / mb:.0f} MB while one is open, +{(after - base) / mb:.0f} MB once all are closed "
          f"(target: at most {kept / mb + 100:.0f} MB while open, at most 20 MB once closed)")
    return top - base <= kept + 100 * mb and after - base <= 20 * mb


if __name__ == '__main__':
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    ok = [anyio.run(over_mcp, n), autosave_cost(), memory()]
    sys.exit(0 if all(ok) else 1)
