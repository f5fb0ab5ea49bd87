"""`headlesnb run` vs `jupyter nbconvert --execute` (nbclient) on the same 200-cell notebook (target: at least 3x faster).

Both commands are run as subprocesses, alternately, 3 times each; medians printed."""
import json, statistics, subprocess, sys, tempfile, time
from pathlib import Path

def make_nb(path, n=200):
    cells = [dict(cell_type='code', id=f'c{i:04d}', metadata={}, outputs=[], execution_count=None,
                  source=f'x{i} = {i} * 2\nprint(x{i})' if i % 2 else f'sum(range({i}))') for i in range(n)]
    path.write_text(json.dumps(dict(cells=cells, metadata={'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}},
                                    nbformat=4, nbformat_minor=5)))

def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t

if __name__ == '__main__':
    d = Path(tempfile.mkdtemp())
    make_nb(d / 'nb200.ipynb')
    ours = [sys.executable, '-m', 'headlesnb.fronts.cli', 'run', str(d / 'nb200.ipynb'), '--output', str(d / 'ours.ipynb')]
    theirs = [sys.executable, '-m', 'jupyter', 'nbconvert', '--to', 'notebook', '--execute', str(d / 'nb200.ipynb'),
              '--output', str(d / 'theirs.ipynb')]
    to, tt = [], []
    for _ in range(3): to.append(timed(ours)); tt.append(timed(theirs))
    mo, mt = statistics.median(to), statistics.median(tt)
    print(f'headlesnb run (200 cells):            median {mo:.2f} s  {["%.2f" % t for t in to]}')
    print(f'jupyter nbconvert --execute (nbclient): median {mt:.2f} s  {["%.2f" % t for t in tt]}  (baseline)')
    print(f'speed-up: {mt / mo:.1f}x  (target >= 3x)')
