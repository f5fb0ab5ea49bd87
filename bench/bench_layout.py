"""The package's layout against the flat one it replaced: `import headlesnb`, `from headlesnb import Engine` (every
manager loaded) and the start of `headlesnb mcp` (stdio, official client: spawn, initialize, list the tools) with this
checkout's package, against the same with the package as it was before the move into subpackages (extracted from git
into a temporary folder), alternating, in the same run.

Run from the repo root: python bench/bench_layout.py [N] [BASE]   (N rounds, default 15; BASE a git ref, default the
commit before the move)      target: at most 1.05x for each
"""
import os, statistics, subprocess, sys, tarfile, tempfile, time
from io import BytesIO
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

repo = Path(__file__).resolve().parents[1]


def before_the_move() -> str:
    gone = subprocess.run(['git', 'log', '-1', '--format=%H', '--', 'headlesnb/mcp.py'], cwd=repo, capture_output=True, text=True, check=True)
    return gone.stdout.strip() + '^'


def extract(ref: str, dest: Path):
    tar = subprocess.run(['git', 'archive', ref, 'headlesnb'], cwd=repo, capture_output=True, check=True).stdout
    tarfile.open(fileobj=BytesIO(tar)).extractall(dest, filter='data')


def run(tree: Path, code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, '-c', code], cwd=tree, check=True, env=dict(os.environ, PYTHONPATH=str(tree)))
    return time.perf_counter() - t


async def mcp_start(tree: Path, root: str) -> float:
    cli = 'headlesnb.fronts.cli' if (tree / 'headlesnb' / 'fronts').is_dir() else 'headlesnb.cli'
    params = StdioServerParameters(command=sys.executable, args=['-m', cli, 'mcp', '--root', root], cwd=str(tree),
                                   env=dict(os.environ, PYTHONPATH=str(tree)))
    t = time.perf_counter()
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        assert (await s.list_tools()).tools
    return time.perf_counter() - t


def main(n=15, base=None):
    base = base or before_the_move()
    with tempfile.TemporaryDirectory() as old, tempfile.TemporaryDirectory() as root:
        extract(base, Path(old))
        trees = dict(now=repo, before=Path(old))
        figures = {'import headlesnb': 'import headlesnb', 'from headlesnb import Engine': 'from headlesnb import Engine'}
        times = {(f, t): [] for f in [*figures, 'headlesnb mcp start'] for t in trees}
        for _ in range(n):
            for t, tree in trees.items():  # alternating, so drift on a noisy machine hits both alike
                for f, code in figures.items(): times[f, t].append(run(tree, code))
                times['headlesnb mcp start', t].append(anyio.run(mcp_start, tree, root))
    print(f'baseline: the package at {base} (flat), median of {n}')
    for f in [*figures, 'headlesnb mcp start']:
        now, before = (statistics.median(times[f, t]) * 1000 for t in ('now', 'before'))
        print(f'{f:30s} now {now:7.0f} ms   before {before:7.0f} ms   ratio {now / before:.3f}x (target: at most 1.05x)')


if __name__ == '__main__':
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15, sys.argv[2] if len(sys.argv) > 2 else None)
