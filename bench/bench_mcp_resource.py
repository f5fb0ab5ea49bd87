"""Reading a cell through its resource (`notebook://{name}/cells/{cell_id}`) against `read_cell` of the same cell, over MCP stdio
with the official client, interleaved. The cell has a few outputs (the resource lists them, read_cell sends them).

Run: python bench/bench_mcp_resource.py [N]     (N reads of each, default 200; the target is a ratio of at most 1.2x)
"""
import os, statistics, sys, tempfile, time

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main(n=200):
    with tempfile.TemporaryDirectory() as root:
        params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.mcp', '--root', root], env=dict(os.environ))
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool('use_notebook', dict(notebook_name='bench', mode='create'))
            for i in range(10): await s.call_tool('insert_cell', dict(cell_index=-1, cell_type='code', cell_source=f'x{i} = {i}'))
            res = await s.call_tool('insert_execute_code_cell', dict(cell_index=5, cell_source='for i in range(3): print(i)\nx = list(range(50))\nx'))
            cid = res.meta['io.jupyter-mcp/cell_id']
            uri, args = f'notebook://bench/cells/{cid}', dict(cell_id=cid, notebook_name='bench')
            async def tool():
                if (await s.call_tool('read_cell', args)).is_error: raise RuntimeError('read_cell failed')
            async def resource(): await s.read_resource(uri)
            times = {tool: [], resource: []}
            for f in (tool, resource):
                for _ in range(20): await f()  # warm up
            for _ in range(n // 10):  # interleave, so drift on a noisy machine hits both alike
                for f in (tool, resource):
                    for _ in range(10):
                        t0 = time.perf_counter(); await f(); times[f].append(time.perf_counter() - t0)
    t, r = statistics.median(times[tool]) * 1000, statistics.median(times[resource]) * 1000
    print(f"read_cell(cell_id):            median {t:7.3f} ms (n={len(times[tool])})")
    print(f"read_resource(notebook://...): median {r:7.3f} ms (n={len(times[resource])})")
    print(f"ratio resource / read_cell: {r / t:.2f}x (target: at most 1.2x)")


if __name__ == '__main__':
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
