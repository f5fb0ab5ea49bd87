"""Two CPU-bound notebooks on two subprocess kernels: parallel vs serial time (target: at most 0.6x on 2 cores);
and how much a runaway cell in one kernel delays a run in another (target: under 100 ms).

A notebook is 4 cells of `sum(range(3 * 10**7))`, run on a fresh `SubprocessKernel` (start, cells, close). Serial: one
notebook after the other; parallel: both at once, each in its own thread and kernel. Alternated, 3 times each;
medians. Then kernel B's `1+1` is timed alone and while kernel A spins in `while True: pass`. The machine's 2 cores
are shared with other work, which parallel runs feel first."""
import statistics, sys, threading, time
from headlesnb.subkernel import SubprocessKernel

CELLS = ['sum(range(3 * 10**7))'] * 4

def notebook():
    with SubprocessKernel('python3') as k:
        for c in CELLS: assert k.run(c).ok

def serial() -> float:
    t = time.perf_counter(); notebook(); notebook()
    return time.perf_counter() - t

def parallel() -> float:
    t = time.perf_counter()
    ts = [threading.Thread(target=notebook) for _ in range(2)]
    for x in ts: x.start()
    for x in ts: x.join()
    return time.perf_counter() - t

def runaway_delay(n=30) -> tuple:
    with SubprocessKernel('python3') as a, SubprocessKernel('python3') as b:
        a.run('1'); b.run('1')
        def lat():
            out = []
            for _ in range(n):
                t = time.perf_counter(); b.run('1+1'); out.append(time.perf_counter() - t)
            return statistics.median(out)
        alone = lat()
        th = threading.Thread(target=a.run, args=('while True: pass',), kwargs={'timeout': 60}); th.start()
        time.sleep(0.5)
        busy = lat()
        a.interrupt(); th.join()
        return alone, busy

if __name__ == '__main__':
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    ts, tp = [], []
    for _ in range(reps): ts.append(serial()); tp.append(parallel())
    ms, mp = statistics.median(ts), statistics.median(tp)
    print(f'two CPU-bound notebooks, serial:   median {ms:.2f} s  {["%.2f" % t for t in ts]}  (baseline)')
    print(f'two CPU-bound notebooks, parallel: median {mp:.2f} s  {["%.2f" % t for t in tp]}')
    print(f'ratio: {mp / ms:.2f}x serial  (target <= 0.6x on 2 cores)')
    alone, busy = runaway_delay()
    print(f"kernel B's 1+1 alone {alone*1e3:.1f} ms, while kernel A spins {busy*1e3:.1f} ms: delay {(busy - alone)*1e3:.1f} ms  (target < 100 ms)")
