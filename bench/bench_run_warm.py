"""20 ten-cell notebooks on `-k python3`: `headlesnb run ... --jobs 2` (one process, kernels started ahead) against papermill run
two at a time (`xargs -P 2 papermill`) on the same machine (target: at most 0.6x papermill's time).

Alternately, 3 times each (HEADLESNB_BENCH_ROUNDS); medians printed, with the load average (the machine may be shared)."""
import json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

KS = {'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}}

def make_nb(path, i, n=10):
    srcs = [f'seed = {i}'] + [f'x{k} = seed * {k}\nprint(x{k})' if k % 2 else f'sum(range({k} * 100))' for k in range(1, n)]
    cells = [dict(cell_type='code', id=f'c{k}', metadata={'tags': ['parameters']} if k == 0 else {}, outputs=[], execution_count=None, source=s)
             for k, s in enumerate(srcs)]
    path.write_text(json.dumps(dict(cells=cells, metadata=KS, nbformat=4, nbformat_minor=5)))

def timed(cmd, **kw):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, **kw)
    assert r.returncode == 0, r.stderr[-2000:]
    return time.perf_counter() - t

if __name__ == '__main__':
    rounds = int(os.environ.get('HEADLESNB_BENCH_ROUNDS', 3))
    d = Path(tempfile.mkdtemp())
    nbs = [d / f'nb{i:02d}.ipynb' for i in range(20)]
    for i, p in enumerate(nbs): make_nb(p, i)
    (d / 'pm').mkdir()
    ours = [sys.executable, '-m', 'headlesnb.fronts.cli', 'run', *map(str, nbs), '--output-dir', str(d / 'hb'), '-k', 'python3', '--jobs', '2']
    # papermill two at a time, as a shell pipeline would: one papermill process per notebook
    theirs = ['sh', '-c', f'ls {d}/nb*.ipynb | xargs -P 2 -I{{}} sh -c \'"{sys.executable}" -m papermill -k python3 --no-progress-bar '
              f'"$1" "{d}/pm/$(basename "$1")"\' _ {{}}']
    print(f'load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the machine may be shared)')
    to, tt = [], []
    for _ in range(rounds): to.append(timed(ours)); tt.append(timed(theirs))
    assert len(list((d / 'pm').glob('*.ipynb'))) == 20 and len(list((d / 'hb').glob('*.ipynb'))) == 20
    mo, mt = statistics.median(to), statistics.median(tt)
    print(f'headlesnb run -k python3 --jobs 2 (20 notebooks): median {mo:.2f} s  {["%.2f" % t for t in to]}')
    print(f'xargs -P 2 papermill -k python3 (20 notebooks):   median {mt:.2f} s  {["%.2f" % t for t in tt]}  (baseline)')
    print(f'load average after: {os.getloadavg()[0]:.1f}')
    print(f'ratio: {mo / mt:.2f}x papermill\'s time  (target <= 0.6x)')
