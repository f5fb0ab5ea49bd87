"""InProcessKernel with real shells (nothing mocked): serialised runs, stopping code, capped outputs,
execution counts, process state given back to the host, stuck-in-C reporting, and memory freed on close."""
import base64, gc, os, re, sys, threading, time, weakref

import psutil
import pytest

from headlesnb.errors import BadArgumentError, KernelError
from headlesnb.kernels.kernel import RunResult
from headlesnb.utils import strip_ansi
from headlesnb.kernels.inprocess import RUN_LOCK, FifoLock, InProcessKernel

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def kernel():
    k = InProcessKernel()
    yield k
    k.close()


def text(r: RunResult, kind='stream') -> str:
    "All text of outputs of `kind` (stream text, or execute_result's text/plain)"
    if kind == 'stream': return ''.join(''.join(o['text']) for o in r.outputs if o['output_type'] == 'stream')
    return ''.join(''.join(o['data']['text/plain']) for o in r.outputs if o['output_type'] == kind)


def value(r: RunResult) -> str: return text(r, 'execute_result')


def run_in_thread(k, code, **kw):
    "Start `k.run(code)` in a thread; returns (thread, box) with box['r'] the RunResult once joined"
    box = {}
    t = threading.Thread(target=lambda: box.update(r=k.run(code, **kw), t=time.monotonic()))
    t.start()
    return t, box


def wait_executing(k):
    "Wait until `k` is executing a cell (interrupt() can only say yes then; the cell must be a long one)"
    while k._current is None or not k._current.running: time.sleep(0.005)


def test_construction_is_lazy_and_args_checked(tmp_path):
    k = InProcessKernel(mpl_format='png')
    assert k._shell is None and not k.busy and not k.closed and k.execution_count == 0
    assert not RUN_LOCK.locked()
    k.close()
    with pytest.raises(BadArgumentError, match='mpl_format'): InProcessKernel(mpl_format="png'); import os; '")
    with pytest.raises(BadArgumentError, match='output_limit'): InProcessKernel(output_limit=0)
    with pytest.raises(BadArgumentError, match='not a folder'): InProcessKernel(cwd=tmp_path / 'missing')
    with InProcessKernel() as k:
        with pytest.raises(BadArgumentError, match='timeout'): k.run('1', timeout=0)
        with pytest.raises(BadArgumentError, match='code'): k.run(b'1')


def test_run_lock_serves_waiters_in_arrival_order():
    lock, order = FifoLock(), []
    lock.acquire()
    ts = [threading.Thread(target=lambda i=i: (lock.acquire(), order.append(i), lock.release())) for i in range(5)]
    for i, t in enumerate(ts):
        t.start()
        while len(lock._queue) <= i: time.sleep(0.001)  # queued before the next one starts
    lock.release()
    for t in ts: t.join()
    assert order == list(range(5)) and not lock.locked()


def test_two_threads_two_kernels_never_cross_outputs():
    ks = [InProcessKernel(), InProcessKernel()]
    results = {0: [], 1: []}
    def work(j):
        for i in range(100): results[j].append(ks[j].run(f'print("k{j}", {i})\n{i} * 10'))
    ts = [threading.Thread(target=work, args=(j,)) for j in (0, 1)]
    for t in ts: t.start()
    for t in ts: t.join()
    for j in (0, 1):
        for i, r in enumerate(results[j]):
            assert r.status == 'ok', r.outputs
            assert text(r) == f'k{j} {i}\n' and value(r) == str(i * 10)
            assert r.execution_count == i + 1
    assert not RUN_LOCK.locked()
    for k in ks: k.close()


def test_busy_loop_timeout_stops_it_within_2s_and_kernel_goes_on(kernel):
    kernel.run('x = 41')
    kernel.run('1/0')  # the first IPython traceback of a process imports its formatting (~0.6 s): not what is measured
    t0 = time.monotonic()
    r = kernel.run('while True: pass', timeout=1)
    assert time.monotonic() - t0 < 30  # (without the timeout the loop never ends)
    assert (r.status, r.stuck, r.ok) == ('timeout', False, False)
    err = r.outputs[-1]
    assert err['output_type'] == 'error' and err['ename'] == 'ExecutionTimeout'
    assert 'timed out after 1s' in err['evalue'] and 'interrupted' in err['evalue']
    r = kernel.run('x + 1')
    assert r.ok and value(r) == '42' and r.execution_count == 4


