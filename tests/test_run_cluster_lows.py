"""`headlesnb run --cluster`: the audit's low-severity items (what a worker's store error says, --start-timeout kept,
addresses refused at once, the summary's paths and seconds), against real `dask scheduler`/`dask worker` processes and moto's S3 server"""
import json, os, re, signal, subprocess, sys, time
import nbformat, pytest
from test_run_cli import _default_sigint, mk_nb
from test_run_pipeline import HB, LOOPBACK_HTTP, _wait_workers, ctrl_c_when, free_port, hb, s3, s3fs_for, stop, texts, wait_port  # (s3: moto's S3 server, a fixture)

pytest.importorskip('distributed')

@pytest.fixture
def scheduler(tmp_path):
    "A `dask scheduler` on 127.0.0.1 and a function starting a `dask worker` with the environment given; stopped by PID"
    port, procs = free_port(), []
    procs.append(subprocess.Popen(['dask', 'scheduler', '--host', '127.0.0.1', '--port', str(port), '--no-dashboard', '--no-show', *LOOPBACK_HTTP],
                                  stdout=subprocess.DEVNULL, stderr=open(tmp_path / 'scheduler.log', 'w')))
    def worker(env):
        procs.append(subprocess.Popen(['dask', 'worker', f'tcp://127.0.0.1:{port}', '--host', '127.0.0.1', '--nthreads', '1', '--no-nanny',
                                       '--no-dashboard', *LOOPBACK_HTTP], stdout=subprocess.DEVNULL, stderr=open(tmp_path / 'worker.log', 'w'), env=env))
    try:
        wait_port(port, procs[0], 'dask scheduler')
        yield f'tcp://127.0.0.1:{port}', worker
    finally:
        for p in reversed(procs): stop(p)

def test_a_store_error_on_a_worker_says_which_worker(s3, scheduler, tmp_path):
    "The caller has the store's credentials, the worker has none: the refusal names the worker, whose credentials to check (it read as the caller's)"
    address, worker = scheduler
    s3fs_for(s3).pipe_file('nbs/lows/a.ipynb', mk_nb(tmp_path / 'a.ipynb', 'print(1)').read_bytes())
    bare = {k: v for k, v in s3.items() if k not in ('AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY')}
    worker({**bare, 'AWS_SHARED_CREDENTIALS_FILE': str(tmp_path / 'none'), 'AWS_CONFIG_FILE': str(tmp_path / 'none'), 'AWS_EC2_METADATA_DISABLED': 'true'})
    _wait_workers(address, 1)
    r = hb('s3://nbs/lows/a.ipynb', '--output-dir', tmp_path / 'out', '--cluster', address, '--summary', '-', env=s3, timeout=180)
    s = json.loads(r.stdout.splitlines()[0])
    assert r.returncode == 1 and 'the store refused reading the notebook' in s['message'], (r.stdout, r.stderr)
    assert re.search(r'on the Dask worker tcp://127\.0\.0\.1:\d+, which reaches the store with its own credentials', s['message']), s['message']
    assert 'on the Dask worker tcp://' in r.stderr.split('\n', 1)[0], r.stderr  # (its progress line)
    assert s3['AWS_SECRET_ACCESS_KEY'] not in r.stdout + r.stderr

