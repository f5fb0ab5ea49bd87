"""Tool-definition sizes as an assistant's API request carries them (name, description, input schema; JSON characters), per tool group
and for all groups, against jupyter-mcp-server 2.2.4's 18 tools measured the same way from their recorded schemas
(tests/fixtures/jms-2.2.4-tools.json: `tools/list` of the real server, see tests/fixtures/README.md).

Run: python bench/bench_mcp_tools.py      (targets: the notebooks group at most 0.8x JMS; all groups at most 36,000 characters)
"""
import json, sys, tempfile
from pathlib import Path

import anyio
from mcp.client.client import Client

from headlesnb.fronts.mcp import build_server

FIX = Path(__file__).resolve().parents[1] / 'tests' / 'fixtures' / 'jms-2.2.4-tools.json'


def size(name, description, schema) -> int: return len(json.dumps(dict(name=name, description=description, input_schema=schema)))


async def main():
    jms = json.loads(FIX.read_text())['tools']
    theirs = sum(size(t['name'], t.get('description'), t['inputSchema']) for t in jms)
    with tempfile.TemporaryDirectory() as root:
        srv = build_server(root)
        async with Client(srv) as cl: tools = {t.name: t for t in (await cl.list_tools()).tools}  # as a client lists them
    ours = {n: size(n, t.description, t.input_schema) for n, t in tools.items()}
    print(f"jupyter-mcp-server 2.2.4: {len(jms)} tools, {theirs:,} characters")
    for g, names in srv.groups.items():
        n = sum(ours[t] for t in names)
        print(f"group {g:10s} {len(names):3d} tools, {n:7,} characters ({n / theirs:.2f}x JMS)")
    total = sum(ours.values())
    nb = sum(ours[t] for t in srv.groups['notebooks'])
    print(f"all groups (and ping): {len(ours)} tools, {total:,} characters (~{total // 4:,} tokens)")
    print(f"ratio notebooks / JMS: {nb / theirs:.2f}x (target: at most 0.8x); all: {total:,} (target: at most 36,000)")
    return nb <= 0.8 * theirs and total <= 36_000


if __name__ == '__main__': sys.exit(0 if anyio.run(main) else 1)