def test_timeout_keeps_output_so_far_and_where_it_stopped(kernel):
    r = kernel.run('print("before")\nn = 0\nwhile True:\n    n += 1', timeout=0.3)
    assert (r.status, r.stuck) == ('timeout', False) and text(r) == 'before\n'
    err = r.outputs[-1]
    assert err['ename'] == 'ExecutionTimeout' and 'while True' in strip_ansi(''.join(err['traceback']))  # where it was stopped (IPython's colours)
    assert value(kernel.run('n > 0')) == 'True'


def test_awaiting_cell_is_cancelled_on_timeout(kernel):
    r = kernel.run('import asyncio\nprint("waiting")\nawait asyncio.sleep(30)', timeout=0.5)
    assert (r.status, r.stuck) == ('timeout', False) and text(r) == 'waiting\n'
    assert kernel.run('await asyncio.sleep(0.01)\n7').ok


def test_interrupt_from_another_thread(kernel):
    assert kernel.interrupt() is False  # nothing running
    t, box = run_in_thread(kernel, 'n = 0\nwhile True: n += 1')
    wait_executing(kernel)
    assert kernel.busy
    assert kernel.interrupt() is True
    t.join(10)
    r = box['r']
    assert (r.status, r.stuck) == ('interrupted', False)
    assert r.outputs[-1]['ename'] == 'KeyboardInterrupt'
    assert not kernel.busy and kernel.interrupt() is False
    r = kernel.run('n > 0')
    assert r.ok and value(r) == 'True'


def test_restart_and_close_stop_a_running_cell():
    k = InProcessKernel()
    t, box = run_in_thread(k, 'x = 1\nwhile True: pass')
    wait_executing(k)
    k.restart()
    t.join(10)
    assert box['r'].status == 'interrupted' and k.execution_count == 0
    r = k.run('"x" in globals()')
    assert value(r) == 'False' and r.execution_count == 1
    t, box = run_in_thread(k, 'while True: pass')
    wait_executing(k)
    k.close()
    t.join(10)
    assert box['r'].status == 'interrupted' and k.closed


def test_interrupt_storm_never_kills_the_loop_or_leaks_into_later_cells(kernel):
    "Interrupts arriving at any moment (also just as cells end) only ever stop the cell they hit"
    stop = threading.Event()
    def storm():
        while not stop.is_set(): kernel.interrupt()
    t = threading.Thread(target=storm); t.start()
    try: statuses = {kernel.run(f'y = {i}\nsum(range(200))').status for i in range(300)}
    finally: stop.set(); t.join()
    assert statuses <= {'ok', 'interrupted'}
    assert kernel._shell._thread.is_alive()
    for _ in range(20): assert kernel.run('y').ok


class Finalised:
    "Garbage in a reference cycle: only the collector frees it, running `__del__` in whichever thread allocates then"
    def __init__(self): self.me = self
    def __del__(self): sum(range(1000))


class Failing(Finalised):
    def __del__(self): 1 / 0


def test_an_interrupt_between_runs_stops_no_later_run(kernel):
    "An interrupt that comes as a run ends (its cell over, the kernel not yet let go) is not kept for the next run"
    kernel.run('1')
    stale = 0
    for _ in range(200):
        stop = threading.Event()
        def storm():
            while not stop.is_set(): kernel.interrupt()
        t = threading.Thread(target=storm); t.start()
        try: statuses = [kernel.run('y = 1').status for _ in range(3)]
        finally: stop.set(); t.join()
        assert set(statuses) <= {'ok', 'interrupted'}
        stale += kernel.run('y').status != 'ok'
    assert stale == 0, f'{stale} of 200 runs after an interrupt storm ended were interrupted'