def test_start_timeout_is_kept_where_something_else_answers(tmp_path):
    """A web server at the address takes the connection and never answers as Dask does: the error comes as soon as where nothing
    listens, within about --start-timeout (it took 2 s more). Both runs import Dask and wait the timeout, so load slows them alike;
    each is timed twice, in turn, and the quicker taken (CI's busy cores once slowed one run 1.4 s more than the other)"""
    port, closed = free_port(), free_port()
    web = subprocess.Popen([sys.executable, '-m', 'http.server', str(port), '--bind', '127.0.0.1'], cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def took(address):
        t = time.monotonic()
        r = hb(tmp_path / 'a.ipynb', '--output-dir', tmp_path / 'out', '--cluster', address, '--start-timeout', '3')
        return r, time.monotonic() - t
    try:
        wait_port(port, web, 'http.server')
        mk_nb(tmp_path / 'a.ipynb', 'print(1)')
        runs = [took(f'tcp://127.0.0.1:{p}') for _ in range(2) for p in (closed, port)]
    finally: stop(web)
    (none, alone), (r, answered) = (min(runs[i::2], key=lambda x: x[1]) for i in (0, 1))
    assert none.returncode == 2 and 'no Dask scheduler answered within 3s' in none.stderr, none.stderr
    assert r.returncode == 2 and 'did not answer as a Dask scheduler' in r.stderr, r.stderr
    assert answered - alone < 1.2, [t for _, t in runs]  # (about 0.3 s more here; it was 2 s more)

def test_a_port_out_of_range_is_refused_at_once(tmp_path):
    mk_nb(tmp_path / 'a.ipynb', 'print(1)')
    t = time.monotonic()
    r = hb(tmp_path / 'a.ipynb', '--output-dir', tmp_path / 'out', '--cluster', 'tcp://127.0.0.1:99999', '--start-timeout', '20')
    assert r.returncode == 2 and 'port 99999 is out of range' in r.stderr and r.stderr.count('\n') == 1, r.stderr
    assert time.monotonic() - t < 15 and not (tmp_path / 'out').exists()  # (it waited the whole --start-timeout)

def test_credentials_in_the_address_are_said_unsupported_and_never_shown(tmp_path):
    mk_nb(tmp_path / 'a.ipynb', 'print(1)')
    r = hb(tmp_path / 'a.ipynb', '--output-dir', tmp_path / 'out', '--cluster', 'tcp://user:pw123456@127.0.0.1:8786', '--start-timeout', '2')
    assert r.returncode == 2 and 'tcp://***@127.0.0.1:8786: a user or password' in r.stderr and 'not supported' in r.stderr, r.stderr
    assert 'ipv6' not in r.stderr and 'pw123456' not in r.stderr + r.stdout  # (Dask's hint was of brackets for IPv6)

def test_cluster_table_seconds_and_summary_paths_are_the_summarys(tmp_path):
    """One worker: a quick notebook (its table seconds are the summary's: they had the worker's process start too), a slow one
    stopped by Ctrl-C, and one not run: every summary names local paths absolute, as the workers got them (the not run one kept them relative)"""
    mk_nb(tmp_path / 'quick.ipynb', 'print(1)')
    mk_nb(tmp_path / 'slow.ipynb', f'open({str(tmp_path / "started")!r}, "w").close()', 'import time; time.sleep(60)')
    mk_nb(tmp_path / 'last.ipynb', 'print(3)')
    p = subprocess.Popen([*HB, 'quick.ipynb', 'slow.ipynb', 'last.ipynb', '--output-dir', 'out', '--cluster', 'local:1', '--summary', 's.jsonl'],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, preexec_fn=_default_sigint)
    out, err = ctrl_c_when(p, (tmp_path / 'started').exists, within=120, settle=0.5, wait=90)
    assert p.returncode == 130, err
    s = {x['status']: x for x in map(json.loads, (tmp_path / 's.jsonl').read_text().splitlines())}
    assert sorted(s) == ['interrupted', 'not run', 'ok'], s
    for st, name in (('ok', 'quick'), ('interrupted', 'slow'), ('not run', 'last')):
        assert (s[st]['input'], s[st]['output']) == (str(tmp_path / f'{name}.ipynb'), str(tmp_path / 'out' / f'{name}.ipynb')), s[st]
    row = re.search(r'^quick\.ipynb +ok +1/1 +([\d.]+) ', out, re.M)
    assert row and abs(float(row[1]) - s['ok']['seconds']) <= 0.051, (out, s['ok']['seconds'])
    assert texts(nbformat.read(tmp_path / 'out' / 'quick.ipynb', as_version=4).cells[0]) == '1\n'
