"""`headlesnb run` vs `papermill` on the same parameterized notebook, same command line (target: at least 3x faster).

Both are run as subprocesses with the same parameters (-p, -y), alternately, 5 times each; medians printed.
headlesnb runs on its in-process kernel (the default for a Python notebook); papermill on the python3 kernelspec."""
import json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

def make_nb(path, n=40):
    cells = [dict(cell_type='code', id='params', metadata={'tags': ['parameters']}, outputs=[], execution_count=None,
                  source='alpha = 0.1\nname = "default"\nsizes = [1]')]
    for i in range(n):
        src = (f'x{i} = alpha * {i} + sum(sizes)\nprint(name, x{i})' if i % 3 == 0 else
               f'[s * {i} for s in sizes]' if i % 3 == 1 else f'total_{i} = sum(range({i} * 100))')
        cells.append(dict(cell_type='code', id=f'c{i:04d}', metadata={}, outputs=[], execution_count=None, source=src))
        if i % 10 == 0: cells.append(dict(cell_type='markdown', id=f'm{i:04d}', metadata={}, source=f'## Part {i // 10}'))
    path.write_text(json.dumps(dict(cells=cells, nbformat=4, nbformat_minor=5,
                                    metadata={'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}})))

def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return time.perf_counter() - t

if __name__ == '__main__':
    print(f'load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the machine may be shared)')
    d = Path(tempfile.mkdtemp())
    make_nb(d / 'in.ipynb')
    params = ['-p', 'alpha', '0.6', '-p', 'name', 'bench', '-y', 'sizes: [1, 2, 3]']
    ours = [sys.executable, '-m', 'headlesnb.fronts.cli', 'run', str(d / 'in.ipynb'), str(d / 'ours.ipynb'), *params]
    theirs = [sys.executable, '-m', 'papermill', str(d / 'in.ipynb'), str(d / 'theirs.ipynb'), *params, '--no-progress-bar']
    to, tt = [], []
    for _ in range(5): to.append(timed(ours)); tt.append(timed(theirs))
    a, b = json.loads((d / 'ours.ipynb').read_text()), json.loads((d / 'theirs.ipynb').read_text())
    assert [c.get('outputs') and c['outputs'][0].get('text') for c in a['cells']] == \
           [c.get('outputs') and c['outputs'][0].get('text') for c in b['cells']], 'the two runs differ'
    mo, mt = statistics.median(to), statistics.median(tt)
    print(f'headlesnb run (in-process, 41 code cells, 3 parameters): median {mo:.2f} s  {["%.2f" % t for t in to]}')
    print(f'papermill (python3 kernel, same command line):          median {mt:.2f} s  {["%.2f" % t for t in tt]}  (baseline)')
    print(f'speed-up: {mt / mo:.1f}x  (target >= 3x)')