def test_interrupts_landing_in_finalisers_are_sent_again_not_reported(kernel, monkeypatch):
    "The collector runs finalisers in the cell's thread: an interrupt landing there is retried, never printed as 'Exception ignored'"
    reported = []
    monkeypatch.setattr(sys, 'unraisablehook', reported.append)
    stop = threading.Event()
    def garbage():
        while not stop.is_set():
            for _ in range(100): Finalised()
            time.sleep(0.001)
    def storm():
        while not stop.is_set(): kernel.interrupt()
    ts = [threading.Thread(target=garbage), threading.Thread(target=storm)]
    for t in ts: t.start()
    try: statuses = [kernel.run(f'y = {i}\nz = sum(range(200))').status for i in range(1000)]
    finally:
        stop.set()
        for t in ts: t.join()
    assert set(statuses) <= {'ok', 'interrupted'} and 'interrupted' in statuses
    assert not [u for u in reported if isinstance(u.exc_value, KeyboardInterrupt)], reported[:3]
    gc.collect()
    Failing(); gc.collect()  # a finaliser's own error still reaches the host's hook
    assert ZeroDivisionError in [type(u.exc_value) for u in reported]
    assert [kernel.run('y').status for _ in range(20)] == ['ok'] * 20


@pytest.mark.parametrize('interrupted', [False, True])
def test_tracers_still_work_after_runs_and_interrupts(interrupted):
    "Debuggers, coverage and profilers keep working: no async-exception flag is left behind (CPython 3.11 hangs on one)"
    import subprocess
    script = f"""
import sys
from headlesnb.kernels.inprocess import InProcessKernel
k = InProcessKernel()
k.run('x = 1')
if {interrupted}: assert k.run('while True: pass', timeout=0.3).status == 'timeout'
assert k.run('x + 1').status == 'ok'
def f(): return sum(range(10))
sys.settrace(lambda *a: None); f(); sys.settrace(None)
sys.setprofile(lambda *a: None); f(); sys.setprofile(None)
print('traced ok')
"""
    r = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and 'traced ok' in r.stdout, r.stderr[-2000:]


def test_huge_output_is_capped_with_marker(kernel):
    r = kernel.run('print("a" * 1_000_000 + "b" * 1_345_678 + "END")')
    assert r.ok and text(r).rstrip().endswith('bEND') and len(text(r)) > 2_345_000  # under the default cap (OUTPUT_LIMIT, 10 MB): kept whole
    with InProcessKernel(output_limit=100_000) as k: r = k.run('print("a" * 1_000_000 + "b" * 1_345_678 + "END")')
    s = text(r)
    assert r.ok and len(s) < 100_200
    assert '[output truncated: 2,245,682 more characters]' in s  # 2,345,682 printed (with the newline)
    assert s.startswith('a' * 1000) and s.rstrip().endswith('bEND')
    with InProcessKernel(output_limit=1000) as k:
        r = k.run('"x" * 5000')
        assert '[output truncated: 4,002 more characters]' in value(r)  # the repr has 5002 characters
        r = k.run('raise ValueError("v" * 5000)')
        assert r.status == 'error' and 'more characters' in r.outputs[-1]['evalue']
        assert len(r.outputs[-1]['evalue']) < 1100


def test_rich_outputs_kept_as_in_jupyter(kernel):
    r = kernel.run('from IPython.display import display, HTML, Markdown, JSON\n'
                   'display(HTML("<b>hi</b>")); display(Markdown("# T")); display(JSON({"a": 1}))')
    data = [o['data'] for o in r.outputs if o['output_type'] == 'display_data']
    assert data[0]['text/html'] == ['<b>hi</b>'] and data[1]['text/markdown'] == ['# T']
    assert data[2]['application/json'] == {'a': 1}


def test_execution_count_sequence_and_restart(kernel):
    counts = [kernel.run(c).execution_count for c in ('a = 1', '1/0', 'a', 'def f(:')]
    assert counts == [1, 2, 3, 4] and kernel.execution_count == 4
    assert kernel.run('').execution_count is None and kernel.execution_count == 4
    kernel.restart()
    assert kernel.execution_count == 0
    r = kernel.run('a')
    assert r.status == 'error' and r.outputs[-1]['ename'] == 'NameError' and r.execution_count == 1
    assert kernel.run('2').execution_count == 2


