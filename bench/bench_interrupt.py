"""Interrupt latency of InProcessKernel: time from `interrupt()` to `run()` returning.

1. A pure-Python busy loop on the shell's loop thread. Target: 200 ms. Baselines measured in the same run: a bare
   execnb `CaptureShell.run('1+1')` round trip, and the same cell through `InProcessKernel.run`. Also the overshoot of
   `timeout=` past its deadline.
2. `time.sleep(60)` interrupted in-process as the servers run it (`headlesnb mcp`/`serve`: their loop in a thread,
   cells handed to the main thread by `serve_beside`), and by a caller on the main thread (`main_thread=True`).
   Target: the run ends within 1 s. Baseline measured in the same run: a python3 kernel process (SubprocessKernel),
   which Jupyter interrupts with SIGINT.
Prints figures; asserts nothing.  Run: python bench/bench_interrupt.py [tries]
"""
import statistics, sys, threading, time

from execnb.shell import CaptureShell

from headlesnb.kernels.inprocess import InProcessKernel
from headlesnb.kernels.mainthread import serve_beside
from headlesnb.kernels.subkernel import SubprocessKernel

TARGET_MS = 200
SLEEP_TARGET_S = 1
TRIES = int(sys.argv[1]) if len(sys.argv) > 1 else 25


def ms(xs): return statistics.median(xs) * 1000


def round_trips(run, n=200):
    run('1+1')  # warm
    ts = []
    for _ in range(n):
        t = time.perf_counter(); run('1+1'); ts.append(time.perf_counter() - t)
    return ts


def interrupt_latency(k):
    "One try: start a busy loop, wait until it spins, interrupt, time until run() returns"
    started, box = threading.Event(), {}
    k.namespace['started'] = started
    th = threading.Thread(target=lambda: box.update(r=k.run('started.set()\nn = 0\nwhile True: n += 1'), t=time.perf_counter()))
    th.start()
    started.wait()
    time.sleep(0.02)  # let it spin
    t0 = time.perf_counter()
    k.interrupt()
    th.join()
    return box['t'] - t0, box['r'].status


def timeout_overshoot(k, timeout=0.2):
    t = time.perf_counter()
    k.run('while True: pass', timeout=timeout)
    return time.perf_counter() - t - timeout


def main_thread_figures(tries):
    "main_thread=True (what `headlesnb run` uses): cells on this thread, stopped by SIGINT, which also ends time.sleep"
    with InProcessKernel(main_thread=True) as k:
        kbase = ms(round_trips(k.run))
        k.run('1/0')  # the first IPython traceback of a process imports its formatting: not what is measured
        def stop(code, timeout=0.2):
            t = time.perf_counter(); r = k.run(code, timeout=timeout); return time.perf_counter() - t - timeout, r.status
        busy = [stop('while True: pass') for _ in range(tries)]
        sleep = [stop('import time\ntime.sleep(100)') for _ in range(tries)]
    return kbase, busy, sleep


SLEEP = 'started.set()\nimport time\ntime.sleep(60)'

def sleep_interrupt(k, tries, started=None):
    """Seconds from `interrupt()` to `run()` returning, for `time.sleep(60)`, `tries` times, with the statuses. The
    interrupt comes 0.1 s after the cell sets `started` (an Event in its namespace), or 1 s after the run began"""
    out = []
    for _ in range(tries):
        ev, box = threading.Event(), {}
        if started is None: k.namespace['started'] = ev
        def stop():
            if started is None: ev.wait(60); time.sleep(0.1)
            else: time.sleep(started)
            box['t0'] = time.perf_counter(); k.interrupt()
        th = threading.Thread(target=stop); th.start()
        r = k.run(SLEEP)
        out.append((time.perf_counter() - box['t0'], r.status)); th.join()
    return out

def subprocess_sleep_interrupt(tries):
    "The same for a python3 kernel process (its `started` does nothing: the interrupt comes 1 s after the run began)"
    with SubprocessKernel('python3') as k:
        k.run('started = type("Started", (), {"set": lambda self: None})()')
        return sleep_interrupt(k, tries, started=1)

def served_sleep_interrupt(tries):
    "In-process, as the servers run cells: run() called from the server's thread, the cell run on the main thread"
    box = {}
    def server():
        with InProcessKernel() as k:
            k.run('1')
            box['r'] = sleep_interrupt(k, tries)
    serve_beside(server)
    return box['r']

def show(name, xs, base=None):
    secs = [x for x, _ in xs]
    med = statistics.median(secs)
    print(f'{name:<58} median {med * 1000:7.1f} ms, max {max(secs) * 1000:7.1f} ms over {len(xs)} tries '
          f'(statuses: {", ".join(sorted({s for _, s in xs}))})' + (f'; {med / base:.2f}x the python3 kernel' if base else ''))
    return med

def sleep_figures(tries):
    base = show('python3 kernel process: interrupt() of time.sleep(60)', subprocess_sleep_interrupt(tries))
    served = show('in-process, cells on the main thread (servers)', served_sleep_interrupt(tries), base)
    with InProcessKernel(main_thread=True) as k:
        k.run('1')
        here = show('in-process, main_thread=True caller on the main thread', sleep_interrupt(k, tries), base)
    print(f'  vs target {SLEEP_TARGET_S} s: in-process run ends {served:.3f} s after the interrupt (servers), {here:.3f} s '
          f'(main-thread caller): {"met" if max(served, here) <= SLEEP_TARGET_S else "MISSED"}')

def main():
    shell = CaptureShell(mpl_format=None)
    base = ms(round_trips(shell.run))
    with InProcessKernel() as k:
        kbase = ms(round_trips(k.run))
        lat, statuses = zip(*[interrupt_latency(k) for _ in range(TRIES)])
        over = [timeout_overshoot(k) for _ in range(max(5, TRIES // 4))]
    med = ms(lat)
    print(f'baseline CaptureShell.run("1+1") round trip:  median {base:.3f} ms')
    print(f'InProcessKernel.run("1+1") round trip:        median {kbase:.3f} ms ({kbase / base:.2f}x CaptureShell)')
    print(f'interrupt() -> run() returns, busy loop:      median {med:.2f} ms, max {max(lat) * 1000:.2f} ms over {TRIES} tries '
          f'(statuses: {", ".join(f"{s} x{statuses.count(s)}" for s in sorted(set(statuses)))})')
    print(f'  vs target {TARGET_MS} ms: {med / TARGET_MS:.3f}x of target ({TARGET_MS / med:.0f}x faster); '
          f'{med / base:.1f}x a bare CaptureShell round trip')
    print(f'timeout=0.2 overshoot past the deadline:      median {ms(over):.2f} ms over {len(over)} tries')
    kbase, busy, sleep = main_thread_figures(max(5, TRIES // 4))
    print(f'main_thread=True: run("1+1") round trip:      median {kbase:.3f} ms ({kbase / base:.2f}x CaptureShell)')
    for name, xs in (('busy loop', busy), ('time.sleep(100)', sleep)):
        print(f'main_thread=True: timeout=0.2 overshoot, {name}: median {ms([x for x, _ in xs]):.2f} ms '
              f'(statuses: {", ".join(sorted({s for _, s in xs}))})')


if __name__ == '__main__':
    main()
    sleep_figures(max(5, TRIES // 5))
