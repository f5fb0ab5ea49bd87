"""`headlesnb run --cluster` when the batch lets go of its notebooks early, against real `dask scheduler`/`dask worker`
processes: a second Ctrl-C (the batch does not wait for the runs it stopped), a scheduler that goes away mid-batch, and
the batch killed: no run whose result no one waits for goes on on a worker."""
import json, os, re, signal, subprocess, time
from pathlib import Path
import nbformat, pytest
from test_run_cli import _default_sigint, mk_nb
from test_run_pipeline import HB, LOOPBACK_HTTP, _wait_workers, free_port, stop, wait_port

@pytest.fixture
def cluster(tmp_path):
    "A `dask scheduler` and two `dask worker` processes (no nanny, one thread each): the address and the scheduler; stopped by PID"
    pytest.importorskip('distributed')
    port, env = free_port(), {**os.environ, 'DASK_DISTRIBUTED__WORKER__DAEMON': 'False'}
    sched = subprocess.Popen(['dask', 'scheduler', '--host', '127.0.0.1', '--port', str(port), '--no-dashboard', '--no-show', *LOOPBACK_HTTP],
                             stdout=subprocess.DEVNULL, stderr=open(tmp_path / 'scheduler.log', 'w'), env=env)
    procs = [sched]
    try:
        wait_port(port, sched, 'dask scheduler')
        procs += [subprocess.Popen(['dask', 'worker', f'tcp://127.0.0.1:{port}', '--host', '127.0.0.1', '--nthreads', '1', '--no-nanny',
                                    '--no-dashboard', *LOOPBACK_HTTP], stdout=subprocess.DEVNULL, stderr=open(tmp_path / f'worker{i}.log', 'w'), env=env)
                  for i in range(2)]
        _wait_workers(f'tcp://127.0.0.1:{port}', 2)
        yield f'tcp://127.0.0.1:{port}', sched
    finally:
        for p in reversed(procs): stop(p)

def slow_nb(tmp_path, name:str):
    "A notebook that says it started, ticks into a file for 30 s, and takes 2 s to stop once interrupted"
    tick = tmp_path / f'{name}.tick'
    return mk_nb(tmp_path / f'{name}.ipynb', f'open({str(tmp_path / (name + ".started"))!r}, "w").close()',
                 f'import time\ntry:\n    for i in range(60):\n        open({str(tick)!r}, "a").write(".")\n        time.sleep(0.5)\n'
                 f'except KeyboardInterrupt:\n    time.sleep(2); raise', 'print("end")')

def start_batch(tmp_path, address:str, names:list):
    "`headlesnb run` of the notebooks `names` (the slow ones made, the others printing ok) on `address`, once both slow ones have started"
    nbs = [slow_nb(tmp_path, n) if n.startswith('slow') else mk_nb(tmp_path / f'{n}.ipynb', 'print("ok")') for n in names]
    p = subprocess.Popen([*HB, *nbs, '--output-dir', tmp_path / 'out', '--cluster', address, '--summary', tmp_path / 's.jsonl'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, preexec_fn=_default_sigint)
    end = time.monotonic() + 60
    while not all((tmp_path / f'{n}.tick').exists() for n in names if n.startswith('slow')) and p.poll() is None and time.monotonic() < end:
        time.sleep(0.1)
    time.sleep(1)
    return p

def finish(p):
    try: return p.communicate(timeout=60)
    finally:
        if p.poll() is None: p.kill(); p.wait()

def statuses(tmp_path) -> dict:
    return {Path(s['input']).stem: (s['status'], s['exit_code']) for s in map(json.loads, (tmp_path / 's.jsonl').read_text().splitlines())}

def written(path:Path, within:float=15):
    "The notebook at `path` once its run has written it for the last time (a worker may do so after the batch ended)"
    end = time.monotonic() + within
    while time.monotonic() < end:
        if path.exists() and (nb := nbformat.read(path, as_version=4)).metadata.papermill.end_time: return nb
        time.sleep(0.2)
    raise AssertionError(f'{path} was not written in full within {within}s')

def test_a_second_ctrl_c_reports_the_stopped_notebooks_as_interrupted_not_as_not_run(cluster, tmp_path):
    address, _ = cluster
    p = start_batch(tmp_path, address, ['slowA', 'slowB', 'later'])
    p.send_signal(signal.SIGINT); time.sleep(0.3); p.send_signal(signal.SIGINT)  # (the runs take 2 s to stop: the batch is waiting)
    out, err = finish(p)
    assert p.returncode == 130, err
    assert statuses(tmp_path) == {'slowA': ('interrupted', 130), 'slowB': ('interrupted', 130), 'later': ('not run', 2)}, err
    for n in ('slowA', 'slowB'):
        assert f'{n}.ipynb  interrupted' in out and f'{n}.ipynb: interrupted' in err, out
        assert 'which writes what ran; the batch did not wait for it: a second Ctrl-C' in err, err
        nb = written(tmp_path / 'out' / f'{n}.ipynb')  # what ran, written by the run on its worker
        assert [c.metadata.papermill.status for c in nb.cells] == ['completed', 'failed', 'pending']
        assert nb.cells[1].outputs[-1]['ename'] == 'KeyboardInterrupt'
    assert 'later.ipynb  not run' in out and not (tmp_path / 'out' / 'later.ipynb').exists(), out

def test_a_scheduler_lost_mid_batch_stops_the_runs_on_the_workers_and_says_so(cluster, tmp_path):
    address, sched = cluster
    p = start_batch(tmp_path, address, ['slowA', 'slowB', 'later'])
    sched.send_signal(signal.SIGTERM)
    out, err = finish(p)
    assert p.returncode == 1, err
    assert statuses(tmp_path) == {'slowA': ('lost', 1), 'slowB': ('lost', 1), 'later': ('lost', 2)}, err
    assert 'Traceback' not in err and 'distributed' not in err, err  # (one line per notebook, no Dask log)
    assert err.count(f'the batch lost the Dask scheduler {address} while it ran on tcp://') == 2, err
    assert re.search(rf'later\.ipynb: lost, [0-9.]+s \(the batch lost the Dask scheduler {re.escape(address)} before it started: nothing ran\)', err), err  # (no -> OUTPUT: nothing went there)
    for n in ('slowA', 'slowB'):  # each worker, left without its scheduler, stopped its run, which wrote what ran
        nb = written(tmp_path / 'out' / f'{n}.ipynb')
        assert [c.metadata.papermill.status for c in nb.cells] == ['completed', 'failed', 'pending']
        size = (tmp_path / f'{n}.tick').stat().st_size
        time.sleep(1)
        assert (tmp_path / f'{n}.tick').stat().st_size == size  # no run left going on the worker
    assert not (tmp_path / 'out' / 'later.ipynb').exists()

def test_a_batch_killed_mid_run_leaves_no_run_going_on_the_workers(cluster, tmp_path):
    "SIGKILL of `headlesnb run` (a CI job's timeout): the scheduler drops its tasks, and each worker stops its run, which writes what ran"
    address, _ = cluster
    p = start_batch(tmp_path, address, ['slowA', 'slowB'])
    p.kill(); finish(p)
    for n in ('slowA', 'slowB'):
        nb = written(tmp_path / 'out' / f'{n}.ipynb')
        assert [c.metadata.papermill.status for c in nb.cells] == ['completed', 'failed', 'pending']
        size = (tmp_path / f'{n}.tick').stat().st_size
        time.sleep(1)
        assert (tmp_path / f'{n}.tick').stat().st_size == size