def test_os_chdir_in_a_cell_breaks_nothing(tmp_path):
    host = os.getcwd()
    a, b = tmp_path / 'a', tmp_path / 'b'
    a.mkdir(); b.mkdir(); (a / 'data.txt').write_text('in a')
    with InProcessKernel(cwd=a) as ka, InProcessKernel(cwd=b) as kb:
        assert value(ka.run('open("data.txt").read()')) == "'in a'"  # the kernel starts in its cwd
        assert value(kb.run('import os; os.getcwd()')) == repr(str(b))
        ka.run(f'import os; os.chdir({str(tmp_path)!r})')
        assert os.getcwd() == host  # the host keeps its cwd
        assert value(ka.run('os.getcwd()')) == repr(str(tmp_path))  # the kernel keeps the cell's
        assert value(kb.run('os.getcwd()')) == repr(str(b))  # other kernels are not moved
        ka.run(f'os.mkdir("gone"); os.chdir("gone"); os.rmdir({str(tmp_path / "gone")!r})')  # cwd deleted
        assert ka.run('print("still fine")').ok and os.getcwd() == host
        assert str(a) in sys.path


def test_process_state_given_back_to_host(kernel):
    from IPython.core.interactiveshell import InteractiveShell
    main, inst, out = sys.modules['__main__'], InteractiveShell._instance, sys.stdout
    r = kernel.run('import sys\nclass C: pass\nimport pickle\nprint(pickle.loads(pickle.dumps(C())).__class__.__name__)\n'
                   'get_ipython() is __import__("IPython").get_ipython()')
    assert r.ok and text(r) == 'C\n' and value(r) == 'True'
    assert sys.modules['__main__'] is main and InteractiveShell._instance is inst and sys.stdout is out


def test_py_magic_runs_body_as_python(kernel):
    r = kernel.run('%%py\nimport math\nprint("hi")\nmath.sqrt(16)')
    assert r.ok and text(r) == 'hi\n' and value(r) == '4.0' and r.execution_count == 1
    assert kernel.run('%%py\nraise KeyError("k")').outputs[-1]['ename'] == 'KeyError'


def test_stuck_in_c_is_reported_and_recovered():
    host_out = sys.stdout
    ka, kb, other = InProcessKernel(), InProcessKernel(), InProcessKernel()
    ka.stop_grace = kb.stop_grace = 0.3
    ka.run('import time\nz = 5')
    ra, rb = [k.run('import time\nprint("sleeping")\ntime.sleep(1.5)', timeout=0.2) for k in (ka, kb)]
    for r in (ra, rb):
        assert (r.status, r.stuck) == ('timeout', True)
        assert text(r) == 'sleeping\n'  # what it printed before it got stuck
        assert 'could not be interrupted' in r.outputs[-1]['evalue'] and 'restart' in r.outputs[-1]['evalue']
    assert sys.stdout is host_out  # the stuck cell's capture is not left installed
    with pytest.raises(KernelError, match='stuck'): ka.run('1')
    kb.restart()  # recovers at once: a new shell, the stuck thread abandoned
    assert kb.run('1 + 1').ok and kb.execution_count == 1
    # another kernel runs (and captures) while the stuck sleeps end and their interrupts land
    r = other.run('import time\nfor i in range(20):\n    print(i)\n    time.sleep(0.1)')
    assert r.ok and text(r) == ''.join(f'{i}\n' for i in range(20))
    # ka's sleep has returned: the kernel works again, namespace kept, no restart needed
    r = ka.run('z')
    assert r.ok and value(r) == '5'
    for k in (ka, kb, other): k.close()


def test_a_cell_may_run_other_kernels_but_not_its_own(kernel):
    "A notebook may drive in-process kernels itself (nested runs); running, restarting or closing its own kernel would deadlock"
    other = InProcessKernel()
    kernel.namespace.update(me=kernel, other=other)
    r = kernel.run('print("outer")\nr = other.run("print(\'inner\')\\n6 * 7")\nprint("after")\nr.outputs')
    assert r.ok and text(r) == 'outer\nafter\n' and "'text': ['inner\\n']" in value(r) and "['42']" in value(r)
    assert value(kernel.run('import asyncio\n(await other.arun("1 + 1")).outputs[0]["data"]["text/plain"]')) == "['2']"
    for call in ('me.run("1")', 'me.restart()', 'me.close()'):
        r = kernel.run(call)
        assert r.status == 'error' and r.outputs[-1]['ename'] == 'KernelError', call
    r = kernel.run('other.run("while True: pass", timeout=0.3).status')  # a nested timeout works
    assert value(r) == "'timeout'"
    assert kernel.run('me.interrupt()\nwhile True: pass').status == 'interrupted'  # asking is fine: it stops this very cell
    assert kernel.run('other.close()').ok and other.closed
    assert not RUN_LOCK.locked()


