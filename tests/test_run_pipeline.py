"""`headlesnb run` for pipelines, against real services started here: an S3 server (moto's server mode, with IAM
credentials checked), fsspec's memory://, a local http.server, real `dask scheduler`/`dask worker` processes (one killed
mid-notebook), scrapbook reading our outputs; --cells, --skip-tag, --total-timeout and --summary on notebooks with parameters."""
import json, os, re, shutil, signal, socket, subprocess, sys, time
from pathlib import Path
import nbformat, pytest
from conftest import free_port
from test_run_cli import KS, left_running, mk_nb  # a notebook file from cell sources, or (source, tags)

HB = [sys.executable, '-m', 'headlesnb.fronts.cli', 'run']
SECRET_FILE_WORDS = ('AWS_SECRET_ACCESS_KEY',)

def hb(*args, env=None, cwd=None, timeout=120):
    return subprocess.run([*HB, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)

def texts(cell): return ''.join(o.get('text', '') for o in cell.get('outputs', []) if o['output_type'] == 'stream')

def wait_port(port:int, proc, what:str, timeout:float=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None: raise RuntimeError(f'{what} exited with {proc.returncode}')
        try: socket.create_connection(('127.0.0.1', port), 0.2).close(); return
        except OSError: time.sleep(0.1)
    raise RuntimeError(f'{what} did not listen on {port} within {timeout}s')

def stop(proc):
    "Stop a process we started, by its PID"
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try: proc.wait(10)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait()

# ---------------------------------------------------------------------------------------------------------------
# S3: moto's server, with IAM credentials checked (the first 4 requests, which make the user, its key, its policy and
# the bucket, go without; every later one is signed and checked)

@pytest.fixture(scope='module')
def s3():
    boto3 = pytest.importorskip('boto3'); pytest.importorskip('s3fs')
    port = free_port()
    proc = subprocess.Popen(['moto_server', '-H', '127.0.0.1', '-p', str(port)], env={**os.environ, 'INITIAL_NO_AUTH_ACTION_COUNT': '4'},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc, 'moto_server')
        url = f'http://127.0.0.1:{port}'
        iam = boto3.client('iam', endpoint_url=url, region_name='us-east-1', aws_access_key_id='setup', aws_secret_access_key='setup')
        iam.create_user(UserName='pipeline')
        key = iam.create_access_key(UserName='pipeline')['AccessKey']
        iam.put_user_policy(UserName='pipeline', PolicyName='all', PolicyDocument=json.dumps(
            {'Version': '2012-10-17', 'Statement': [{'Effect': 'Allow', 'Action': '*', 'Resource': '*'}]}))
        env = {**os.environ, 'AWS_ACCESS_KEY_ID': key['AccessKeyId'], 'AWS_SECRET_ACCESS_KEY': key['SecretAccessKey'],
               'AWS_ENDPOINT_URL': url, 'AWS_DEFAULT_REGION': 'us-east-1'}
        boto3.client('s3', endpoint_url=url, region_name='us-east-1', aws_access_key_id=key['AccessKeyId'],
                     aws_secret_access_key=key['SecretAccessKey']).create_bucket(Bucket='nbs')
        yield env
    finally: stop(proc)

def s3fs_for(env):
    import s3fs
    return s3fs.S3FileSystem(key=env['AWS_ACCESS_KEY_ID'], secret=env['AWS_SECRET_ACCESS_KEY'],
                             endpoint_url=env['AWS_ENDPOINT_URL'], skip_instance_cache=True)

def test_s3_read_write_params_streams_summary_and_no_secret_anywhere(s3, tmp_path):
    fs, secret = s3fs_for(s3), s3['AWS_SECRET_ACCESS_KEY']
    src = mk_nb(tmp_path / 'in.ipynb', ('n = 1', ['parameters']), 'import os\nprint("cwd", os.getcwd())\nprint(n * 2)',
                'import sys; print("to stderr", file=sys.stderr)')
    fs.put(str(src), 'nbs/t1/in.ipynb')
    fs.pipe_file('nbs/t1/params.yaml', b'n: 21\n')
    r = hb('s3://nbs/t1/in.ipynb', 's3://nbs/t1/out.ipynb', '-f', 's3://nbs/t1/params.yaml', '--log-output', '--log-level', 'DEBUG',
           '--stdout-file', 's3://nbs/t1/stdout.txt', '--stderr-file', tmp_path / 'stderr.txt', '--summary', tmp_path / 'summary.jsonl', env=s3)
    assert r.returncode == 0, r.stderr
    out = nbformat.reads(fs.cat_file('nbs/t1/out.ipynb').decode(), as_version=4)
    assert texts(out.cells[2]).splitlines()[1] == '42'
    cwd = texts(out.cells[2]).splitlines()[0].split(' ', 1)[1]
    assert Path(cwd).name.startswith('headlesnb-cwd-') and not Path(cwd).exists()  # a temporary folder, removed after
    assert out.metadata.papermill.input_path == 's3://nbs/t1/in.ipynb'
    assert fs.cat_file('nbs/t1/stdout.txt').decode() == f'cwd {cwd}\n42\n'
    s = json.loads((tmp_path / 'summary.jsonl').read_text())
    assert (s['status'], s['exit_code'], s['input'], s['output']) == ('ok', 0, 's3://nbs/t1/in.ipynb', 's3://nbs/t1/out.ipynb')
    everything = [r.stdout, r.stderr, (tmp_path / 'stderr.txt').read_text(), (tmp_path / 'summary.jsonl').read_text()] + \
                 [fs.cat_file(f).decode() for f in fs.find('nbs/t1')]
    assert all(secret not in t for t in everything)
    assert all(s3['AWS_ACCESS_KEY_ID'] not in t for t in everything)

def test_s3_autosave_writes_partial_outputs_to_the_same_url(s3, tmp_path):
    fs = s3fs_for(s3)
    src = mk_nb(tmp_path / 'slow.ipynb', 'print("first")', 'import time\nprint("second", flush=True)\ntime.sleep(8)', 'print("third")')
    fs.put(str(src), 'nbs/t2/slow.ipynb')
    p = subprocess.Popen([*HB, 's3://nbs/t2/slow.ipynb', 's3://nbs/t2/out.ipynb', '--autosave-cell-every', '1'], env=s3,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        seen, end = None, time.monotonic() + 60
        while time.monotonic() < end and p.poll() is None:
            try:
                nb = nbformat.reads(s3fs_for(s3).cat_file('nbs/t2/out.ipynb').decode(), as_version=4)
                if 'second' in texts(nb.cells[1]): seen = nb; break
            except FileNotFoundError: pass
            time.sleep(0.3)
        assert seen is not None, 'no partial output reached the store while the cell ran'
        assert texts(seen.cells[0]) == 'first\n' and texts(seen.cells[2]) == ''  # the third cell had not run
    finally: out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert texts(nbformat.reads(fs.cat_file('nbs/t2/out.ipynb').decode(), as_version=4).cells[2]) == 'third\n'

def test_s3_output_dir_with_several_notebooks(s3, tmp_path):
    fs = s3fs_for(s3)
    for i in range(2): fs.pipe_file(f'nbs/t3/in/n{i}.ipynb', mk_nb(tmp_path / f'n{i}.ipynb', f'print({i} + 40)').read_bytes())
    r = hb('s3://nbs/t3/in/n0.ipynb', 's3://nbs/t3/in/n1.ipynb', '--output-dir', 's3://nbs/t3/out', '--jobs', '2', '--summary', '-', env=s3)
    assert r.returncode == 0, r.stderr
    for i in range(2):
        assert texts(nbformat.reads(fs.cat_file(f'nbs/t3/out/n{i}.ipynb').decode(), as_version=4).cells[0]) == f'{i + 40}\n'
    assert [json.loads(l)['output'] for l in r.stdout.splitlines()] == ['s3://nbs/t3/out/n0.ipynb', 's3://nbs/t3/out/n1.ipynb']
    assert re.search(r'^notebook +status', r.stderr, re.M)  # (the table goes to stderr when stdout carries the summary)

def test_s3_summary_of_a_jobs_batch(s3, tmp_path):
    "A --jobs batch whose --summary goes to the store (checked by the parent before its children fork): it ends, and the summary is there"
    fs = s3fs_for(s3)
    for i in range(2): fs.pipe_file(f'nbs/t9/in/n{i}.ipynb', mk_nb(tmp_path / f'n{i}.ipynb', f'print({i})').read_bytes())
    r = hb('s3://nbs/t9/in/n0.ipynb', 's3://nbs/t9/in/n1.ipynb', '--output-dir', 's3://nbs/t9/out/', '--jobs', '2',
           '--summary', 's3://nbs/t9/summary.jsonl', env=s3, timeout=90)
    assert r.returncode == 0, r.stderr
    assert [json.loads(l)['status'] for l in fs.cat_file('nbs/t9/summary.jsonl').decode().splitlines()] == ['ok', 'ok']

def test_a_run_that_used_obstore_exits_with_its_own_status(s3, tmp_path):
    "obstore's runtime aborted the interpreter's end (exit 134) in one run of three to ten: every run exits with its status"
    fs = s3fs_for(s3)
    for n in ('a', 'b'): fs.pipe_file(f'nbs/t10/{n}.ipynb', mk_nb(tmp_path / f'{n}.ipynb', 'print(1)').read_bytes())
    fs.pipe_file('nbs/t10/p.yaml', b'n: 1\n')
    codes = [hb('s3://nbs/t10/a.ipynb', 's3://nbs/t10/b.ipynb', '--output-dir', 's3://nbs/t10/out/', '--summary', 's3://nbs/t10/s.jsonl',
                '-f', 's3://nbs/t10/p.yaml', '--stderr-file', tmp_path / 'e.txt', env=s3).returncode for _ in range(8)]  # (a usage error, after the checks)
    assert codes == [2] * 8, codes

def test_s3_keys_with_hash_and_question_mark_keep_their_names(s3, tmp_path):
    "An object's key may hold # and ?: --output-dir names each output after the whole key (an http URL's query is left out)"
    fs = s3fs_for(s3)
    for i in (1, 2): fs.pipe_file(f'nbs/h/r #{i}?.ipynb', mk_nb(tmp_path / f'r{i}.ipynb', f'print({i})').read_bytes())
    r = hb('s3://nbs/h/r #1?.ipynb', 's3://nbs/h/r #2?.ipynb', '--output-dir', 's3://nbs/h/out/', '--jobs', '2', env=s3)
    assert r.returncode == 0, r.stderr
    assert sorted(fs.ls('nbs/h/out/')) == ['nbs/h/out/r #1?.ipynb', 'nbs/h/out/r #2?.ipynb']

def test_a_crash_in_a_batch_says_so(tmp_path):
    "An in-process notebook that crashes in C (SIGSEGV) ends its own process: in a batch it is dead (138 in its summary), saying why"
    mk_nb(tmp_path / 'segv.ipynb', 'print("before")', 'import ctypes; ctypes.string_at(0)')
    mk_nb(tmp_path / 'ok.ipynb', 'print(1)')
    r = hb(tmp_path / 'segv.ipynb', tmp_path / 'ok.ipynb', '--output-dir', tmp_path / 'out', '--jobs', '2', '--summary', '-')
    s = [json.loads(l) for l in r.stdout.splitlines()]
    assert [(x['status'], x['exit_code']) for x in s] == [('dead', 138), ('ok', 0)], r.stdout + r.stderr
    assert 'signal SIGSEGV: a crash in C code' in s[0]['message'] and 'with -k python3' in s[0]['message'], s[0]

def test_an_output_lost_mid_run_lets_the_run_go_on_and_keeps_it(tmp_path):
    """The output's folder turns into a file while the notebook runs: the autosaves fail, which is said once, and the run goes on
    to the end (it stopped at the first failed save, 'failed', exit 1, the rest not run and nothing kept); the end is as for a store lost"""
    src = mk_nb(tmp_path / 'm.ipynb', 'import time; time.sleep(2); print(1)', 'time.sleep(1); print(2)', 'print(3)')
    (tmp_path / 'od').mkdir()
    p = subprocess.Popen([*HB, src, tmp_path / 'od' / 'o.ipynb', '--summary', tmp_path / 's.json'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, stdin=subprocess.DEVNULL)
    time.sleep(1); shutil.rmtree(tmp_path / 'od'); (tmp_path / 'od').touch()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 74 and err.count('an autosave of the output failed') == 1 and 'the run goes on' in err, err
    s = json.loads((tmp_path / 's.json').read_text())
    assert (s['status'], s['cells_run']) == ('unsaved', 3), s
    kept = Path(re.search(r'kept in (\S+): copy it', err).group(1))
    assert [texts(c) for c in nbformat.read(kept, as_version=4).cells] == ['1\n', '2\n', '3\n']
    shutil.rmtree(kept.parent)

def test_an_output_dir_that_is_the_inputs_folder_is_refused(tmp_path):
    "Its output would overwrite the input (--inplace says so on purpose): refused before anything runs, the input as it was"
    src = mk_nb(tmp_path / 'src.ipynb', 'print(1)')
    before = src.read_bytes()
    for extra in ([], ['--jobs', '1']):
        r = hb(src, '--output-dir', tmp_path, *extra)
        assert r.returncode == 2 and 'is its own folder, so its output would overwrite it' in r.stderr, r.stderr
    assert src.read_bytes() == before

def test_s3_wrong_credentials_say_which_store_refused_and_write_nothing(s3, tmp_path):
    fs = s3fs_for(s3)
    fs.pipe_file('nbs/t4/in.ipynb', mk_nb(tmp_path / 'in.ipynb', 'print(1)').read_bytes())
    bad = {**s3, 'AWS_SECRET_ACCESS_KEY': 'wrong-secret-0123456789'}
    r = hb('s3://nbs/t4/in.ipynb', tmp_path / 'out.ipynb', env=bad)
    assert r.returncode == 2 and 's3://nbs/t4/in.ipynb: the store refused reading the notebook' in r.stderr, r.stderr
    assert 'wrong-secret-0123456789' not in r.stderr + r.stdout and not (tmp_path / 'out.ipynb').exists()
    mk_nb(tmp_path / 'local.ipynb', 'print(1)')
    r = hb(tmp_path / 'local.ipynb', 's3://nbs/t4/out.ipynb', env=bad)
    assert r.returncode == 2 and 's3://nbs/t4/out.ipynb: the store refused access to the output' in r.stderr, r.stderr
    assert 'wrong-secret-0123456789' not in r.stderr and not fs.exists('nbs/t4/out.ipynb')

def test_s3_credentials_from_a_config_file(s3, tmp_path):
    "None in the environment, the store's credentials file names them: s3fs's chain finds them (obstore, where installed, serves environment credentials only)"
    fs = s3fs_for(s3)
    fs.pipe_file('nbs/t5/in.ipynb', mk_nb(tmp_path / 'in.ipynb', 'print(6 * 7)').read_bytes())
    (tmp_path / 'credentials').write_text(f"[default]\naws_access_key_id = {s3['AWS_ACCESS_KEY_ID']}\naws_secret_access_key = {s3['AWS_SECRET_ACCESS_KEY']}\n")
    env = {k: v for k, v in s3.items() if k not in ('AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY')}
    r = hb('s3://nbs/t5/in.ipynb', 's3://nbs/t5/out.ipynb', env={**env, 'AWS_SHARED_CREDENTIALS_FILE': str(tmp_path / 'credentials')})
    assert r.returncode == 0, r.stderr
    assert texts(nbformat.reads(fs.cat_file('nbs/t5/out.ipynb').decode(), as_version=4).cells[0]) == '42\n'
    assert s3['AWS_SECRET_ACCESS_KEY'] not in r.stderr + r.stdout
    r = hb('s3://nbs/t5/in.ipynb', 's3://nbs/t5/out.ipynb', env={**env, 'AWS_SHARED_CREDENTIALS_FILE': str(tmp_path / 'none'),
           'AWS_EC2_METADATA_DISABLED': 'true'})  # and without them (no look for a cloud machine's own credentials either)
    assert r.returncode == 2 and 's3://nbs/t5/in.ipynb: the store refused reading the notebook' in r.stderr, r.stderr

def test_s3_missing_bucket_or_no_file_named_is_refused_before_the_run_and_no_bucket_is_made(s3, tmp_path):
    fs = s3fs_for(s3)
    src = mk_nb(tmp_path / 'in.ipynb', 'open("ran", "w").close()')  # (the kernel runs in the input's folder)
    for args, said in [(['s3://nobucket/out.ipynb'], "there is no bucket 'nobucket'"), (['--output-dir', 's3://nobucket/o'], "there is no bucket 'nobucket'"),
                       (['s3://nbs'], 'names a bucket, not a notebook file'), (['s3://nbs/runs/'], 'names a folder, not a notebook file'),
                       (['s3://Bad!name/out.ipynb'], "not a name the store takes"), (['--output-dir', 's3://Bad!name/o'], "not a name the store takes")]:
        r = hb(src, *args, env=s3)
        assert r.returncode == 2 and said in r.stderr, (args, r.stderr)
        assert 'Bad!' not in args[-1] or 'credentials' not in r.stderr, r.stderr  # (a name botocore refuses blamed them)
    assert not (tmp_path / 'ran').exists() and not fs.exists('nobucket')
    r = hb(src, 's3://nbs/t9/new/out.ipynb', env=s3)  # a new object, under "folders" nothing made: they are parts of its name
    assert r.returncode == 0 and (tmp_path / 'ran').exists() and fs.exists('nbs/t9/new/out.ipynb'), r.stderr

def test_s3_user_and_password_in_the_url_are_never_shown(s3, tmp_path):
    "botocore refuses KEY:SECRET@bucket as a bucket name and quotes it: the message is scrubbed of both, as is the summary"
    fs = s3fs_for(s3)
    src = mk_nb(tmp_path / 'p.ipynb', 'print(1)')
    fs.pipe_file('nbs/t6/p.ipynb', src.read_bytes())
    for args in (['s3://AKIAXX:VerySecretValue99@nbs/t6/p.ipynb', tmp_path / 'o.ipynb'], [src, 's3://AKIAXX:VerySecretValue99@nbs/t6/o.ipynb']):
        r = hb(*args, '--summary', tmp_path / 's.json', env=s3)
        shown = r.stdout + r.stderr + (tmp_path / 's.json').read_text()
        assert r.returncode == 2 and 's3://***@nbs/t6/' in r.stderr, r.stderr
        assert 'VerySecretValue99' not in shown and 'AKIAXX' not in shown, shown
    assert not (tmp_path / 'o.ipynb').exists() and not fs.exists('nbs/t6/o.ipynb')

def test_a_store_lost_mid_run_keeps_the_executed_notebook_here(tmp_path):
    """The store goes away while the notebook runs (its own moto server, killed): the run is not thrown away. The executed
    notebook is kept in a private temporary folder that the message names; exit 74 and status `unsaved`, with the cells that ran
    (a --jobs batch: each notebook so, and the batch's exit 1)"""
    boto3 = pytest.importorskip('boto3'); pytest.importorskip('s3fs')
    port = free_port()
    moto = subprocess.Popen(['moto_server', '-H', '127.0.0.1', '-p', str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {**os.environ, 'AWS_ACCESS_KEY_ID': 'k', 'AWS_SECRET_ACCESS_KEY': 's', 'AWS_ENDPOINT_URL': f'http://127.0.0.1:{port}', 'AWS_DEFAULT_REGION': 'us-east-1'}
    # Each run marks that it is in its cells (so it checked the output at its start), then waits until the store is gone:
    # no guess at how long three runs take to start on a loaded machine.
    started, gone = tmp_path / 'started', tmp_path / 'gone'
    try:
        wait_port(port, moto, 'moto_server')
        boto3.client('s3', endpoint_url=env['AWS_ENDPOINT_URL'], region_name='us-east-1', aws_access_key_id='k', aws_secret_access_key='s').create_bucket(Bucket='nbs')
        mark = f'open({str(started)!r}, "a").write("x")'
        wait = f'import os, time\nwhile not os.path.exists({str(gone)!r}): time.sleep(0.05)'
        src = mk_nb(tmp_path / 'slow.ipynb', f'{mark}\nprint("first", flush=True)', f'{wait}\nprint("second")')
        two = mk_nb(tmp_path / 'slow2.ipynb', f'{mark}\n{wait}\nprint("two")')
        run = lambda *args: subprocess.Popen([*HB, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        p = run(src, 's3://nbs/out/slow.ipynb', '--summary', tmp_path / 's.json', '--log-output')
        batch = run(src, two, '--output-dir', 's3://nbs/batch', '--jobs', '2', '--summary', tmp_path / 'b.json')  # (each in a child process)
        end = time.monotonic() + 120
        while not (started.exists() and len(started.read_text()) == 3):
            assert time.monotonic() < end and p.poll() is None and batch.poll() is None; time.sleep(0.05)
    finally: moto.kill(); moto.wait(); gone.touch()
    out, err = p.communicate(timeout=120)
    assert p.returncode == 74, err
    kept = Path(re.search(r'the executed notebook is kept in (\S+): copy it', err).group(1))
    try:
        assert 'the notebook ran, but its output could not be written (s3://nbs/out/slow.ipynb' in err, err
        nb = nbformat.read(kept, as_version=4)
        assert kept.name == 'slow.ipynb' and [texts(c) for c in nb.cells] == ['first\n', 'second\n']
        assert kept.parent.stat().st_mode & 0o777 == 0o700  # (private: a notebook may hold secrets)
        s = json.loads((tmp_path / 's.json').read_text())
        assert (s['status'], s['exit_code'], s['cells_run'], s['cells_total']) == ('unsaved', 74, 2, 2) and str(kept) in s['message'], s
    finally: shutil.rmtree(kept.parent)
    out, err = batch.communicate(timeout=120)
    assert batch.returncode == 1 and re.search(r'slow2.ipynb: unsaved, 1/1 cells, [0-9.]+s \(the notebook ran', err), err
    for s in map(json.loads, (tmp_path / 'b.json').read_text().splitlines()):
        kept = Path(re.search(r'kept in (\S+): copy it', s['message']).group(1))
        assert (s['status'], s['exit_code'], s['output']) == ('unsaved', 74, f's3://nbs/batch/{kept.name}'), s
        assert texts(nbformat.read(kept, as_version=4).cells[-1]) == ('second\n' if kept.name == 'slow.ipynb' else 'two\n')
        shutil.rmtree(kept.parent)

def test_an_output_that_cannot_be_written_at_the_end_is_no_failed_cell(tmp_path):
    "A full disk at the end (`/dev/full`): the notebook ran, so it is kept, and the run says so (it said a cell failed, exit 1)"
    if not Path('/dev/full').exists(): pytest.skip('no /dev/full here')
    r = hb(mk_nb(tmp_path / 'n.ipynb', 'print(6 * 7)'), '/dev/full', '--summary', '-')
    s = json.loads(r.stdout)
    assert (r.returncode, s['status'], s['cells_run']) == (74, 'unsaved', 1), r.stdout + r.stderr
    kept = Path(re.search(r'kept in (\S+): copy it', r.stderr).group(1))
    assert texts(nbformat.read(kept, as_version=4).cells[0]) == '42\n'
    shutil.rmtree(kept.parent)

def test_output_dir_on_a_store_refusing_the_credentials_is_refused_before_any_run(s3, tmp_path):
    srcs = [mk_nb(tmp_path / f'n{i}.ipynb', 'open("ran", "w").close()') for i in range(2)]
    bad = {**s3, 'AWS_SECRET_ACCESS_KEY': 'wrong-secret-0123456789'}
    r = hb(*srcs, '--output-dir', 's3://nbs/odbad', env=bad)
    assert r.returncode == 2 and 's3://nbs/odbad: the store refused access to the output folder' in r.stderr, r.stderr
    assert r.stderr.count('\n') == 1 and not (tmp_path / 'ran').exists()

# ---------------------------------------------------------------------------------------------------------------
# Other stores: a missing package, memory://, http(s)://

def test_a_protocol_no_installed_package_serves_names_the_extra(tmp_path):
    mk_nb(tmp_path / 'in.ipynb', 'print(1)')
    for url in ('oci://bucket@ns/in.ipynb', 'nosuchstore://x/in.ipynb'):
        r = hb(url, tmp_path / 'out.ipynb')
        assert r.returncode == 2 and "pip install 'headlesnb[cloud]'" in r.stderr, r.stderr
        r = hb(tmp_path / 'in.ipynb', url.replace('in.ipynb', 'out.ipynb'))
        assert r.returncode == 2 and "pip install 'headlesnb[cloud]'" in r.stderr, r.stderr
    assert not (tmp_path / 'out.ipynb').exists()

def test_memory_urls_through_the_python_api(tmp_path):
    script = '''
import fsspec, json, nbformat
from headlesnb import run_notebook, execute_notebook
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1'), nbformat.v4.new_code_cell('print(x + 1)')])
nb.cells[0].metadata['tags'] = ['parameters']
fs = fsspec.filesystem('memory')
fs.pipe_file('/p/in.ipynb', nbformat.writes(nb).encode())
s = run_notebook('memory://p/in.ipynb', 'memory://p/out.ipynb', dict(x=41))
out = nbformat.reads(fs.cat_file('/p/out.ipynb').decode(), as_version=4)
print(json.dumps([s['status'], s['cells_run'], out.cells[2].outputs[0].text]))
'''
    r = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1]) == ['ok', 3, '42\n']

def test_http_input_from_a_local_http_server(tmp_path):
    pytest.importorskip('aiohttp')
    site = tmp_path / 'site'; site.mkdir()
    mk_nb(site / 'in.ipynb', ('n = 1', ['parameters']), 'print(n * 3)')
    port = free_port()
    srv = subprocess.Popen([sys.executable, '-m', 'http.server', '--bind', '127.0.0.1', str(port)], cwd=site,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, srv, 'http.server')
        r = hb(f'http://127.0.0.1:{port}/in.ipynb', tmp_path / 'out.ipynb', '-p', 'n', '14')
        assert r.returncode == 0, r.stderr
        assert texts(nbformat.read(tmp_path / 'out.ipynb', as_version=4).cells[2]) == '42\n'
        r = hb(f'http://127.0.0.1:{port}/none.ipynb', tmp_path / 'none.ipynb')
        assert r.returncode == 2 and f'http://127.0.0.1:{port}/none.ipynb: no such notebook' in r.stderr, r.stderr
        r = hb(tmp_path / 'out.ipynb', f'http://127.0.0.1:{port}/written.ipynb')
        assert r.returncode == 2 and 'read-only' in r.stderr and not (site / 'written.ipynb').exists(), r.stderr
        secret = f'http://alice:S3cretPW@127.0.0.1:{port}/in.ipynb?X-Amz-Signature=SIGSECRET'  # (the server ignores both)
        r = hb(secret, '--help-notebook')
        assert r.returncode == 0 and 'n: Unknown type (default 1)' in r.stdout, r.stdout + r.stderr
        assert 'S3cretPW' not in r.stdout + r.stderr and 'SIGSECRET' not in r.stdout + r.stderr, r.stdout
        r = hb(tmp_path / 'out.ipynb', tmp_path / 'o2.ipynb', '--cwd', secret)
        assert r.returncode == 2 and 'no such folder' in r.stderr and 'S3cretPW' not in r.stderr and 'SIGSECRET' not in r.stderr, r.stderr
    finally: stop(srv)

# ---------------------------------------------------------------------------------------------------------------
# Chosen cells, a whole-run limit, values out

def test_cells_and_skip_tag_on_a_notebook_with_parameters(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', ('n = 1', ['parameters']), 'print("a", n)', ('print("slow")', ['slow']), 'print("c", n)', 'print("d")')
    nb = nbformat.read(src, as_version=4)
    nb.cells[4].outputs = [nbformat.v4.new_output('stream', name='stdout', text='old d\n')]
    nbformat.write(nb, src)
    r = hb(src, tmp_path / 'o1.ipynb', '-p', 'n', '7', '--skip-tag', 'slow', '--skip-tag', 'other')
    assert r.returncode == 0, r.stderr
    out = nbformat.read(tmp_path / 'o1.ipynb', as_version=4)
    assert [texts(c) for c in out.cells] == ['', '', 'a 7\n', '', 'c 7\n', 'd\n'] and 'ran 5 of 6 code cells' in r.stderr
    r = hb(src, tmp_path / 'o2.ipynb', '-p', 'n', '8', '--cells', '3,id:c1')
    assert r.returncode == 0, r.stderr
    out = nbformat.read(tmp_path / 'o2.ipynb', as_version=4)
    assert [texts(c) for c in out.cells] == ['', '', 'a 8\n', '', 'c 8\n', 'old d\n']  # the last cell kept its old output
    assert out.cells[0].source == 'n = 1' and out.cells[1].source.endswith('n = 8\n')
    for bad, says in ((['--cells', '1-x'], "'1-x' is not an index"), (['--cells', '9'], 'names cells the notebook lacks (it has 5 cells'),
                      (['--cells', 'id:zz'], "no cell with id 'zz'"), (['--skip-tag', ''], '--skip-tag needs a tag name'),
                      (['--total-timeout', '0'], "'0': must be a number of seconds more than 0")):
        r = hb(src, tmp_path / 'bad.ipynb', *bad)
        assert r.returncode == 2 and says in r.stderr, (bad, r.stderr)
        assert not (tmp_path / 'bad.ipynb').exists()

@pytest.mark.parametrize('kernel', ['inprocess', 'python3'])
def test_total_timeout_writes_what_ran_and_exits_124(tmp_path, kernel):
    src = mk_nb(tmp_path / 'in.ipynb', ('n = 1', ['parameters']), 'print("before", n)', 'import time\nwhile True: time.sleep(0.01)', 'print("never")')
    t = time.monotonic()
    r = hb(src, tmp_path / 'out.ipynb', '-p', 'n', '5', '-k', kernel, '--total-timeout', '4', '--summary', tmp_path / 's.json')
    assert r.returncode == 124, r.stderr
    assert time.monotonic() - t < 25
    assert 'stopped at cell 4 (id c2): the run passed its --total-timeout of 4s; the outputs so far are written' in r.stderr
    out = nbformat.read(tmp_path / 'out.ipynb', as_version=4)
    assert texts(out.cells[3]) == 'before 5\n' and texts(out.cells[5]) == ''
    s = json.loads((tmp_path / 's.json').read_text())
    assert (s['status'], s['exit_code'], s['failure']['cell_id']) == ('timeout', 124, 'c2')

def test_total_timeout_is_never_taken_for_ctrl_c(tmp_path):
    """In-process, the kernel stops a cell past its time with SIGINTs of its own: however late the run's Ctrl-C watcher
    reads them (a busy machine), they are the timeout's, so every run exits 124, never 130. Twelve runs, six at a time,
    beside two processes that keep the cores busy"""
    src = mk_nb(tmp_path / 'in.ipynb', 'x = 1', 'import time\ntime.sleep(20)', 'print("never")')
    busy = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(2)]
    try:
        codes = []
        for batch in range(2):
            runs = [subprocess.Popen([*HB, str(src), str(tmp_path / f'out{batch}-{i}.ipynb'), '--total-timeout', '1'], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(6)]
            codes += [(p.wait(60), p.stderr.read()) for p in runs]
    finally:
        for p in busy: p.kill(); p.wait()
    assert [c for c, _ in codes] == [124] * 12, [e for c, e in codes if c != 124]


def test_scrapbook_reads_our_outputs_and_the_summary_has_the_scraps(tmp_path):
    sb = pytest.importorskip('scrapbook'); pytest.importorskip('pyarrow')
    src = mk_nb(tmp_path / 'in.ipynb', ('n = 1', ['parameters']),
                'import scrapbook as sb, pandas as pd\nsb.glue("answer", n * 2)\nsb.glue("words", "a b c")\n'
                'sb.glue("table", {"rows": [1, 2]})\nsb.glue("frame", pd.DataFrame({"x": [1, 2]}))', 'raise ValueError("boom")')
    for kernel in ('inprocess', 'python3'):
        r = hb(src, tmp_path / f'{kernel}.ipynb', '-p', 'n', '21', '-k', kernel, '--summary', tmp_path / f'{kernel}.json')
        assert r.returncode == 1, r.stderr
        scraps = sb.read_notebook(str(tmp_path / f'{kernel}.ipynb')).scraps
        assert (scraps['answer'].data, scraps['words'].data, scraps['table'].data) == (42, 'a b c', {'rows': [1, 2]})
        assert list(scraps['frame'].data['x']) == [1, 2]
        s = json.loads((tmp_path / f'{kernel}.json').read_text())
        assert s['scraps'] == {'answer': 42, 'words': 'a b c', 'table': {'rows': [1, 2]},  # a data frame: by encoder and MIME type
                               'frame': {'encoder': 'pandas', 'mime_type': 'application/scrapbook.scrap.pandas+json'}}
        assert (s['status'], s['exit_code'], s['failure']['ename'], s['failure']['evalue']) == ('failed', 1, 'ValueError', 'boom')
        assert [c['cell_id'] for c in s['cell_seconds']] == ['c0', s['cell_seconds'][1]['cell_id'], 'c1', 'c2']

def test_a_k_batch_runs_on_warm_kernels_with_the_same_lines_table_and_summary(tmp_path):
    for i in range(3): mk_nb(tmp_path / f'n{i}.ipynb', ('i = 0', ['parameters']), f'print({i} * 10 + i)' if i != 1 else 'raise KeyError("k")')
    r = hb(*(tmp_path / f'n{i}.ipynb' for i in range(3)), '--output-dir', tmp_path / 'out', '-k', 'python3', '--jobs', '2', '-p', 'i', '2',
           '--summary', tmp_path / 's.jsonl')
    assert r.returncode == 1, r.stderr
    assert "n1.ipynb: failed, 3/3 cells" in r.stderr and "(cell 3 (id c1): KeyError)" in r.stderr
    assert 'headlesnb: cell 3 (id c1) failed: KeyError' in r.stderr  # its log, after the table
    s = [json.loads(l) for l in (tmp_path / 's.jsonl').read_text().splitlines()]
    assert [x['status'] for x in s] == ['ok', 'failed', 'ok'] and [x['exit_code'] for x in s] == [0, 1, 0]
    assert texts(nbformat.read(tmp_path / 'out' / 'n2.ipynb', as_version=4).cells[2]) == '22\n'

# ---------------------------------------------------------------------------------------------------------------
# Dask: real scheduler and worker processes

# Dask's HTTP server listens on 0.0.0.0 (8787 for a scheduler) even with --no-dashboard: on a free port of 127.0.0.1 instead
LOOPBACK_HTTP = ('--dashboard-address', '127.0.0.1:0')

@pytest.fixture
def dask_cluster(tmp_path):
    "A `dask scheduler` and a function starting `dask worker` processes (no nanny: a killed worker stays dead); stopped by PID"
    pytest.importorskip('distributed')
    port, procs = free_port(), []
    env = {**os.environ, 'DASK_DISTRIBUTED__WORKER__DAEMON': 'False'}
    sched = subprocess.Popen(['dask', 'scheduler', '--host', '127.0.0.1', '--port', str(port), '--no-dashboard', '--no-show', *LOOPBACK_HTTP],
                             stdout=subprocess.DEVNULL, stderr=open(tmp_path / 'scheduler.log', 'w'), env=env)
    procs.append(sched)
    def worker():
        w = subprocess.Popen(['dask', 'worker', f'tcp://127.0.0.1:{port}', '--host', '127.0.0.1', '--nthreads', '1', '--no-nanny',
                              '--no-dashboard', *LOOPBACK_HTTP], stdout=subprocess.DEVNULL, stderr=open(tmp_path / f'worker{len(procs)}.log', 'w'), env=env)
        procs.append(w)
        return w
    try:
        wait_port(port, sched, 'dask scheduler')
        yield f'tcp://127.0.0.1:{port}', worker
    finally:
        for p in reversed(procs): stop(p)

def _wait_workers(address, n, timeout=60):
    from distributed import Client
    with Client(address, timeout=30) as c: c.wait_for_workers(n, timeout=timeout)

def test_cluster_runs_a_batch_and_a_killed_worker_reruns_once_then_fails(dask_cluster, tmp_path):
    address, worker = dask_cluster
    workers = {w.pid: w for w in (worker() for _ in range(4))}
    # each attempt of a 'victim' notebook writes its worker's pid (its process's parent) and waits; the test kills that worker
    victim = lambda name, times: mk_nb(tmp_path / f'{name}.ipynb', ('n = 0', ['parameters']),
        f'import os, pathlib, time\nm = pathlib.Path({str(tmp_path)!r}) / "{name}.attempts"\ntried = len(m.read_text().split()) if m.exists() else 0\n'
        f'm.write_text((m.read_text() if m.exists() else "") + str(os.getppid()) + " ")\n'
        f'if tried < {times}: time.sleep(120)\nprint("done", n, tried)')
    nbs = [victim('once', 1), victim('twice', 2)] + [mk_nb(tmp_path / f'ok{i}.ipynb', ('n = 0', ['parameters']), 'print("ok", n)') for i in range(2)]
    _wait_workers(address, 4)
    p = subprocess.Popen([*HB, *nbs, '--output-dir', tmp_path / 'out', '--cluster', address, '-p', 'n', '3', '--summary', tmp_path / 's.jsonl'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    killed, end = [], time.monotonic() + 150
    try:
        while p.poll() is None and time.monotonic() < end:
            for name, times in (('once', 1), ('twice', 2)):
                pids = (tmp_path / f'{name}.attempts').read_text().split() if (tmp_path / f'{name}.attempts').exists() else []
                for pid in map(int, pids[:times]):
                    if pid in workers and pid not in killed: os.kill(pid, signal.SIGKILL); workers[pid].wait(); killed.append(pid)
            time.sleep(0.2)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None: p.kill(); p.communicate()
    assert len(killed) == 3, (killed, err)
    assert p.returncode == 1, err
    s = {Path(x['input']).stem: x for x in map(json.loads, (tmp_path / 's.jsonl').read_text().splitlines())}
    assert s['once']['status'] == 'ok' and 'died while running it' in s['once']['message'], s['once']
    assert texts(nbformat.read(tmp_path / 'out' / 'once.ipynb', as_version=4).cells[2]) == 'done 3 1\n'
    assert (s['twice']['status'], s['twice']['exit_code']) == ('dead', 138) and 'the workers running it died' in s['twice']['message']
    assert s['ok0']['status'] == s['ok1']['status'] == 'ok'  # nothing else lost
    assert 'twice.ipynb: dead' in err and 'once.ipynb: ok' in err
    assert len((tmp_path / 'twice.attempts').read_text().split()) == 2  # it ran twice, not a third time

def test_a_local_cluster_says_a_missing_notebook_is_missing_here(tmp_path):
    "`local:N`'s workers are on this machine: a missing input is missing, as with --jobs (it blamed another machine's worker)"
    mk_nb(tmp_path / 'a.ipynb', 'print(1)')
    r = hb(tmp_path / 'a.ipynb', tmp_path / 'none.ipynb', '--output-dir', tmp_path / 'out', '--cluster', 'local:1')
    assert r.returncode == 1 and f"{tmp_path / 'none.ipynb'}: no such notebook)" in r.stderr and 'Dask worker' not in r.stderr, r.stderr

def test_cluster_reads_relative_paths_from_the_callers_folder_and_says_whose_machine_lacks_a_file(dask_cluster, tmp_path):
    address, worker = dask_cluster
    worker(); _wait_workers(address, 1)
    caller = tmp_path / 'caller'; caller.mkdir()
    mk_nb(caller / 'a.ipynb', 'print(6 * 7)')
    r = hb('a.ipynb', tmp_path / 'none.ipynb', '--output-dir', 'out', '--cluster', address, cwd=caller)  # (the worker's folder is not `caller`)
    assert r.returncode == 1 and texts(nbformat.read(caller / 'out' / 'a.ipynb', as_version=4).cells[0]) == '42\n', r.stderr
    assert f"{tmp_path / 'none.ipynb'}: no such notebook on the Dask worker tcp://127.0.0.1:" in r.stderr and '] a.ipynb: ok' in r.stderr, r.stderr
    (caller / 'p.yaml').write_text('n: 77\n'); (caller / 'sub').mkdir()  # -f and --cwd too: from the caller's folder
    mk_nb(caller / 'b.ipynb', ('n = 1', ['parameters']), 'import os; print(n, os.getcwd())')
    r = hb('b.ipynb', '--output-dir', 'out', '--cluster', address, '-f', 'p.yaml', '--cwd', 'sub', cwd=caller)
    assert r.returncode == 0 and texts(nbformat.read(caller / 'out' / 'b.ipynb', as_version=4).cells[2]) == f"77 {caller / 'sub'}\n", r.stderr

def test_ctrl_c_of_a_cluster_batch_stops_its_running_notebooks_where_they_run(dask_cluster, tmp_path):
    "The scheduler and its worker are other processes: the Ctrl-C reaches only the batch, which has the run on the worker stop"
    from test_run_cli import _default_sigint
    address, worker = dask_cluster
    worker(); _wait_workers(address, 1)
    tick = tmp_path / 'tick.log'
    src = mk_nb(tmp_path / 'tick.ipynb', f'open({str(tmp_path / "started")!r}, "w").close()',
                f'import time\nfor i in range(60):\n    open({str(tick)!r}, "a").write(".")\n    time.sleep(0.5)', 'print("end")')
    p = subprocess.Popen([*HB, src, '--output-dir', tmp_path / 'out', '--cluster', address], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, stdin=subprocess.DEVNULL, preexec_fn=_default_sigint)
    try:
        end = time.monotonic() + 90
        while not tick.exists() and p.poll() is None and time.monotonic() < end: time.sleep(0.2)
        time.sleep(1)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None: p.kill(); p.wait()
    assert p.returncode == 130 and '] ' + str(src) + ': interrupted' in err, (out, err)
    nb = nbformat.read(tmp_path / 'out' / 'tick.ipynb', as_version=4)  # what ran, written by the run on the worker
    assert [c.metadata.papermill.status for c in nb.cells] == ['completed', 'failed', 'pending']
    size = tick.stat().st_size
    time.sleep(2)
    assert tick.stat().st_size == size  # no run left going on the worker

def test_cluster_without_a_start_limit_and_on_other_transports(dask_cluster, tmp_path):
    "--start-timeout -1 (no limit, as in papermill) works with --cluster; tls:// and ws:// (which Dask cannot reach as given) are one line, exit 2"
    address, worker = dask_cluster
    worker(); _wait_workers(address, 1)
    mk_nb(tmp_path / 'a.ipynb', 'print(6 * 7)')
    r = hb(tmp_path / 'a.ipynb', '--output-dir', tmp_path / 'out', '--cluster', address, '--start-timeout', '-1')
    assert r.returncode == 0 and texts(nbformat.read(tmp_path / 'out' / 'a.ipynb', as_version=4).cells[0]) == '42\n', r.stderr
    for other in (address.replace('tcp://', 'tls://'), address.replace('tcp://', 'ws://')):
        r = hb(tmp_path / 'a.ipynb', '--output-dir', tmp_path / 'out2', '--cluster', other, '--start-timeout', '3')
        assert r.returncode == 2 and r.stderr.startswith(f'headlesnb: --cluster {other}: ') and r.stderr.count('\n') == 1, r.stderr
        assert not (tmp_path / 'out2').exists()


def test_cluster_unreachable_is_an_error_within_the_start_timeout(tmp_path):
    pytest.importorskip('distributed')
    mk_nb(tmp_path / 'a.ipynb', 'print(1)')
    t = time.monotonic()
    r = hb(tmp_path / 'a.ipynb', '--output-dir', tmp_path / 'out', '--cluster', f'tcp://127.0.0.1:{free_port()}', '--start-timeout', '2')
    assert r.returncode == 2 and 'no Dask scheduler answered within 2s' in r.stderr, r.stderr
    assert time.monotonic() - t < 20 and not (tmp_path / "out").exists()  # nothing written

def test_cluster_on_a_port_where_no_scheduler_answers_is_an_error_within_the_start_timeout(tmp_path):
    "Something else listens there (a web server, a proxy): it takes the connection and never answers as Dask does"
    pytest.importorskip('distributed')
    import threading
    mk_nb(tmp_path / 'a.ipynb', 'print(1)')
    srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(8)
    taken = []
    threading.Thread(target=lambda: [taken.append(srv.accept()) for _ in range(8)], daemon=True).start()
    try:
        t = time.monotonic()
        r = hb(tmp_path / 'a.ipynb', '--output-dir', tmp_path / 'out', '--cluster', f'tcp://127.0.0.1:{srv.getsockname()[1]}', '--start-timeout', '2', timeout=90)
        assert r.returncode == 2 and 'did not answer as a Dask scheduler' in r.stderr and r.stderr.count('\n') == 1, r.stderr
        assert time.monotonic() - t < 40 and not (tmp_path / 'out').exists()
    finally: srv.close()

def test_cluster_address_with_a_password_is_never_shown(tmp_path):
    pytest.importorskip('distributed')
    mk_nb(tmp_path / 'a.ipynb', 'print(1)')
    r = hb(tmp_path / 'a.ipynb', '--output-dir', tmp_path / 'out', '--cluster', 'tcp://user:pw123456@127.0.0.1:1', '--start-timeout', '2')
    assert r.returncode == 2 and 'tcp://***@127.0.0.1:1' in r.stderr and 'pw123456' not in r.stderr + r.stdout, r.stderr

def test_cluster_local_on_warm_kernels_reports_as_jobs_does(tmp_path):
    pytest.importorskip('distributed')
    code = 'import os\nprint(os.getpid(), i, sorted(k for k in os.environ if k.startswith("DASK_")))'  # (the workers' Dask settings stay theirs)
    for i in range(3): mk_nb(tmp_path / f'n{i}.ipynb', ('i = 0', ['parameters']), code if i != 1 else 'raise KeyError("k")')
    r = hb(*(tmp_path / f'n{i}.ipynb' for i in range(3)), '--output-dir', tmp_path / 'out', '--cluster', 'local:1', '-k', 'python3',
           '-p', 'i', '4', '--summary', '-', timeout=180)
    assert r.returncode == 1, r.stderr
    s = [json.loads(l) for l in r.stdout.splitlines()]
    assert [(x['status'], x['exit_code']) for x in s] == [('ok', 0), ('failed', 1), ('ok', 0)]
    assert s[1]['failure']['ename'] == 'KeyError' and 'n1.ipynb: failed, 3/3 cells' in r.stderr
    assert 'distributed' not in r.stderr and 'CancelledError' not in r.stderr and '8787' not in r.stderr, r.stderr  # (Dask's own noise: none)
    outs = [texts(nbformat.read(tmp_path / 'out' / f'n{i}.ipynb', as_version=4).cells[2]).split(None, 1) for i in (0, 2)]
    assert outs[0][0] != outs[1][0]  # a fresh kernel per notebook, though one worker ran them all
    assert [o[1].strip() for o in outs] == ['4 []', '4 []']

@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='a parent death signal is Linux')
def test_sigkill_of_a_local_cluster_batch_takes_its_workers_and_kernels_along(tmp_path):
    pytest.importorskip('distributed')
    import psutil
    nbs = [mk_nb(tmp_path / f'n{i}.ipynb', f'import os\nopen({str(tmp_path / f"pid-{i}")!r}, "w").write(str(os.getpid()))', 'while True: pass')
           for i in range(2)]
    p = subprocess.Popen([*HB, *map(str, nbs), '--output-dir', str(tmp_path / 'out'), '--cluster', 'local:2', '-k', 'python3'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    files = [tmp_path / f'pid-{i}' for i in range(2)]
    deadline = time.monotonic() + 90
    while not all(f.exists() and f.read_text() for f in files) and time.monotonic() < deadline: time.sleep(0.1)
    kids = [c.pid for c in psutil.Process(p.pid).children(recursive=True)]  # the workers, their warm kernels and the two busy ones
    assert all(int(f.read_text()) in kids for f in files), kids
    p.kill(); p.wait()  # as a scheduler's timeout or the out-of-memory killer does: no chance to stop them
    alive = left_running(kids, 10)
    assert not alive, f'still running after the batch was killed: {alive}'

def ctrl_c_when(p, ready, within=90, settle=1.0, wait=60) -> tuple:
    "Ctrl-C to the batch `p` once `ready()` (or it ended, or `within` s went by) and `settle` s more: its (stdout, stderr); killed if it does not end"
    try:
        end = time.monotonic() + within
        while not ready() and p.poll() is None and time.monotonic() < end: time.sleep(0.2)
        time.sleep(settle)
        p.send_signal(signal.SIGINT)
        return p.communicate(timeout=wait)
    finally:
        if p.poll() is None: p.kill(); p.communicate()

def test_ctrl_c_stops_a_k_batch_writing_what_ran(tmp_path):
    nbs = [mk_nb(tmp_path / f's{i}.ipynb', f'print("start {i}")', 'import time; time.sleep(60)', 'print("end")') for i in range(3)]
    p = subprocess.Popen([*HB, *nbs, '--output-dir', tmp_path / 'out', '-k', 'python3', '--jobs', '2', '--autosave-cell-every', '1'], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    def started(i):  # (an output file can be there before its kernel has started: its first cell's output says it ran)
        try: return f'start {i}' in (tmp_path / 'out' / f's{i}.ipynb').read_text()
        except OSError: return False
    out, err = ctrl_c_when(p, lambda: all(started(i) for i in range(2)))  # both running notebooks in their sleeping cell
    assert p.returncode == 130, err
    assert re.search(r's0.ipynb +interrupted +2/3', out) and re.search(r's2.ipynb +not run', out), out
    for i in range(2):
        nb = nbformat.read(tmp_path / 'out' / f's{i}.ipynb', as_version=4)
        assert texts(nb.cells[0]) == f'start {i}\n' and nb.cells[1].outputs[-1]['ename'] == 'KeyboardInterrupt'
    assert not (tmp_path / 'out' / 's2.ipynb').exists()

# ---------------------------------------------------------------------------------------------------------------
# A URL's user and password (or token) go nowhere: not in messages, summaries, the notebook or its injected paths

@pytest.fixture
def http_site(tmp_path):
    pytest.importorskip('aiohttp')
    site = tmp_path / 'site'; site.mkdir()
    port = free_port()
    srv = subprocess.Popen([sys.executable, '-m', 'http.server', '--bind', '127.0.0.1', str(port)], cwd=site,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, srv, 'http.server')
        yield site, f'127.0.0.1:{port}'
    finally: stop(srv)

def test_url_credentials_are_never_written_or_printed(http_site, tmp_path):
    site, host = http_site
    mk_nb(site / 'in.ipynb', ('n = 1', ['parameters']), 'print(n)')
    for url, secret in [(f'http://alice:S3cretPW@{host}/in.ipynb', 'S3cretPW'), (f'http://alice:p@ss@{host}/in.ipynb', 'ss@'),
                        (f'HTTP://tok3nABCDEF@{host}/in.ipynb', 'tok3nABCDEF')]:  # (a password holding '@'; a token in an upper-case scheme)
        r = hb(url, tmp_path / 'o.ipynb', '--inject-paths', '--summary', tmp_path / 's.json', '--log-output', '--log-level', 'DEBUG')
        assert r.returncode == 0, r.stderr
        nb = nbformat.read(tmp_path / 'o.ipynb', as_version=4)
        assert texts(nb.cells[2]) == '1\n'
        shown = r.stdout + r.stderr + (tmp_path / 's.json').read_text() + (tmp_path / 'o.ipynb').read_text()
        assert secret not in shown, (url, shown)
        pm = nb.metadata.papermill
        assert pm.input_path == pm.parameters['PAPERMILL_INPUT_PATH'] == f'{url.split(":", 1)[0]}://***@{host}/in.ipynb'
        assert f'PAPERMILL_INPUT_PATH = "{pm.input_path}"' in nb.cells[1].source

def test_output_dir_on_an_http_server_is_refused_before_any_run(http_site, tmp_path):
    site, host = http_site
    srcs = [mk_nb(tmp_path / f'n{i}.ipynb', 'open("ran", "w").close()') for i in range(2)]
    r = hb(*srcs, '--output-dir', f'http://{host}/dir')
    assert r.returncode == 2 and 'read-only' in r.stderr and r.stderr.count('\n') == 1, r.stderr
    assert not (tmp_path / 'ran').exists() and not list(site.iterdir())

def test_a_signed_urls_query_is_never_written_or_printed_nor_part_of_a_file_name(http_site, tmp_path):
    site, host = http_site
    mk_nb(site / 'in.ipynb', 'print(1)')
    signed = f'http://{host}/in.ipynb?X-Amz-Credential=AKIAEXAMPLE%2F20261129&X-Amz-Signature=deadbeefcafe0123456789&sig=AzureSasSig99'
    r = hb(signed, tmp_path / 'o.ipynb', '--summary', tmp_path / 's.json', '--inject-paths')
    shown = r.stdout + r.stderr + (tmp_path / 's.json').read_text() + (tmp_path / 'o.ipynb').read_text()
    assert r.returncode == 0 and not any(s in shown for s in ('deadbeef', 'AzureSasSig99', 'AKIAEXAMPLE')), shown
    r = hb(signed, '--output-dir', tmp_path / 'od')
    assert r.returncode == 0 and [p.name for p in (tmp_path / 'od').iterdir()] == ['in.ipynb'], r.stderr
    assert not any(s in r.stdout + r.stderr for s in ('deadbeef', 'AzureSasSig99')), r.stdout + r.stderr
