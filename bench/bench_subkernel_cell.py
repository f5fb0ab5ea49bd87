"""Per-cell cost of `SubprocessKernel.run` vs nbclient's `execute_cell` on a started kernel (target: at most 1.2x).

The cell is `1+1`. Each side has its own started python3 kernel; blocks of 200 runs alternate, 5 blocks each;
the median per-cell time of each side is compared. 2 shared cores: read the ratio."""
import statistics, sys, time
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook
from headlesnb.kernels.subkernel import SubprocessKernel

N = 200

if __name__ == '__main__':
    blocks = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    nb = new_notebook(cells=[new_code_cell('1+1')])
    c = NotebookClient(nb, kernel_name='python3')
    k = SubprocessKernel('python3')
    k.run('1')
    to, tt = [], []
    with c.setup_kernel():
        for _ in range(20): c.execute_cell(nb.cells[0], 0); k.run('1+1')  # warm up
        for _ in range(blocks):
            t = time.perf_counter()
            for _ in range(N): k.run('1+1')
            to.append((time.perf_counter() - t) / N)
            t = time.perf_counter()
            for _ in range(N): c.execute_cell(nb.cells[0], 0)
            tt.append((time.perf_counter() - t) / N)
    k.close()
    mo, mt = statistics.median(to), statistics.median(tt)
    print(f'SubprocessKernel.run(1+1):   median {mo*1e3:.2f} ms/cell  {["%.2f" % (t*1e3) for t in to]}')
    print(f'nbclient execute_cell(1+1): median {mt*1e3:.2f} ms/cell  {["%.2f" % (t*1e3) for t in tt]}  (baseline)')
    print(f'ratio: {mo / mt:.2f}x nbclient  (target <= 1.2x)')