def test_close_frees_and_refuses():
    k = InProcessKernel()
    k.run('big = bytearray(10_000_000)')
    shell = weakref.ref(k._shell)
    thread = k._shell._thread
    k.close(); k.close()
    assert k.closed
    for f in (lambda: k.run('1'), k.restart, lambda: k.complete('a'), lambda: k.inspect('a'), lambda: k.namespace):
        with pytest.raises(KernelError, match='closed'): f()
    assert k.interrupt() is False
    thread.join(5)
    gc.collect()
    assert not thread.is_alive() and shell() is None


def test_fifty_kernels_do_not_leak():
    proc = psutil.Process()
    def cycle():
        k = InProcessKernel()
        assert k.run('data = list(range(100_000))\nlen(data)').ok
        ref = weakref.ref(k._shell)
        k.close()
        return ref
    cycle(); gc.collect()
    before = proc.memory_info().rss
    refs = [cycle() for _ in range(50)]
    time.sleep(0.1); gc.collect()
    grown = (proc.memory_info().rss - before) / 2**20
    assert grown < 10, f'RSS grew {grown:.1f} MiB over 50 kernels'
    assert all(r() is None for r in refs)


def test_matplotlib_png_is_an_image_output_never_cut():
    "A PNG is never cut (a cut one is broken): whole under the per-output limit, left out whole over it, its text/plain saying so"
    for limit in (1_000_000, 1000):
        with InProcessKernel(mpl_format='png', output_limit=limit) as k:
            r = k.run('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]);')
            [fig] = [o for o in r.outputs if o['output_type'] == 'display_data']
            assert r.ok, r
            if limit > 1000: assert base64.b64decode(fig['data']['image/png']).startswith(b'\x89PNG') and len(fig['data']['image/png']) > 1000
            else:
                assert 'image/png' not in fig['data'], fig['data'].keys()
                assert re.search(r'\[image/png output of [\d,]+ characters removed: over the 1,000 characters per-output limit\]', ''.join(fig['data']['text/plain']))


def test_complete_inspect_and_namespace(kernel):
    kernel.namespace['tool'] = lambda x: x  # before the shell starts: becomes part of it
    kernel.run('def my_function(a, b=2):\n    "Adds."\n    return a + b\nimport os')
    assert kernel.complete('my_fu') == ['my_function'] and 'path' in kernel.complete('os.pa')
    assert kernel.complete('my_fu + 1', cursor_pos=5) == ['my_function']
    doc = kernel.inspect('my_function')
    assert 'my_function(a, b=2)' in doc and 'Adds.' in doc and '\x1b' not in doc
    assert kernel.inspect('nothing_here') is None and kernel.inspect('1 +') is None
    assert 'tool' in kernel.namespace and 'my_function' in kernel.namespace
    with pytest.raises(BadArgumentError): kernel.complete('abc', cursor_pos=9)


def test_arun_alongside_blocking_runs_never_crosses_outputs():
    "Awaited runs on one kernel while a thread runs cells on another: RUN_LOCK contention falls back, results stay apart"
    import asyncio
    ks = [InProcessKernel(), InProcessKernel()]
    for k in ks: k.run('0')
    blocking = []
    t = threading.Thread(target=lambda: blocking.extend(ks[1].run(f'print("b", {i})\n{i}') for i in range(100)))
    async def main():
        t.start()
        return [await ks[0].arun(f'print("a", {i})\n{i}') for i in range(100)]
    awaited = asyncio.run(main())
    t.join()
    for name, rs in (('a', awaited), ('b', blocking)):
        assert [(text(r), value(r), r.execution_count) for r in rs] == [(f'{name} {i}\n', str(i), i + 2) for i in range(100)]
    assert not RUN_LOCK.locked() and not any(k.busy for k in ks)
    for k in ks: k.close()


