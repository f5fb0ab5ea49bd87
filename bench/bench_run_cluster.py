"""The same 20 ten-cell notebooks on `-k python3`: `headlesnb run ... --cluster local:2` (a Dask cluster of two worker processes
started by the command) against `--jobs 2` (target: at most 1.3x the --jobs time).

Alternately, 3 times each (HEADLESNB_BENCH_ROUNDS); medians printed, with the load average (the machine may be shared).
With HEADLESNB_BENCH_PYCACHE=1 the processes use compiled bytecode (a cache in a temporary folder, filled by a first, untimed
run of each), as after `pip install`, which compiles it; without it they run as this environment does (with
PYTHONDONTWRITEBYTECODE=1 every import compiles: `import distributed` alone is then about 1 s of CPU in each of the three
processes a local cluster has, where a `--jobs` run imports no Dask at all)."""
import os, statistics, sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from bench_run_warm import make_nb, timed

if __name__ == '__main__':
    rounds = int(os.environ.get('HEADLESNB_BENCH_ROUNDS', 3))
    d = Path(tempfile.mkdtemp())
    nbs = [d / f'nb{i:02d}.ipynb' for i in range(20)]
    for i, p in enumerate(nbs): make_nb(p, i)
    base = [sys.executable, '-m', 'headlesnb.fronts.cli', 'run', *map(str, nbs), '-k', 'python3']
    jobs, cluster = [*base, '--output-dir', str(d / 'jobs'), '--jobs', '2'], [*base, '--output-dir', str(d / 'cluster'), '--cluster', 'local:2']
    env = dict(os.environ)
    if os.environ.get('HEADLESNB_BENCH_PYCACHE'):
        env.pop('PYTHONDONTWRITEBYTECODE', None); env['PYTHONPYCACHEPREFIX'] = str(d / 'pycache')
        timed([*base, '--output-dir', str(d / 'warm'), '--jobs', '2'], env=env); timed([*base, '--output-dir', str(d / 'warm'), '--cluster', 'local:2'], env=env)
    print(f"bytecode: {'compiled, cached' if 'PYTHONPYCACHEPREFIX' in env else 'as this environment has it'}")
    print(f'load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the machine may be shared)')
    tj, tc = [], []
    for _ in range(rounds): tj.append(timed(jobs, env=env)); tc.append(timed(cluster, env=env))
    assert len(list((d / 'cluster').glob('*.ipynb'))) == 20
    mj, mc = statistics.median(tj), statistics.median(tc)
    print(f'--cluster local:2 (20 notebooks, -k python3): median {mc:.2f} s  {["%.2f" % t for t in tc]}')
    print(f'--jobs 2 (20 notebooks, -k python3):          median {mj:.2f} s  {["%.2f" % t for t in tj]}  (baseline)')
    print(f'load average after: {os.getloadavg()[0]:.1f}')
    print(f'ratio: {mc / mj:.2f}x the --jobs time  (target <= 1.3x)')
