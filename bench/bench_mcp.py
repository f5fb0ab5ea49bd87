"""Round trip of `execute_code('1+1')` over MCP stdio (official client) against the trivial `ping` tool on the same server.

Also the floor under it, measured the same way: a `floor` tool that only hands IPython's run of `1+1` to the main thread
(where in-process cells run, so that an interrupt reaches them) and back, with none of headlesnb's run machinery (run
record, queue, outputs, answer). `execute_code - floor` is what that machinery costs; `floor / ping` is the best ratio a
cell run on the main thread could reach. The `floor` tool exists only in the server this script starts.

Run: python bench/bench_mcp.py [N]      (N calls of each, default 200; the target is a ratio of at most 2x)
"""
import os, statistics, sys, tempfile, time

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

# `headlesnb mcp` with one more tool, `floor` (see above), on the kernel of the notebook `bench`
SERVER = '''
import asyncio, sys
from headlesnb.fronts import mcp
from headlesnb.kernels.mainthread import MAIN
build = mcp.build_server
def with_floor(*a, **kw):
    srv = build(*a, **kw)
    async def floor() -> str:
        "IPython's run of 1+1 on the main thread, alone"
        shell = srv.engine.notebooks.item('bench').kernel._shell
        await asyncio.wrap_future(MAIN.submit(lambda: shell.here_loop().run_until_complete(shell.execute('1+1'))))
        return 'ok'
    srv.add_tool(floor, structured_output=False)
    return srv
mcp.build_server = with_floor
sys.exit(mcp.mcp_main(sys.argv[1:]))
'''


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
        params = StdioServerParameters(command=sys.executable, args=['-c', SERVER, '--root', root], env=dict(os.environ))
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool('use_notebook', dict(notebook_name='bench', mode='create'))
            calls = dict(ping=('ping', {}), floor=('floor', {}), run=('execute_code', dict(code='1+1', notebook_name='bench')))
            await timed(s, *calls['run'], 20)  # warm up (kernel start, imports)
            for c in calls.values(): await timed(s, *c, 20)
            got = {k: [] for k in calls}
            for _ in range(4):  # interleave, so drift on a noisy machine hits them alike
                for k, c in calls.items(): got[k] += await timed(s, *c, n // 4)
    med = {k: statistics.median(v) * 1000 for k, v in got.items()}
    def line(what, k): print(f"{what:22s} median {med[k]:7.3f} ms  (p90 {sorted(got[k])[int(len(got[k]) * .9)] * 1000:.3f} ms, n={len(got[k])})")
    line('ping:', 'ping'); line('floor (IPython alone):', 'floor'); line("execute_code('1+1'):", 'run')
    print(f"ratio execute_code / ping: {med['run'] / med['ping']:.2f}x (target: at most 2x); "
          f"floor / ping: {med['floor'] / med['ping']:.2f}x; headlesnb's run machinery: {med['run'] - med['floor']:.3f} ms")


if __name__ == '__main__':
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