def test_concurrent_aruns_on_one_kernel_run_one_at_a_time(kernel):
    import asyncio
    kernel.run('log = []')
    async def main():
        code = 'import time\nlog.append(("start", {i})); t = time.time()\nwhile time.time() - t < 0.05: pass\nlog.append(("end", {i}))'
        return await asyncio.gather(*(kernel.arun(code.format(i=i)) for i in range(4)))
    rs = asyncio.run(main())
    assert all(r.ok for r in rs)
    log = kernel.namespace['log']
    assert len(log) == 8 and all(log[k][0] == 'start' and log[k + 1] == ('end', log[k][1]) for k in range(0, 8, 2))


def test_event_loop_keeps_running_during_arun_and_interrupt_stops_it(kernel):
    import asyncio
    kernel.run('0')
    async def main():
        ticks = 0
        async def ticker():
            nonlocal ticks
            while True: await asyncio.sleep(0.01); ticks += 1
        tick = asyncio.ensure_future(ticker())
        run = asyncio.ensure_future(kernel.arun('while True: pass', timeout=30))
        await asyncio.sleep(0.5)
        assert kernel.interrupt()
        r = await run
        tick.cancel()
        return r, ticks
    r, ticks = asyncio.run(main())
    assert r.status == 'interrupted' and ticks > 10
    assert kernel.run('1').ok


def test_cancelled_arun_stops_the_cell_and_frees_the_kernel(kernel):
    import asyncio
    kernel.run('0')
    async def main():
        task = asyncio.ensure_future(kernel.arun('import time\nwhile True: time.sleep(0.001)'))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError): await task
    asyncio.run(main())
    assert not kernel.busy and not RUN_LOCK.locked()
    assert value(kernel.run('21 * 2')) == '42'


def test_blocking_calls_on_a_loop_where_arun_waits_raise_instead_of_hanging(kernel):
    "A blocking run/restart/close on the event loop thread while an arun holds the locks there would wait for ever"
    import asyncio
    other = InProcessKernel()
    kernel.run('0'); other.run('0')
    async def main():
        task = asyncio.ensure_future(kernel.arun('import time\nt = time.time()\nwhile time.time() - t < 1: pass'))
        await asyncio.sleep(0.2)
        for call in (lambda: other.run('1'), kernel.restart, kernel.close):
            with pytest.raises(KernelError, match='event loop'): call()
        return await task
    assert asyncio.run(main()).ok
    assert value(other.run('2')) == '2' and not kernel.closed
    other.close()


# ---- Jupyter's behaviour (issue 14): main-thread runs, exit(), atexit, streams, nesting from threads ----

def test_main_thread_mode_runs_cells_here_with_signals_and_gives_sigint_back():
    import signal
    host = signal.getsignal(signal.SIGINT)
    with InProcessKernel(main_thread=True) as k:
        r = k.run('import signal, threading\nold = signal.signal(signal.SIGUSR1, lambda *a: None)\n'
                  'threading.current_thread() is threading.main_thread()')
        assert r.ok and value(r) == 'True'
        assert signal.getsignal(signal.SIGINT) is host  # ours only while a cell runs
        t, box = run_in_thread(k, 'threading.current_thread() is threading.main_thread()')  # asked from another thread
        t.join(10)
        assert value(box['r']) == 'False'


def test_main_thread_timeout_stops_time_sleep_and_awaits():
    with InProcessKernel(main_thread=True) as k:
        k.run('1/0')  # the first IPython traceback of a process imports its formatting (~0.6 s): not what is measured
        for code in ('import time\nprint("sleeping")\ntime.sleep(30)', 'import asyncio\nawait asyncio.sleep(30)', 'while True: pass'):
            t0 = time.monotonic()
            r = k.run(code, timeout=0.5)
            assert time.monotonic() - t0 < 3, code
            assert (r.status, r.stuck, r.outputs[-1]['ename']) == ('timeout', False, 'ExecutionTimeout'), code
        assert text(r) == '' and value(k.run('6 * 7')) == '42'


def test_main_thread_interrupt_from_another_thread():
    with InProcessKernel(main_thread=True) as k:
        def later(): wait_executing(k); time.sleep(0.2); k.interrupt()
        th = threading.Thread(target=later); th.start()
        r = k.run('import time\nwhile True: time.sleep(0.5)')
        th.join()
        assert r.status == 'interrupted' and r.outputs[-1]['ename'] == 'KeyboardInterrupt'
        assert k.run('1').ok


