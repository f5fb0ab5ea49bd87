"""Interrupt latency of InProcessKernel: time from `interrupt()` to `run()` returning, for a pure-Python busy loop.

Target: 200 ms. Baselines measured in the same run: a bare execnb `CaptureShell.run('1+1')` round trip, and
the same cell through `InProcessKernel.run`. Also the overshoot of `timeout=` past its deadline.
Prints figures; asserts nothing.  Run: python bench/bench_interrupt.py [tries]
"""
import statistics, sys, threading, time

from execnb.shell import CaptureShell

from headlesnb.inprocess import InProcessKernel

TARGET_MS = 200
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


if __name__ == '__main__': main()
