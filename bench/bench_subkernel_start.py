"""Kernel start (to the first cell's result) on `SubprocessKernel` vs nbclient (target: at most 1.0x); kernel memory.

nbclient: `NotebookClient` kernel manager + `start_new_kernel` + `start_new_kernel_client` (jupyter_client's
wait_for_ready) + `execute_cell('1')`. Ours: `SubprocessKernel().run('1')`. Shutdown is outside the timing.
Alternated, 7 times each; medians. The resident memory of one started ipykernel process is printed too."""
import statistics, sys, time
import psutil
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook
from headlesnb.kernels.subkernel import SubprocessKernel

def theirs() -> float:
    nb = new_notebook(cells=[new_code_cell('1')])
    c = NotebookClient(nb, kernel_name='python3')
    t = time.perf_counter()
    c.km = c.create_kernel_manager()
    c.start_new_kernel()
    c.start_new_kernel_client()
    c.execute_cell(nb.cells[0], 0)
    took = time.perf_counter() - t
    c._cleanup_kernel()
    return took

def ours() -> tuple:
    t = time.perf_counter()
    k = SubprocessKernel('python3')
    k.run('1')
    took = time.perf_counter() - t
    rss = psutil.Process(k.pid).memory_info().rss
    k.close()
    return took, rss

if __name__ == '__main__':
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    ours(); theirs()
    to, tt, rss = [], [], []
    for _ in range(n):
        t, m = ours(); to.append(t); rss.append(m)
        tt.append(theirs())
    mo, mt = statistics.median(to), statistics.median(tt)
    print(f'SubprocessKernel start + first cell: median {mo*1e3:.0f} ms  {["%.0f" % (t*1e3) for t in to]}')
    print(f'nbclient start + first cell:         median {mt*1e3:.0f} ms  {["%.0f" % (t*1e3) for t in tt]}  (baseline)')
    print(f'ratio: {mo / mt:.2f}x nbclient  (target <= 1.0x)')
    print(f'ipykernel process memory (RSS) after the first cell: median {statistics.median(rss) / 2**20:.0f} MiB')