def test_exit_ends_the_kernel_as_it_ends_an_ipykernel(tmp_path, kernel):
    """exit() finishes its cell (ipykernel's ask_exit payload); an ipykernel stops its loop 0.1 s later and its process ends:
    a run that follows at once still runs (as nbclient's next cells do), a later one finds the kernel dead"""
    flag = tmp_path / 'flag'
    kernel.run(f'import atexit\nx = "kept"\natexit.register(lambda: open({str(flag)!r}, "w").write(x))')
    r = kernel.run('print("bye"); exit(); print("after")')
    assert r.ok and text(r) == 'bye\nafter\n' and [p['source'] for p in r.payload] == ['ask_exit']
    r = kernel.run('x')
    assert value(r) == "'kept'" and r.execution_count == 3 and not flag.exists()
    time.sleep(0.3)
    r = kernel.run('x')
    assert r.status == 'dead' and r.outputs[-1]['ename'] == 'DeadKernelError' and 'exit()' in r.outputs[-1]['evalue']
    assert flag.read_text() == 'kept'  # its exit handlers ran as the kernel ended, namespace still there
    r = kernel.run('"x" in globals()')
    assert value(r) == 'False' and r.execution_count == 1  # a new kernel


def test_close_runs_the_kernels_atexit_handlers_and_not_the_hosts(tmp_path):
    import atexit
    k = InProcessKernel()
    k.run(f'import atexit\natexit.register(lambda: open({str(tmp_path / "a")!r}, "w").write("a"))')
    assert atexit.register is not k._atexit.register  # given back after the run
    k.close()
    assert (tmp_path / 'a').read_text() == 'a'


def test_process_state_is_the_kernels_during_a_run_and_the_hosts_after(kernel):
    import getpass, builtins
    env, argv, inp, gp = dict(os.environ), sys.argv, builtins.input, getpass.getpass
    r = kernel.run('import os, sys\nos.environ["TERM"], os.path.basename(sys.argv[0]), sys.stdout.encoding, sys.stdout.isatty()')
    assert value(r) == "('xterm-color', 'ipykernel_launcher.py', 'UTF-8', False)"
    r = kernel.run('sys.stdout.fileno(), sys.stderr.fileno()')  # the process's own, as ipykernel's (watching them) is its process's
    assert value(r) == '(1, 2)'
    r = kernel.run('import getpass\ngetpass.getpass()')
    assert r.outputs[-1]['ename'] == 'StdinNotImplementedError' and 'getpass was called' in r.outputs[-1]['evalue']
    assert dict(os.environ) == env and sys.argv is argv and builtins.input is inp and getpass.getpass is gp


def test_a_logging_handler_made_in_one_cell_writes_into_later_cells(kernel):
    kernel.run('import logging\nlog = logging.getLogger("hnb-test")\nlog.addHandler(logging.StreamHandler())\nlog.propagate = False')
    r = kernel.run('log.warning("later")\nprint("out")')
    assert [(o['name'], o['text']) for o in r.outputs] == [('stderr', ['later\n']), ('stdout', ['out\n'])]


def test_display_update_reaches_an_earlier_cell_of_the_same_kernel(kernel):
    first = kernel.run('display("v1", display_id="d")')
    r = kernel.run('from IPython.display import update_display\nupdate_display("v2", display_id="d")')
    assert r.outputs == [] and first.outputs[0]['data']['text/plain'] == ["'v2'"]


def test_output_limit_none_keeps_everything():
    with InProcessKernel(output_limit=None) as k:
        assert len(text(k.run('print("x" * 300_000)'))) == 300_001
    with pytest.raises(BadArgumentError, match='output_limit'): InProcessKernel(output_limit=True)


def test_a_thread_started_by_a_cell_may_run_other_kernels_while_the_cell_waits(kernel):
    other = InProcessKernel()
    kernel.namespace['other'] = other
    r = kernel.run('import threading\nres = []\n'
                   't = threading.Thread(target=lambda: res.extend(other.run(f"{i} * 2").outputs[0]["data"]["text/plain"] for i in range(5)))\n'
                   't.start(); t.join(30)\nres')
    assert r.ok and value(r) == "[['0'], ['2'], ['4'], ['6'], ['8']]"
    assert other.run('1').ok and not RUN_LOCK.locked()  # later, from the host: an ordinary run
    other.close()
