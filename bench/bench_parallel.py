"""Two CPU-bound notebooks on two subprocess kernels: parallel vs serial time (target: at most 0.6x on 2 cores);
and how much a runaway cell in one kernel delays a run in another (target: under 100 ms).

A notebook is 4 cells of `sum(range(3 * 10**7))`, run on a fresh `SubprocessKernel` (start, cells, close). Serial: one
notebook after the other; parallel: both at once, each in its own thread and kernel. Alternated, 3 times each;
medians. Then kernel B's `1+1` is timed alone and while dialog A spins in `while True: pass`. The machine's 2 cores
are shared with other work, which parallel runs feel first."""
import statistics, sys, tempfile, threading, time
from headlesnb.kernels.subkernel import SubprocessKernel
from headlesnb.dialog import DialogManager

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
    "Median time of `1+1` in dialog B, alone and while dialog A runs `while True: pass` (each dialog its own kernel process)"
    with tempfile.TemporaryDirectory() as root, DialogManager(root, kernel='python3') as dm:
        for d in ('a', 'b'): dm.use_dialog(d, mode='create'); dm.execute_code('1', dialog_name=d)
        def lat():
            out = []
            for _ in range(n):
                t = time.perf_counter(); assert dm.execute_code('1+1', dialog_name='b')['status'] == 'ok'; out.append(time.perf_counter() - t)
            return statistics.median(out)
        alone = lat()
        th = threading.Thread(target=dm.execute_code, args=('while True: pass',), kwargs={'timeout': 60, 'dialog_name': 'a'}); th.start()
        time.sleep(0.5)
        busy = lat()
        dm.interrupt('a'); th.join()
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
    print(f"dialog B's 1+1 alone {alone*1e3:.1f} ms, while dialog A spins {busy*1e3:.1f} ms: delay {(busy - alone)*1e3:.1f} ms  (target < 100 ms)")
