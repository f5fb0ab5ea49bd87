"""`headlesnb run --jobs 2` vs `--jobs 1` over 8 CPU-light notebooks (target: at most 0.6x the serial time).

Each notebook waits 1 s in all (two sleeps) and computes a little; each runs in its own `headlesnb run` process.
Alternately 3 times each; medians printed."""
import json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

def make_nb(path, i):
    srcs = ['import time', 'time.sleep(0.5)', f'print(sum(range({i} * 1000)))', 'time.sleep(0.5)', f'{i} * 2']
    cells = [dict(cell_type='code', id=f'c{k}', metadata={}, outputs=[], execution_count=None, source=s) for k, s in enumerate(srcs)]
    path.write_text(json.dumps(dict(cells=cells, metadata={}, nbformat=4, nbformat_minor=5)))

def timed(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert r.returncode == 0, r.stderr
    return time.perf_counter() - t

if __name__ == '__main__':
    print(f'load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the machine may be shared)')
    d = Path(tempfile.mkdtemp())
    nbs = []
    for i in range(8):
        make_nb(d / f'nb{i}.ipynb', i)
        nbs.append(str(d / f'nb{i}.ipynb'))
    base = [sys.executable, '-m', 'headlesnb.fronts.cli', 'run', *nbs, '--output-dir', str(d / 'out')]
    t1, t2 = [], []
    for _ in range(3): t1.append(timed([*base, '--jobs', '1'])); t2.append(timed([*base, '--jobs', '2']))
    m1, m2 = statistics.median(t1), statistics.median(t2)
    print(f'--jobs 1 (serial):   median {m1:.2f} s  {["%.2f" % t for t in t1]}  (baseline)')
    print(f'--jobs 2 (parallel): median {m2:.2f} s  {["%.2f" % t for t in t2]}')
    print(f'ratio: {m2 / m1:.2f}x the serial time  (target <= 0.6x)')
