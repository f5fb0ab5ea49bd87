"""A 200-cell notebook on `SubprocessKernel` vs nbclient executing the same notebook (target: at most 1.0x).

Same kernel (python3, ipykernel), same machine, both in this process: nbclient's `NotebookClient.execute()` (start,
kernel_info, 200 cells, shutdown) against `SubprocessKernel` (start on the first run, 200 runs, close). Alternated,
5 times each; medians printed. The machine has 2 cores shared with other work: read the ratio, not the seconds."""
import statistics, sys, time
import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook
from headlesnb.kernels.subkernel import SubprocessKernel

CELLS = [f'x{i} = {i} * 2\nprint(x{i})' if i % 2 else f'sum(range({i}))' for i in range(200)]

def theirs() -> float:
    nb = new_notebook(cells=[new_code_cell(c) for c in CELLS], metadata={'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}})
    t = time.perf_counter()
    NotebookClient(nb, kernel_name='python3').execute()
    return time.perf_counter() - t

def ours() -> float:
    t = time.perf_counter()
    k = SubprocessKernel('python3')
    for c in CELLS: k.run(c)
    k.close()
    return time.perf_counter() - t

if __name__ == '__main__':
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    ours(); theirs()  # warm the page cache and imports
    to, tt = [], []
    for _ in range(n): to.append(ours()); tt.append(theirs())
    mo, mt = statistics.median(to), statistics.median(tt)
    print(f'SubprocessKernel, 200 cells: median {mo:.2f} s  {["%.2f" % t for t in to]}')
    print(f'nbclient execute, 200 cells: median {mt:.2f} s  {["%.2f" % t for t in tt]}  (baseline)')
    print(f'ratio: {mo / mt:.2f}x nbclient  (target <= 1.0x)')
