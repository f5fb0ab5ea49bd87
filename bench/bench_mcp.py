"""Round trip of `execute_code('1+1')` over MCP stdio (official client) against the trivial `ping` tool on the same server.

Run: python bench/bench_mcp.py [N]      (N calls of each, default 200; the target is a ratio of at most 2x)
"""
import os, statistics, sys, tempfile, time

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def timed(s, tool, args, n) -> list:
    res = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = await s.call_tool(tool, args)
        res.append(time.perf_counter() - t0)
        if r.is_error: raise RuntimeError(f'{tool} failed: {r.content[0].text}')
    return res


async def main(n=200):
    with tempfile.TemporaryDirectory() as root:
        params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.mcp', '--root', root], env=dict(os.environ))
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool('use_notebook', dict(notebook_name='bench', mode='create'))
            code = dict(code='1+1', notebook_name='bench')
            await timed(s, 'ping', {}, 20); await timed(s, 'execute_code', code, 20)  # warm up (kernel start, imports)
            ping, run = [], []
            for _ in range(4):  # interleave, so drift on a noisy machine hits both alike
                ping += await timed(s, 'ping', {}, n // 4)
                run += await timed(s, 'execute_code', code, n // 4)
    p, e = statistics.median(ping) * 1000, statistics.median(run) * 1000
    print(f"ping:                 median {p:7.3f} ms  (p90 {sorted(ping)[int(len(ping) * .9)] * 1000:.3f} ms, n={len(ping)})")
    print(f"execute_code('1+1'):  median {e:7.3f} ms  (p90 {sorted(run)[int(len(run) * .9)] * 1000:.3f} ms, n={len(run)})")
    print(f"ratio execute_code / ping: {e / p:.2f}x (target: at most 2x)")


if __name__ == '__main__':
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
