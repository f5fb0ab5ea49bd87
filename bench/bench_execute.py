"""execute_cell('1+1') in a 1000-cell notebook vs a bare CaptureShell.run('1+1') (target: at most 1.1x).

Both are measured in this run, interleaved in rounds so machine noise hits them alike; medians printed."""
import statistics, tempfile, time
from pathlib import Path
from execnb.shell import CaptureShell
from headlesnb import NotebookManager

N, ROUNDS = 200, 5

def bare():
    sh = CaptureShell(mpl_format=None)
    sh.run('1+1')
    def once():
        t = time.perf_counter(); sh.run('1+1'); return time.perf_counter() - t
    return once

def managed(root):
    nm = NotebookManager(root)  # default save_delay: outputs are saved in the background, coalesced
    nm.use_notebook('big', mode='create')
    for i in range(999): nm.insert_cell(-1, 'code', f'x{i} = {i}')
    cid = nm.insert_cell(-1, 'code', '1+1')['id']
    nm.save(); nm.execute_cell(cid)
    def once():
        t = time.perf_counter(); nm.execute_cell(cid); return time.perf_counter() - t
    return once, nm

if __name__ == '__main__':
    b = bare()
    m, nm = managed(Path(tempfile.mkdtemp()))
    tb, tm = [], []
    for _ in range(ROUNDS):
        tb += [b() for _ in range(N)]
        tm += [m() for _ in range(N)]
    nm.close_all()
    mb, mm = statistics.median(tb) * 1e3, statistics.median(tm) * 1e3
    print(f'bare CaptureShell.run(1+1):              median {mb:.3f} ms  (baseline, {len(tb)} runs)')
    print(f'execute_cell(1+1), 1000-cell notebook:   median {mm:.3f} ms  ({len(tm)} runs, saved in the background)')
    print(f'ratio: {mm / mb:.2f}x  (target <= 1.1x)')
