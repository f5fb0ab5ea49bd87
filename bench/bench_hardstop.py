"""`time.sleep(100)` and a loop in C (`sum(range(10**13))`) under a 1 s timeout on a `SubprocessKernel`: the time until
the next cell has run (target: within 3 s). The sleep ends at the SIGINT; the C loop ignores it, so its kernel is killed
`stop_grace` (0.5 s) later and the next cell starts a new one. Baseline measured in the same run: a kernel's start to
its first cell's result, which the kill path pays once. 5 times each; medians; 2 shared cores.
Also `time.sleep(100)` under a 1 s timeout in-process, as the servers run cells (on the main thread, `serve_beside`),
which a SIGINT ends with no kernel to restart (a C loop deaf to SIGINT would hold the main thread: not measured)."""
import statistics, sys, time
from headlesnb.kernels.inprocess import InProcessKernel
from headlesnb.kernels.mainthread import serve_beside
from headlesnb.kernels.subkernel import SubprocessKernel

def stop_then_next(k, code) -> float:
    t = time.perf_counter()
    r = k.run(code, timeout=1)
    assert r.status == 'timeout', r
    assert k.run('1 + 1').ok
    return time.perf_counter() - t

if __name__ == '__main__':
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    starts, sleeps, loops = [], [], []
    with SubprocessKernel('python3') as k:
        for _ in range(n):
            k.restart(); t = time.perf_counter(); k.run('1'); starts.append(time.perf_counter() - t)
            sleeps.append(stop_then_next(k, 'import time; time.sleep(100)'))
            loops.append(stop_then_next(k, 'sum(range(10**13))'))
    inproc = []
    def server():
        with InProcessKernel() as k:
            k.run('1')
            inproc.extend(stop_then_next(k, 'import time; time.sleep(100)') for _ in range(n))
    serve_beside(server)
    ms, mz, ml, mi = (statistics.median(x) for x in (starts, sleeps, loops, inproc))
    print(f'kernel start + first cell:                      median {ms:.2f} s  {["%.2f" % t for t in starts]}  (baseline)')
    print(f'time.sleep(100), timeout 1, then the next cell:  median {mz:.2f} s  {["%.2f" % t for t in sleeps]}  (target <= 3 s)')
    print(f'C loop, timeout 1, kill, then the next cell:     median {ml:.2f} s  {["%.2f" % t for t in loops]}  (target <= 3 s; '
          f'{ml - 1 - 0.5:.2f} s after timeout + grace, {(ml - 1.5) / ms:.2f}x a kernel start)')
    print(f'in-process time.sleep(100), timeout 1, next cell: median {mi:.2f} s  {["%.2f" % t for t in inproc]}  (target <= 3 s; '
          f'{mi / mz:.2f}x the python3 kernel)')
