"""`headlesnb run` audit fixes that cross a process boundary: a terminal (through `script`), signals, timed saves,
argument checks made before anything runs. Each test failed on the code before its fix."""
import json, os, shlex, shutil, signal, subprocess, sys, time
from pathlib import Path
import nbformat, pytest

HB = [sys.executable, '-m', 'headlesnb.fronts.cli', 'run']

def mk(path, *sources):
    "A notebook file of code cells"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources]), path)
    return path

def hb(*args, cwd=None, timeout=120):
    return subprocess.run([*HB, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)

needs_script = pytest.mark.skipif(shutil.which('script') is None, reason='needs util-linux script (a terminal)')

def on_terminal(args, cwd, timeout=120):
    "`headlesnb run ARGS` with stderr on a pseudo-terminal (util-linux `script`); its transcript and exit status"
    cmd = shlex.join([*HB, *map(str, args)]) + '; echo "rc=$?"'
    r = subprocess.run(['script', '-qec', cmd, '/dev/null'], capture_output=True, text=True, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)
    return r.stdout, int(r.stdout.rsplit('rc=', 1)[1].split()[0])

@needs_script
@pytest.mark.parametrize('extra', [[], ['--progress-bar'], ['-k', 'python3']])
def test_a_failing_cell_on_a_terminal_writes_the_banner_and_exits_1(tmp_path, extra):
    mk(tmp_path/'err.ipynb', 'x = 1', '1/0')
    out, rc = on_terminal(['err.ipynb', 'out.ipynb', *extra], tmp_path)
    assert rc == 1, out
    assert 'ZeroDivisionError' in out and 'Traceback' not in out.split('ZeroDivisionError')[0], out
    nb = nbformat.read(tmp_path/'out.ipynb', as_version=4)
    assert [c.metadata.get('tags') for c in nb.cells][::2] == [['papermill-error-cell-tag']] * 2, nb.cells

@needs_script
def test_a_failing_batch_on_a_terminal_writes_every_output(tmp_path):
    mk(tmp_path/'err.ipynb', 'x = 1', '1/0'); mk(tmp_path/'ok.ipynb', 'print(1)')
    out, rc = on_terminal(['err.ipynb', 'ok.ipynb', '-k', 'python3', '--output-dir', 'd'], tmp_path)
    assert rc == 1, out
    assert (tmp_path/'d'/'err.ipynb').exists() and (tmp_path/'d'/'ok.ipynb').exists(), out

def _wait_for(pred, within:float, what:str):
    end = time.monotonic() + within
    while not pred():
        assert time.monotonic() < end, f'{what}: not within {within}s'
        time.sleep(0.1)

def test_sigterm_stops_a_kernel_run_that_ignores_sigint(tmp_path):
    "A shell's background job (`cmd &` in a script) starts with SIGINT ignored: SIGTERM must still stop it, with 143"
    mk(tmp_path/'sleep.ipynb', 'print(1)', 'import time; time.sleep(60)')
    p = subprocess.Popen([*HB, 'sleep.ipynb', 'o.ipynb', '-k', 'python3'], cwd=tmp_path, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        _wait_for(lambda: (tmp_path/'o.ipynb').exists(), 60, 'cell 1 written')
        time.sleep(1)
        t0 = time.monotonic(); p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 143
        assert time.monotonic() - t0 < 20
    finally:
        if p.poll() is None: p.kill(); p.wait()

@pytest.mark.parametrize('extra', [[], ['-k', 'python3']])
def test_sigterm_to_a_batch_exits_143(tmp_path, extra):
    mk(tmp_path/'a.ipynb', 'print(1)', 'import time; time.sleep(60)'); mk(tmp_path/'b.ipynb', 'print(1)', 'import time; time.sleep(60)')
    p = subprocess.Popen([*HB, 'a.ipynb', 'b.ipynb', '--output-dir', 'd', '--jobs', '2', '--summary', 's.json', *extra], cwd=tmp_path,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: all((tmp_path/'d'/n).exists() for n in ('a.ipynb', 'b.ipynb')), 60, 'both notebooks started')
        time.sleep(1)
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 143, p.stderr.read()
        assert [json.loads(l)['exit_code'] for l in (tmp_path/'s.json').read_text().splitlines()] == [143, 143]
    finally:
        if p.poll() is None: p.kill(); p.wait()

def test_a_finished_cell_is_written_within_a_second_while_the_next_runs(tmp_path):
    "--request-save-on-cell-execute: at most one write a second, a write due sooner made later, never dropped"
    mk(tmp_path/'s3.ipynb', 'import time; time.sleep(1.5); print("one")', 'print("two")', 'time.sleep(60)')
    p = subprocess.Popen([*HB, 's3.ipynb', 'o.ipynb'], cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        out = tmp_path/'o.ipynb'
        _wait_for(lambda: out.exists() and 'one' in out.read_text(), 60, 'cell 1 written')
        time.sleep(1.5)  # cell 2 ended at once after cell 1, inside the one-second gap
        nb = nbformat.read(out, as_version=4)
        assert nb.cells[1].outputs and nb.cells[1].outputs[0]['text'] == 'two\n', nb.cells[1]
    finally: p.kill(); p.wait()

@pytest.mark.parametrize('opt', [['--summary', 'nodir/s.json'], ['--summary', '.'], ['--stdout-file', 'nodir/x'], ['--stderr-file', '.'],
                                 ['--output-dir', 'd', '--summary', 'nodir/s.json']])
def test_a_summary_or_stream_file_that_cannot_be_written_is_refused_before_the_run(tmp_path, opt):
    mk(tmp_path/'q.ipynb', 'open("ran", "w").close()')
    r = hb('q.ipynb', 'qo.ipynb', *opt, cwd=tmp_path)
    assert r.returncode == 2 and 'Traceback' not in r.stderr and opt[-1] in r.stderr, r.stderr
    assert not any((tmp_path/n).exists() for n in ('ran', 'qo.ipynb', 'd', 'nodir')), r.stderr

def test_k_kernels_inprocess_as_readme_names_it(tmp_path):
    mk(tmp_path/'q.ipynb', 'import os; print(os.getpid())')
    r = hb('q.ipynb', 'o.ipynb', '-k', 'kernels.inprocess', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    mk(tmp_path/'q2.ipynb', '1')
    r = hb('q.ipynb', 'q2.ipynb', '--output-dir', 'd', '-k', 'nosuch', cwd=tmp_path)
    assert r.returncode == 2 and 'kernels.inprocess' in r.stderr and not (tmp_path/'d').exists(), r.stderr

@pytest.mark.parametrize('args, says', [(['q.ipynb', 'o.ipynb', '-y', 'a: &x [1, *x]'], 'recursive YAML alias'),
                                        (['/dev/zero', 'o.ipynb'], '/dev/zero: not a regular file'),
                                        (['q.ipynb', 'q2.ipynb', '--output-dir', 'p.ipynb'], 'p.ipynb: is a file, not a folder'),
                                        (['q.ipynb', 'o.ipynb', '-f', 'bomb.yaml'], '-f bomb.yaml: its YAML aliases make more than 1,000,000 values')])
def test_bad_input_is_a_clear_exit_2(tmp_path, args, says):
    mk(tmp_path/'q.ipynb', 'open("ran", "w").close()'); mk(tmp_path/'q2.ipynb', '1'); (tmp_path/'p.ipynb').write_text('{}')
    # "billion laughs": 7 lines that aliases make 2 GB of (it took 15 s and 2 GB, then wrote a 49 MB notebook)
    (tmp_path/'bomb.yaml').write_text('a: &a ["lol", "lol"]\n' + ''.join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip('abcdef', 'bcdefg')))
    r = hb(*args, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and says in r.stderr and 'Traceback' not in r.stderr, r.stderr
    assert not (tmp_path/'ran').exists() and not (tmp_path/'o.ipynb').exists()

def test_a_bad_parameter_name_is_shown_on_one_line(tmp_path):
    "papermill's warning of an unknown parameter printed a name holding newlines as lines of their own, which read as code run"
    mk(tmp_path/'q.ipynb', '1')
    r = hb('q.ipynb', 'o.ipynb', '-y', '"a\\nimport os\\nb": 1', cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.splitlines() == ["Passed unknown parameter: 'a\\nimport os\\nb'",
        "headlesnb: parameter name 'a\\nimport os\\nb' is not a Python identifier (letters, digits and _, not starting with a digit)"], r.stderr

@pytest.mark.parametrize('opt', [['--jobs', '2'], ['--inplace'], ['--cluster', 'local:1']])
def test_two_paths_with_jobs_or_inplace_are_not_silently_two_inputs(tmp_path, opt):
    "Two paths are papermill's INPUT OUTPUT: --jobs/--inplace must not run OUTPUT as a second input"
    mk(tmp_path/'a.ipynb', 'n = 1'); mk(tmp_path/'out.ipynb', 'open("out-ran", "w").close()')
    before = (tmp_path/'out.ipynb').read_text()
    r = hb('a.ipynb', 'out.ipynb', *opt, cwd=tmp_path)
    assert r.returncode == 2 and 'INPUT OUTPUT' in r.stderr, r.stderr
    assert (tmp_path/'out.ipynb').read_text() == before and not (tmp_path/'out-ran').exists()

def test_inplace_jobs_runs_two_notebooks_in_place(tmp_path):
    mk(tmp_path/'a.ipynb', 'print("A")'); mk(tmp_path/'b.ipynb', 'print("B")')
    r = hb('a.ipynb', 'b.ipynb', '--inplace', '--jobs', '2', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [nbformat.read(tmp_path/n, as_version=4).cells[0].outputs[0]['text'] for n in ('a.ipynb', 'b.ipynb')] == ['A\n', 'B\n']

def test_nan_in_json_output_is_written_as_a_python3_kernel_sends_it(tmp_path):
    "The in-process kernel's .ipynb stays strict JSON: non-finite floats as jupyter_client's json_clean sends them ('nan')"
    mk(tmp_path/'n.ipynb', 'display({"application/json": {"x": float("nan"), "y": [float("-inf")]}}, raw=True)')
    for k in ('kernels.inprocess', 'python3'):
        r = hb('n.ipynb', f'{k}.ipynb', '-k', k, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        def bare(c): raise AssertionError(f'{k}: bare {c} in the .ipynb')
        nb = json.loads((tmp_path/f'{k}.ipynb').read_text(), parse_constant=bare)
        outs = nb['cells'][0]['outputs']  # (a loaded machine's kernel may warn on stderr first: the display is what is checked)
        shown = [o['data'] for o in outs if o['output_type'] == 'display_data']
        assert shown == [{'application/json': {'x': 'nan', 'y': ['-inf']}}], (k, outs)

def test_scrapbook_glue_finds_a_kernel_in_process(tmp_path):
    "scrapbook's `glue` warns 'No kernel detected' unless get_ipython().kernel is set, as ipykernel sets it"
    mk(tmp_path/'g.ipynb', 'import scrapbook as sb\nsb.glue("x", 1)')
    r = hb('g.ipynb', 'o.ipynb', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert 'No kernel detected' not in (tmp_path/'o.ipynb').read_text()
    assert json.loads((tmp_path/'o.ipynb').read_text())['cells'][0]['outputs'][0]['data']['application/scrapbook.scrap.json+json']['data'] == 1

def test_one_cell_one_number_in_cells_message_and_summary(tmp_path):
    "--cells 1, the message's 'cell 2' (1-based) and the summary's cell_index 1 name the same cell; the banner cells are not counted"
    mk(tmp_path/'e.ipynb', 'x = 1', '1/0')
    r = hb('e.ipynb', 'o.ipynb', '--cells', '1', '--summary', '-', cwd=tmp_path)
    assert r.returncode == 1 and 'cell 2 (id ' in r.stderr, r.stderr
    s = json.loads(r.stdout)
    assert s['failure']['cell_index'] == 1 and [c['cell_index'] for c in s['cell_seconds']] == [1], s

def test_a_kernel_that_cannot_start_is_exit_2_with_nothing_written(tmp_path):
    "Not a failing cell 1: a clear message naming the kernel or server, exit 2, no output notebook"
    mk(tmp_path/'q.ipynb', '1')
    spec = tmp_path/'kp'/'kernels'/'slow'; spec.mkdir(parents=True)
    (spec/'kernel.json').write_text(json.dumps({'argv': [sys.executable, '-c', 'import time; time.sleep(30)', '{connection_file}'],
                                                'display_name': 'slow', 'language': 'python'}))
    env = {**os.environ, 'JUPYTER_PATH': str(tmp_path/'kp')}
    for args, says in ((['--jupyter-url', 'http://127.0.0.1:1', '-k', 'python3'], 'http://127.0.0.1:1'),
                       (['-k', 'slow', '--start-timeout', '2'], "'slow'")):
        r = subprocess.run([*HB, 'q.ipynb', 'o.ipynb', *args], capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env, stdin=subprocess.DEVNULL)
        assert r.returncode == 2 and says in r.stderr and 'cell 1' not in r.stderr, r.stderr
        assert not (tmp_path/'o.ipynb').exists()

def test_a_store_that_cannot_be_reached_is_not_blamed_on_credentials(tmp_path):
    "An http:// input on a port nobody listens on: exit 2 naming the URL and what to check (it said to check the store's credentials)"
    import socket
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]  # (closed again: nothing listens there)
    r = hb(f'http://127.0.0.1:{port}/x.ipynb', 'out.ipynb', cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f'http://127.0.0.1:{port}/x.ipynb: could not reach the store' in r.stderr and 'credentials' not in r.stderr, r.stderr
    assert not (tmp_path/'out.ipynb').exists()
