"""The same 20 ten-cell notebooks on `-k python3`: `headlesnb run ... --cluster local:2` (a Dask cluster of two worker processes
started by the command) against `--jobs 2` (target: at most 1.3x the --jobs time).

Alternately, 3 times each (HEADLESNB_BENCH_ROUNDS); medians printed, with the load average (the machine may be shared)."""
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
    print(f'load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the machine may be shared)')
    tj, tc = [], []
    for _ in range(rounds): tj.append(timed(jobs)); tc.append(timed(cluster))
    assert len(list((d / 'cluster').glob('*.ipynb'))) == 20
    mj, mc = statistics.median(tj), statistics.median(tc)
    print(f'--cluster local:2 (20 notebooks, -k python3): median {mc:.2f} s  {["%.2f" % t for t in tc]}')
    print(f'--jobs 2 (20 notebooks, -k python3):          median {mj:.2f} s  {["%.2f" % t for t in tj]}  (baseline)')
    print(f'load average after: {os.getloadavg()[0]:.1f}')
    print(f'ratio: {mc / mj:.2f}x the --jobs time  (target <= 1.3x)')
