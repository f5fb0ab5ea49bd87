"""`headlesnb run` with papermill 2.7's command line, as real subprocesses: options, parameters, injection, logs,
pipes, signals, the error banner, --jobs, and papermill's own test notebooks compared with papermill's outputs."""
import base64, importlib.util, json, os, re, shutil, signal, subprocess, sys, time
from pathlib import Path
import nbformat, pytest

HERE = Path(__file__).parent
PM_NBS = HERE / 'papermill_nbs'
HB = [sys.executable, '-m', 'headlesnb.fronts.cli', 'run']
PM = [sys.executable, '-m', 'papermill']
KS = {'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}}
HAS_PAPERMILL = importlib.util.find_spec('papermill') is not None
needs_papermill = pytest.mark.skipif(not HAS_PAPERMILL, reason='papermill (a dev dependency: bash tests/setup.sh) is not installed')

def _default_sigint(): signal.signal(signal.SIGINT, signal.SIG_DFL)  # a child of a shell's background job would ignore it

def hb(*args, input=None, cwd=None, timeout=120, env=None):
    return subprocess.run([*HB, *map(str, args)], capture_output=True, text=True, input=input, cwd=cwd, timeout=timeout,
                          env=env, stdin=None if input is not None else subprocess.DEVNULL)

def pm(*args, cwd=None, timeout=180):
    return subprocess.run([*PM, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)

def mk_nb(path, *cells, metadata=KS):
    "A notebook file; each cell is a source string, or (source, tags), or ('md', source)"
    nb = nbformat.v4.new_notebook(metadata=dict(metadata))
    for i, c in enumerate(cells):
        if isinstance(c, tuple) and c[0] == 'md': cell = nbformat.v4.new_markdown_cell(c[1])
        else:
            src, tags = (c, []) if isinstance(c, str) else c
            cell = nbformat.v4.new_code_cell(src)
            if tags: cell.metadata['tags'] = tags
        cell.id = f'c{i}'
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path

def read(path): return nbformat.read(path, as_version=4)
def read_str(text): return nbformat.reads(text, as_version=4)
def _secs(r) -> str: return re.search(r'cells in ([\d.]+)s', r.stderr).group(1)
def texts(cell): return ''.join(o.get('text', '') for o in cell.get('outputs', []) if o['output_type'] == 'stream')
def by_tag(nb, tag): return [i for i, c in enumerate(nb.cells) if tag in c.metadata.get('tags', [])]

# ---------------------------------------------------------------------------------------------------------------
# The option table

# Every option string of papermill 2.7.0's `papermill` command (papermill/cli.py); checked against the installed
# papermill below when it is there
PAPERMILL_27_OPTIONS = {
    '-h', '--help', '--help-notebook', '-p', '--parameters', '-r', '--parameters_raw', '-f', '--parameters_file',
    '-y', '--parameters_yaml', '-b', '--parameters_base64', '--inject-input-path', '--inject-output-path', '--inject-paths',
    '--engine', '--request-save-on-cell-execute', '--no-request-save-on-cell-execute', '--autosave-cell-every',
    '--prepare-only', '--prepare-execute', '-k', '--kernel', '-l', '--language', '--cwd', '--progress-bar',
    '--no-progress-bar', '--log-output', '--no-log-output', '--stdout-file', '--stderr-file', '--log-level',
    '--start-timeout', '--start_timeout', '--execution-timeout', '--report-mode', '--no-report-mode', '--version'}

@needs_papermill
def test_the_option_table_is_papermill_27s():
    import papermill
    from papermill.cli import papermill as cmd
    assert papermill.__version__.startswith('2.7')
    opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith('-')} | {'-h', '--help'}
    assert opts == PAPERMILL_27_OPTIONS

def test_help_lists_every_papermill_option_with_defaults():
    r = hb('--help')
    assert r.returncode == 0, r.stderr
    listed = set(re.findall(r'(?<![\w-])(--?[A-Za-z][\w-]*)', r.stdout))
    assert PAPERMILL_27_OPTIONS - listed == set()
    assert {'-o', '--output', '--inplace', '--allow-errors', '--timeout', '--output-dir', '--jobs',
            '--jupyter-url', '--jupyter-token'} <= listed
    flat = ' '.join(r.stdout.split())
    assert "the notebook's own folder" in flat  # --cwd's default, as nbclient
    for d in ('(default: 60)', '(default: 30)', '(default: no limit)', '(default: $JUPYTER_URL)', 'the number of cores'):
        assert d in flat, d

def test_a_papermill_command_line_runs_unchanged(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', ('a = 0\nb = "x"\nc = 0', ['parameters']), 'print(a, b, c, PAPERMILL_INPUT_PATH.endswith("in.ipynb"))')
    line = [src, tmp_path / 'out.ipynb', '-p', 'a', '1', '-r', 'b', '2', '-y', 'c: 3', '--log-output', '--no-progress-bar',
            '--report-mode', '--request-save-on-cell-execute', '--autosave-cell-every', '10', '--start-timeout', '30',
            '--execution-timeout', '60', '--log-level', 'INFO', '--inject-paths', '--engine', 'nbclient', '--prepare-execute',
            '--no-report-mode', '--start_timeout', '20', '-k', 'inprocess', '-l', 'python']
    r = hb(*line)
    assert r.returncode == 0, r.stderr
    nb = read(tmp_path / 'out.ipynb')
    assert texts(nb.cells[2]) == '1 2 3 True\n'
    if HAS_PAPERMILL:  # papermill accepts the same line (without our -k inprocess)
        r = pm(*[x for x in line[:-4]], '--prepare-only', '-k', 'python3')
        assert r.returncode == 0, r.stderr

# ---------------------------------------------------------------------------------------------------------------
# Parameters: types, precedence, injection

def test_p_values_are_typed_as_papermill_types_them(tmp_path):
    names = 'a b c d e f g h i'.split()
    src = mk_nb(tmp_path / 'in.ipynb', ('\n'.join(f'{n} = 0' for n in names), ['parameters']),
                'print([(type(v).__name__, v) for v in (a, b, c, d, e, f, g, h, i)])')
    r = hb(src, tmp_path / 'out.ipynb', '-p', 'a', 'True', '-p', 'b', 'False', '-p', 'c', 'None', '-p', 'd', '42', '-p', 'e', '-7',
           '-p', 'f', '2.5', '-p', 'g', '1e3', '-p', 'h', 'hello world', '-r', 'i', '42')
    assert r.returncode == 0, r.stderr
    got = texts(read(tmp_path / 'out.ipynb').cells[2])
    assert got == str([('bool', True), ('bool', False), ('NoneType', None), ('int', 42), ('int', -7), ('float', 2.5),
                       ('float', 1000.0), ('str', 'hello world'), ('str', '42')]) + '\n'

def _injected(path):
    nb = read(path)
    return [c.source for c in nb.cells if 'injected-parameters' in c.metadata.get('tags', [])]

@needs_papermill
def test_injected_cell_and_precedence_match_papermill(tmp_path):
    mk_nb(tmp_path / 'in.ipynb', ('x = 0', ['parameters']), 'print(x)')
    (tmp_path / 'p.yaml').write_text('x: from-file\nf: 1\nnested: {k: [1, 2.5, null, true]}\nwhen: 2024-01-02\n')
    b64 = base64.b64encode(b'x: from-b64\nb: yes\n').decode()
    lines = [  # the same name from every source, in scrambled command-line orders: -r > -p > -y > -f > -b
        ['-r', 'x', 'raw', '-p', 'x', '5', '-y', 'x: from-yaml', '-f', 'p.yaml', '-b', b64],
        ['-b', b64, '-y', 'x: from-yaml', '-p', 'x', '5', '-f', 'p.yaml'],
        ['-y', 'x: from-yaml', '-f', 'p.yaml', '-b', b64],
        ['-b', b64, '-f', 'p.yaml'],
        ['-p', 'q', 'it\'s "quoted"\\n\u00e9', '-p', 'n', 'nan', '-p', 'i', 'inf', '-p', 'm', '-inf', '-y', 'l: [a, {b: c}]'],
    ]
    for i, line in enumerate(lines):
        r1 = hb('in.ipynb', f'h{i}.ipynb', *line, '--prepare-only', cwd=tmp_path)
        r2 = pm('in.ipynb', f'p{i}.ipynb', *line, '--prepare-only', cwd=tmp_path)
        assert r1.returncode == 0 and r2.returncode == 0, (r1.stderr, r2.stderr)
        assert _injected(tmp_path / f'h{i}.ipynb') == _injected(tmp_path / f'p{i}.ipynb'), line
        assert read(tmp_path / f'h{i}.ipynb').metadata.papermill.parameters == read(tmp_path / f'p{i}.ipynb').metadata.papermill.parameters
    assert 'x = "raw"' in _injected(tmp_path / 'h0.ipynb')[0] and 'x = 5' in _injected(tmp_path / 'h1.ipynb')[0]
    assert 'x = "from-yaml"' in _injected(tmp_path / 'h2.ipynb')[0] and 'x = "from-file"' in _injected(tmp_path / 'h3.ipynb')[0]

def test_injection_next_to_the_parameters_cell_then_replaced(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', ('md', '# Title'), 'setup = 1', ('alpha = 0.5', ['parameters']), 'print(alpha)',
                ('beta = 1', ['parameters']))
    r = hb(src, tmp_path / 'once.ipynb', '-p', 'alpha', '0.6')
    assert r.returncode == 0 and r.stderr == f"headlesnb: ran 5 of 5 code cells in {_secs(r)}s, wrote {tmp_path / 'once.ipynb'}\n", r.stderr
    nb = read(tmp_path / 'once.ipynb')
    assert [c.metadata.tags for c in nb.cells] == [[], [], ['parameters'], ['injected-parameters'], [], ['parameters']]
    assert nb.cells[3].source == '# Parameters\nalpha = 0.6\n' and texts(nb.cells[4]) == '0.6\n'
    assert nb.metadata.papermill.parameters == {'alpha': 0.6}
    r = hb(tmp_path / 'once.ipynb', tmp_path / 'twice.ipynb', '-p', 'alpha', '0.7')  # an injected cell is replaced, not added to
    assert r.returncode == 0, r.stderr
    nb = read(tmp_path / 'twice.ipynb')
    assert by_tag(nb, 'injected-parameters') == [3] and nb.cells[3].source == '# Parameters\nalpha = 0.7\n'
    assert texts(nb.cells[4]) == '0.7\n' and len(nb.cells) == 6

def test_injection_at_the_top_with_a_warning_when_no_parameters_cell(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', 'print(alpha)')
    r = hb(src, tmp_path / 'out.ipynb', '-p', 'alpha', '1')
    assert r.returncode == 0, r.stderr
    assert "Input notebook does not contain a cell with tag 'parameters'" in r.stderr and 'Passed unknown parameter: alpha' in r.stderr
    nb = read(tmp_path / 'out.ipynb')
    assert nb.cells[0].metadata.tags == ['injected-parameters'] and texts(nb.cells[1]) == '1\n'

def test_a_parameter_name_that_is_not_an_identifier_is_refused(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', ('x = 1', ['parameters']), 'print(x)')
    (tmp_path / 'out.ipynb').write_text('precious')
    r = hb(src, tmp_path / 'out.ipynb', '-p', 'x=1;import os;os.system("touch pwned");y', '2')
    assert r.returncode == 2 and 'not a Python identifier' in r.stderr and 'Traceback' not in r.stderr
    assert (tmp_path / 'out.ipynb').read_text() == 'precious' and not (tmp_path / 'pwned').exists()

def test_output_path_is_formatted_with_the_parameters(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', ('region = "x"', ['parameters']), 'print(region)')
    r = hb(src, tmp_path / 'out_{region}.ipynb', '-p', 'region', 'eu')
    assert r.returncode == 0, r.stderr
    assert texts(read(tmp_path / 'out_eu.ipynb').cells[2]) == 'eu\n'

def test_help_notebook_lists_the_parameters():
    r = hb(PM_NBS / 'complex_parameters.ipynb', '--help-notebook')
    assert r.returncode == 0, r.stderr
    assert re.search(r'a: float \(default 2\.25\)\s+Variable a', r.stdout) and 'b: List[str]' in r.stdout

# ---------------------------------------------------------------------------------------------------------------
# Logs, progress, pipes

def test_log_output_streams_each_cell_in_order(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', 'print("one")', 'import time, sys\nprint("two-a", flush=True)\ntime.sleep(1.5)\nprint("two-b")',
                ('md', 'text'), '3 * 14')
    p = subprocess.Popen([*HB, str(src), str(tmp_path / 'out.ipynb'), '--log-output'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    seen = [(time.monotonic(), line.rstrip('\n')) for line in p.stderr]
    assert p.wait(60) == 0 and p.stdout.read() == ''
    lines = [l for _, l in seen if l]
    assert lines[:3] == ['Input Notebook:  ' + str(src), 'Output Notebook: ' + str(tmp_path / 'out.ipynb'), 'Executing notebook with kernel: inprocess']
    body = [re.sub(r'-+$', '', l) for l in lines[3:]]
    assert body[:-1] == ['Executing Cell 1', 'one', 'Ending Cell 1', 'Executing Cell 2', 'two-a', 'two-b', 'Ending Cell 2',
                         'Executing Cell 3', 'Ending Cell 3', 'Executing Cell 4', '42', 'Ending Cell 4']
    assert body[-1].startswith('headlesnb: ran 3 of 3 code cells in ')  # the summary
    t = {l: ts for ts, l in seen}
    assert t['two-b'] - t['two-a'] > 1.0  # "two-a" was shown while the cell was still running
    assert lines[3] == 'Executing Cell 1---------------------------------------'  # papermill's own format

def test_quiet_off_a_terminal_and_one_bar_line_when_asked(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', '1', '2')
    r = hb(src, tmp_path / 'out.ipynb')  # one summary line, nothing else
    assert r.returncode == 0 and r.stdout == '' and r.stderr == f"headlesnb: ran 2 of 2 code cells in {_secs(r)}s, wrote {tmp_path / 'out.ipynb'}\n"
    r = hb(src, tmp_path / 'out.ipynb', '--progress-bar')
    assert r.returncode == 0 and r.stderr.count('\n') == 2 and '2/2 cells' in r.stderr
    r = hb(src)
    assert r.returncode == 0 and r.stderr.endswith('s, no output written (none given)\n')
    r = hb(src, '-')
    assert r.returncode == 0 and r.stderr.endswith('s, wrote standard output\n') and read_str(r.stdout).cells[1].outputs

def test_stdin_to_stdout_pipes(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', ('n = 1', ['parameters']), 'import subprocess\nsubprocess.run(["echo", "from-a-child"])\nprint(n * 2)')
    r = hb('-', '-', '-p', 'n', '21', '--log-output', input=src.read_text())
    assert r.returncode == 0, r.stderr
    nb = nbformat.reads(r.stdout, as_version=4)  # stdout holds the notebook and nothing else
    nbformat.validate(nb)
    assert texts(nb.cells[2]) == '42\n'
    assert 'Executing Cell 3' in r.stderr and 'from-a-child' in r.stderr  # logs, and a child's fd-1 output, on stderr
    p = subprocess.run(f'cat {src} | {" ".join(HB)} -p n 5 | {sys.executable} -c "import sys, json; print(json.load(sys.stdin)[\'cells\'][2][\'outputs\'][-1][\'text\'])"',
                       shell=True, capture_output=True, text=True, timeout=120)  # no INPUT with a pipe on stdin: papermill's implicit -
    assert p.returncode == 0 and p.stdout == "['10\\n']\n", p.stderr

def test_outputs_are_not_capped(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', 'print("x" * 300_000)', '"y" * 250_000')
    r = hb(src, tmp_path / 'out.ipynb')
    assert r.returncode == 0, r.stderr
    nb = read(tmp_path / 'out.ipynb')  # a file gets what Jupyter would write: no truncation marker
    assert texts(nb.cells[0]) == 'x' * 300_000 + '\n' and len(nb.cells[1].outputs[0].data['text/plain']) == 250_002

def test_stdout_and_stderr_files(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', 'import sys\nprint("out-1"); print("err-1", file=sys.stderr)', 'print("out-2")')
    r = hb(src, tmp_path / 'out.ipynb', '--stdout-file', tmp_path / 'o.txt', '--stderr-file', tmp_path / 'e.txt')
    assert r.returncode == 0, r.stderr
    assert (tmp_path / 'o.txt').read_text() == 'out-1\nout-2\n' and (tmp_path / 'e.txt').read_text() == 'err-1\n'

# ---------------------------------------------------------------------------------------------------------------
# Failures, signals, bad input

def test_a_failing_cell_exit_1_banner_anchor_and_message(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', ('md', 'intro'), 'x = 1', 'print("before")\nraise ValueError("boom here")', 'print("never")')
    r = hb(src, tmp_path / 'out.ipynb')
    assert r.returncode == 1
    assert r.stderr.startswith('headlesnb: cell 3 (id c2) failed: ValueError: boom here\n')
    assert 'Traceback' in r.stderr and 'raise ValueError("boom here")' in r.stderr
    nb = read(tmp_path / 'out.ipynb')
    assert by_tag(nb, 'papermill-error-cell-tag') == [0, 3]
    assert "In [2]" in nb.cells[0].source and 'id="papermill-error-cell"' in nb.cells[3].source
    failing = nb.cells[4]
    assert texts(failing) == 'before\n' and failing.outputs[-1].ename == 'ValueError' and failing.execution_count == 2
    assert [c.metadata.papermill.status for c in nb.cells if 'papermill' in c.metadata] == ['completed', 'completed', 'failed', 'pending']
    assert nb.cells[5].execution_count is None and nb.metadata.papermill.exception is True
    r = hb(tmp_path / 'out.ipynb', tmp_path / 'again.ipynb', '--allow-errors')  # old banners go; --allow-errors runs on, exit 0
    assert r.returncode == 0 and '(--allow-errors: ran on)' in r.stderr
    nb = read(tmp_path / 'again.ipynb')
    assert by_tag(nb, 'papermill-error-cell-tag') == [] and texts(nb.cells[3]) == 'never\n'

def test_execution_timeout_fails_the_cell(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', 'while True: pass', 'print("never")')
    r = hb(src, tmp_path / 'out.ipynb', '--execution-timeout', '1')
    assert r.returncode == 1 and 'cell 1 (id c0) failed: ExecutionTimeout' in r.stderr
    assert read(tmp_path / 'out.ipynb').cells[2].outputs[-1].ename == 'ExecutionTimeout'  # after the banner and the anchor

def test_a_thread_a_cell_left_running_does_not_hold_the_finished_run(tmp_path):
    "In-process, a thread a cell started (not a daemon) kept the process alive after the run was written: it never exited"
    src = mk_nb(tmp_path / 'in.ipynb', 'import threading, time\nthreading.Thread(target=time.sleep, args=(600,), name="loader").start()\nprint("started")')
    r = hb(src, tmp_path / 'out.ipynb', timeout=60)  # (without the bound: 600 s)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[-1].startswith("headlesnb: ended without waiting for threads still running 10s after the work was done"), r.stderr
    assert r.stderr.rstrip().endswith(': loader'), r.stderr
    assert texts(read(tmp_path / 'out.ipynb').cells[0]) == 'started\n'

def test_a_cell_blocked_in_c_past_its_timeout_ends_an_in_process_run(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', 'print("first")', 'import itertools\nsum(itertools.repeat(1, 10**12))', 'print("never")')
    r = hb(src, tmp_path / 'out.ipynb', '--timeout', '1')  # nothing in this process can stop that C loop: the watchdog kills it
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert r.stderr.splitlines()[-1].startswith('headlesnb: cell 2 (id c1) is still running 10s past its 1s timeout: it is blocked in C code')
    assert texts(read(tmp_path / 'out.ipynb').cells[0]) == 'first\n'  # the cells before it were written
    r = hb(src, tmp_path / 'out.ipynb', '--timeout', '1', '-k', 'python3')  # a kernel process is killed instead, and the run reports it
    assert r.returncode == 1 and 'cell 2 (id c1) failed: ExecutionTimeout' in r.stderr

def _interrupt(tmp_path, body, sig, *args):
    src = mk_nb(tmp_path / 'in.ipynb', 'print("first")', f'print("started", flush=True)\n{body}', 'print("never")')
    out = tmp_path / 'out.ipynb'
    p = subprocess.Popen([*HB, str(src), str(out), '--log-output', *args], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, preexec_fn=_default_sigint)
    for line in p.stderr:
        if line.startswith('started'): break
    time.sleep(0.3)
    t = time.monotonic()
    p.send_signal(sig)
    rest = p.stderr.read()
    return p.wait(30), time.monotonic() - t, rest, read(out)

INTERRUPTED = 'headlesnb: interrupted in cell 2 (id c1); the outputs so far are written'

@pytest.mark.parametrize('body', ['while True: pass', 'import time\ntime.sleep(60)'], ids=['python-loop', 'blocked-in-C'])
def test_sigint_writes_partial_outputs_and_exits_130(tmp_path, body):
    rc, took, rest, nb = _interrupt(tmp_path, body, signal.SIGINT)
    assert rc == 130 and took < 10
    assert rest.strip().splitlines()[-1] == INTERRUPTED and 'Traceback' not in rest
    assert [c.metadata.papermill.status for c in nb.cells] == ['completed', 'failed', 'pending']
    assert texts(nb.cells[0]) == 'first\n' and texts(nb.cells[1]) == 'started\n'
    assert nb.cells[1].outputs[-1].ename == 'KeyboardInterrupt' and nb.cells[2].execution_count is None

@pytest.mark.parametrize('kernel', [[], ['-k', 'python3']], ids=['in-process', 'python3'])
def test_an_interrupted_run_names_its_cell_in_the_summary_and_the_notebook(tmp_path, kernel):
    "Ctrl-C in cell 2: the summary's failure and the line name that cell; in the notebook it failed and cell 3 never ran (on every kernel)"
    rc, took, rest, nb = _interrupt(tmp_path, 'import time\ntime.sleep(60)', signal.SIGINT, '--summary', str(tmp_path / 's.json'), *kernel)
    s = json.loads((tmp_path / 's.json').read_text())
    assert rc == 130 and s['status'] == 'interrupted' and rest.strip().splitlines()[-1] == INTERRUPTED, rest
    assert (s['failure']['cell_index'], s['failure']['cell_id'], s['failure']['ename']) == (1, 'c1', 'KeyboardInterrupt'), s['failure']
    assert [c.metadata.papermill.status for c in nb.cells] == ['completed', 'failed', 'pending']

def test_sigterm_is_handled_like_ctrl_c_with_143(tmp_path):
    rc, took, rest, nb = _interrupt(tmp_path, 'while True: pass', signal.SIGTERM)
    assert rc == 143 and texts(nb.cells[1]) == 'started\n' and 'Traceback' not in rest

def test_corrupt_or_missing_input_leaves_the_output_untouched(tmp_path):
    out = tmp_path / 'out.ipynb'
    out.write_text('precious')
    (tmp_path / 'junk.ipynb').write_text('{"cells": [')
    cases = [(tmp_path / 'junk.ipynb', 'junk.ipynb: not a readable notebook'), (tmp_path / 'missing.ipynb', 'missing.ipynb: no such notebook'),
             (tmp_path, 'is a folder')]
    for inp, msg in cases:
        r = hb(inp, out)
        assert r.returncode == 2 and msg in r.stderr and 'Traceback' not in r.stderr and r.stderr.count('\n') == 1, r.stderr
        assert out.read_text() == 'precious'
    r = hb('-', out, input='not a notebook')
    assert r.returncode == 2 and 'standard input: not a readable notebook' in r.stderr and out.read_text() == 'precious'
    r = hb(mk_nb(tmp_path / 'ok.ipynb', 'open("ran", "w").close()'), tmp_path)  # an output that is a folder: refused before running
    assert r.returncode == 2 and 'is a folder' in r.stderr and not (tmp_path / 'ran').exists()

def test_older_formats_are_converted_and_the_output_is_valid_nbformat_4_5(tmp_path):
    from nbformat import v3, validate
    old = v3.new_notebook(worksheets=[v3.new_worksheet(cells=[v3.new_code_cell(input='print("old")'), v3.new_text_cell('markdown', source='# md')])])
    (tmp_path / 'v3.ipynb').write_text(v3.writes_json(old))
    r = hb(tmp_path / 'v3.ipynb', tmp_path / 'out.ipynb')
    assert r.returncode == 0, r.stderr
    nb = read(tmp_path / 'out.ipynb')
    validate(nb)
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5) and texts(nb.cells[0]) == 'old\n' and all(c.id for c in nb.cells)

def test_a_notebook_in_another_language_never_runs_as_python(tmp_path):
    src = mk_nb(tmp_path / 'r.ipynb', 'print("this is R")', metadata={'kernelspec': {'name': 'ir', 'display_name': 'R', 'language': 'R'}})
    (tmp_path / 'out.ipynb').write_text('precious')
    r = hb(src, tmp_path / 'out.ipynb')  # no R kernel here
    assert r.returncode == 2 and r.stderr.startswith("headlesnb: this notebook needs the 'ir' kernel (R), which is not installed; installed: ")
    assert 'python3' in r.stderr and r.stderr.count('\n') == 1
    assert (tmp_path / 'out.ipynb').read_text() == 'precious'

def test_log_output_streams_from_a_kernel_process(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', 'import time\nprint("a", flush=True)\ntime.sleep(1.5)\nprint("b")')
    p = subprocess.Popen([*HB, str(src), str(tmp_path / 'out.ipynb'), '--log-output', '-k', 'python3'], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    seen = {line.rstrip('\n'): time.monotonic() for line in p.stderr}
    assert p.wait(60) == 0 and 'Executing notebook with kernel: python3' in seen
    assert seen['b'] - seen['a'] > 1.0  # "a" was shown while the cell still ran

@pytest.mark.parametrize('kernel', ['python3', 'inprocess'])  # in-process, os._exit ends the kernel, not the run
def test_a_dead_kernel_exits_138_and_the_cell_gets_the_error(tmp_path, kernel):
    src = mk_nb(tmp_path / 'in.ipynb', 'print("alive")', 'import os\nos._exit(5)', 'print("never")')
    r = hb(src, tmp_path / 'out.ipynb', '-k', kernel)
    assert r.returncode == 138, r.stderr
    assert 'cell 2 (id c1) failed: the kernel died' in r.stderr
    nb = read(tmp_path / 'out.ipynb')  # no banner: papermill (and nbclient) stop before one is written
    assert by_tag(nb, 'papermill-error-cell-tag') == [] and len(nb.cells) == 3
    assert nb.cells[1].id == 'c1' and any(o.output_type == 'error' for o in nb.cells[1].outputs)

# ---------------------------------------------------------------------------------------------------------------
# What nbclient stores, on both backends (issue 19): nbclient and ipykernel run here, live, for the reference

NBCLIENT_CASES = ['x = 1', ('print("skipped")', ['skip-execution']), '', 'import sys\nsys.exit()', 'print(x)', 'sys.exit(0)',
                  'raise SystemExit', 'print(x + 1)', 'h = display("a", display_id=True)', 'h.update("b")',
                  'from IPython.display import update_display\nupdate_display("c", display_id=h.display_id)\nprint("updated")']

def _cells(nb) -> list:
    "Per cell: its count and outputs, text joined (None for a markdown cell)"
    def out(o):
        o = {k: v for k, v in o.items() if k != 'transient'}
        if 'text' in o: o['text'] = ''.join(o['text'])
        if 'data' in o: o['data'] = {k: ''.join(v) if isinstance(v, list) else v for k, v in o['data'].items()}
        return o
    return [None if c.cell_type != 'code' else (c.execution_count, [out(o) for o in c.outputs]) for c in nb.cells]

@pytest.mark.parametrize('kernel', ['inprocess', 'python3'])
def test_allow_errors_stores_what_nbclient_stores(tmp_path, kernel):
    from nbclient import NotebookClient
    src = mk_nb(tmp_path / 'in.ipynb', *NBCLIENT_CASES)
    nb = read(src)
    for i in (1, 2):  # cells nbclient does not run keep what an earlier run left
        nb.cells[i].outputs, nb.cells[i].execution_count = [nbformat.v4.new_output('stream', name='stdout', text='old\n')], 7 + i
    nbformat.write(nb, src)
    NotebookClient(nb, kernel_name='python3', allow_errors=True, timeout=60, resources={'metadata': {'path': str(tmp_path)}}).execute()
    r = hb(src, tmp_path / 'out.ipynb', '--allow-errors', '-k', kernel)
    assert r.returncode == 0, r.stderr
    got, want = _cells(read(tmp_path / 'out.ipynb')), _cells(nb)
    assert got == want, [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert want[1] == (8, [{'output_type': 'stream', 'name': 'stdout', 'text': 'old\n'}]) and want[7][1][0]['text'] == '2\n'
    assert want[8][1][0]['data']['text/plain'] == "'c'"  # the display of cell 9, updated by cells 10 and 11
    r = hb(src, tmp_path / 'out.ipynb', '-k', kernel)  # without --allow-errors papermill's habit: sys.exit() stops the run, exit 0
    assert r.returncode == 0 and 'ran 2 of 11 code cells' in r.stderr, r.stderr
    out = read(tmp_path / 'out.ipynb')
    assert out.cells[3].metadata.papermill.status == 'failed' and out.cells[4].execution_count is None and not by_tag(out, 'papermill-error-cell-tag')

@pytest.mark.parametrize('kernel', ['inprocess', 'python3'])
def test_exit_ends_the_kernel_as_with_nbclient(tmp_path, kernel):
    "An ipykernel ends 0.1 s after exit(): nbclient runs the cell sent at once, then finds the kernel dead; so does headlesnb run"
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError
    src = mk_nb(tmp_path / 'in.ipynb', 'x = 1', 'exit()', 'import time\ntime.sleep(0.5)\nprint(x)', 'print("never")')
    nb = read(src)
    with pytest.raises(DeadKernelError):
        NotebookClient(nb, kernel_name='python3', allow_errors=True, timeout=60, resources={'metadata': {'path': str(tmp_path)}}).execute()
    assert texts(nb.cells[2]) == '1\n' and nb.cells[3].execution_count is None
    r = hb(src, tmp_path / 'out.ipynb', '--allow-errors', '-k', kernel)
    assert r.returncode == 138 and 'cell 4 (id c3) failed: the kernel died' in r.stderr, r.stderr
    out = read(tmp_path / 'out.ipynb')
    assert texts(out.cells[2]) == '1\n' and out.cells[3].outputs[-1].ename == 'DeadKernelError' and len(out.cells) == 4

# ---------------------------------------------------------------------------------------------------------------
# --prepare-only, --report-mode, --cwd

def test_prepare_only_injects_without_running(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', ('a = 1', ['parameters']), 'print(a)')
    r = hb(src, tmp_path / 'out.ipynb', '-p', 'a', '2', '--prepare-only')
    assert r.returncode == 0, r.stderr
    nb = read(tmp_path / 'out.ipynb')
    assert nb.cells[1].source == '# Parameters\na = 2\n' and all(c.execution_count is None and not c.outputs for c in nb.cells)

def test_report_mode_hides_code_inputs(tmp_path):
    src = mk_nb(tmp_path / 'in.ipynb', ('md', 'keep me'), ('a = 1', ['parameters']), 'print(a)')
    r = hb(src, tmp_path / 'out.ipynb', '-p', 'a', '3', '--report-mode')
    assert r.returncode == 0, r.stderr
    nb = read(tmp_path / 'out.ipynb')
    assert [c.metadata.get('jupyter', {}).get('source_hidden') for c in nb.cells] == [None, True, True, True]
    assert texts(nb.cells[3]) == '3\n'

def test_cwd_defaults_to_the_notebooks_folder(tmp_path):
    (tmp_path / 'nbdir').mkdir(); (tmp_path / 'other').mkdir()
    mk_nb(tmp_path / 'nbdir' / 'in.ipynb', 'import os; print(os.getcwd())')
    r = hb('nbdir/in.ipynb', 'out.ipynb', cwd=tmp_path)
    assert r.returncode == 0 and texts(read(tmp_path / 'out.ipynb').cells[0]) == f'{tmp_path / "nbdir"}\n'
    r = hb('nbdir/in.ipynb', 'out.ipynb', '--cwd', 'other', cwd=tmp_path)
    assert r.returncode == 0 and texts(read(tmp_path / 'out.ipynb').cells[0]) == f'{tmp_path / "other"}\n'
    r = hb('nbdir/in.ipynb', 'out.ipynb', '--cwd', 'nowhere', cwd=tmp_path)
    assert r.returncode == 2 and 'nowhere' in r.stderr

# ---------------------------------------------------------------------------------------------------------------
# Many notebooks

def test_jobs_runs_many_and_reports_a_failure(tmp_path):
    nbs = [mk_nb(tmp_path / f'n{i}.ipynb', ('k = 0', ['parameters']), f'import os, time\ntime.sleep(0.3)\nprint(k + {i}, os.getpid())')
           for i in range(3)]
    nbs.append(mk_nb(tmp_path / 'bad.ipynb', 'print("ok")', 'raise RuntimeError("nope")'))
    r = hb(*nbs, '--output-dir', tmp_path / 'out', '--jobs', '2', '-p', 'k', '10')
    assert r.returncode == 1, r.stderr
    progress = [l for l in r.stderr.splitlines() if re.match(r'\[\d/4\] ', l)]
    assert len(progress) == 4 and any('bad.ipynb: failed' in l and 'RuntimeError' in l for l in progress)
    rows = [l.split() for l in r.stdout.strip().splitlines()]
    assert rows[0] == ['notebook', 'status', 'cells', 'seconds', 'output']
    table = {Path(row[0]).name: row for row in rows[1:]}
    assert table['bad.ipynb'][1:3] == ['failed', '3/3'] and all(table[f'n{i}.ipynb'][1:3] == ['ok', '3/3'] for i in range(3))
    pids = set()
    for i in range(3):
        out = texts(read(tmp_path / 'out' / f'n{i}.ipynb').cells[2]).split()
        assert out[0] == str(10 + i)
        pids.add(out[1])
    assert len(pids) == 3  # each notebook in its own process
    bad = read(tmp_path / 'out' / 'bad.ipynb')  # the parameters went in at its top too (it has no parameters cell)
    assert by_tag(bad, 'papermill-error-cell-tag') == [0, 3] and by_tag(bad, 'injected-parameters') == [1]

def test_sigint_to_jobs_stops_every_child_with_partial_outputs(tmp_path):
    nbs = [mk_nb(tmp_path / f'n{i}.ipynb', f'open({str(tmp_path / f"started-{i}")!r}, "w").close()', 'while True: pass') for i in range(3)]
    p = subprocess.Popen([*HB, *map(str, nbs), '--output-dir', str(tmp_path / 'out'), '--jobs', '2'], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, preexec_fn=_default_sigint)
    deadline = time.monotonic() + 60
    while not all((tmp_path / f'started-{i}').exists() for i in range(2)) and time.monotonic() < deadline: time.sleep(0.1)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)  # to the parent only: it passes the Ctrl-C on to the running children
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and err.strip().splitlines()[-1] == 'headlesnb: interrupted', err
    assert not (tmp_path / 'started-2').exists()
    rows = {Path(l.split()[0]).name: l.split()[1] for l in out.strip().splitlines()[1:]}
    assert rows == {'n0.ipynb': 'interrupted', 'n1.ipynb': 'interrupted', 'n2.ipynb': 'not'}  # "not run"
    for i in range(2):
        nb = read(tmp_path / 'out' / f'n{i}.ipynb')
        assert [c.metadata.papermill.status for c in nb.cells] == ['completed', 'failed'] and nb.cells[1].outputs[-1].ename == 'KeyboardInterrupt'

def _gone(pid:int) -> bool:
    "Has process `pid` ended? (a zombie has: it waits for init to reap it)"
    try: return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] in 'ZX'
    except FileNotFoundError: return True

def left_running(pids:list, within:float) -> list:
    "Those of processes `pids` still running `within` s from now (then killed, so that none outlives the test)"
    deadline = time.monotonic() + within
    while not all(_gone(c) for c in pids) and time.monotonic() < deadline: time.sleep(0.05)
    alive = [c for c in pids if not _gone(c)]
    for c in alive: os.kill(c, signal.SIGKILL)
    return alive

@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='a parent death signal is Linux')
def test_sigkill_of_a_jobs_batch_takes_its_running_children_along(tmp_path):
    nbs = [mk_nb(tmp_path / f'n{i}.ipynb', f'import os\nopen({str(tmp_path / f"pid-{i}")!r}, "w").write(str(os.getpid()))', 'while True: pass')
           for i in range(2)]
    p = subprocess.Popen([*HB, *map(str, nbs), '--output-dir', str(tmp_path / 'out'), '--jobs', '2'], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    files = [tmp_path / f'pid-{i}' for i in range(2)]
    deadline = time.monotonic() + 60
    while not all(f.exists() and f.read_text() for f in files) and time.monotonic() < deadline: time.sleep(0.1)
    pids = [int(f.read_text()) for f in files]
    assert p.pid not in pids and not any(_gone(c) for c in pids)  # each notebook runs in a child of its own, busy
    p.kill(); p.wait()  # as a scheduler's timeout or the out-of-memory killer does: no chance to stop them
    alive = left_running(pids, 10)
    assert not alive, f'children still running after their parent was killed: {alive}'

def test_jobs_refuses_clashing_outputs_before_running(tmp_path):
    (tmp_path / 'a').mkdir(); (tmp_path / 'b').mkdir()
    x, y = mk_nb(tmp_path / 'a' / 'x.ipynb', '1'), mk_nb(tmp_path / 'b' / 'x.ipynb', '1')
    r = hb(x, y, '--output-dir', tmp_path / 'out')
    assert r.returncode == 2 and 'both be written' in r.stderr and not (tmp_path / 'out').exists()

# ---------------------------------------------------------------------------------------------------------------
# The Python API

def test_execute_notebook_has_papermills_signature_and_errors(tmp_path):
    mk_nb(tmp_path / 'in.ipynb', ('a = 1', ['parameters']), 'print(a * 2)', 'raise KeyError(a)')
    script = f'''
import inspect, sys
import headlesnb
from headlesnb import execute_notebook, PapermillExecutionError
if {HAS_PAPERMILL}:
    import papermill
    assert inspect.signature(execute_notebook) == inspect.signature(papermill.execute_notebook), inspect.signature(execute_notebook)
try: execute_notebook({str(tmp_path / "in.ipynb")!r}, {str(tmp_path / "out.ipynb")!r}, parameters=dict(a=21), progress_bar=False)
except PapermillExecutionError as e: print(e.cell_index, e.exec_count, e.ename, e.evalue, len(e.traceback) > 0, e.cell_id)
nb = execute_notebook({str(tmp_path / "in.ipynb")!r}, None, parameters=dict(a=1), progress_bar=False, allow_errors=True)
print(type(nb).__name__, nb.cells[2].outputs[0].text.strip())
try: execute_notebook({str(tmp_path / "in.ipynb")!r}, None, no_such_option=1)
except headlesnb.BadArgumentError as e: print('refused:', e)
'''
    r = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == '3 4 KeyError 21 True c2'  # the injected cell is cell 2: the failing one is index 3, In [4]
    assert lines[1] == 'NotebookNode 2'
    assert lines[2].startswith('refused: unknown argument(s) no_such_option')

# ---------------------------------------------------------------------------------------------------------------
# papermill's own test notebooks, run by both and compared cell by cell

# (notebook, extra arguments). Not compared, with reasons: tracebacks (the in-process kernel formats them with
# Python's traceback module, ipykernel with IPython's: issue 14) and the order of a cell's outputs of different
# kinds (the in-process kernel gives streams, then errors and displays: issue 14), so outputs are compared as
# sorted (type, name, text/value) tuples; ids of cells made by the run (random in both).
PM_CASES = [('simple_execute', ['-p', 'msg', 'Hello']), ('complex_parameters', ['-p', 'msg', 'world', '-y', 'b: [x, y]', '-p', 'c', '1.5']),
            ('no_parameters', ['-p', 'msg', 'top']), ('broken1', []), ('sysexit0', []), ('sysexit1', []), ('systemexit', []),
            ('report_mode_test', ['--report-mode', '-p', 'a', '5']), ('result_no_exec', ['--prepare-only', '-p', 'foo', '3']),
            ('nb_version_4.4', ['-p', 'var', '7'])]

def _norm_output(o):
    if o.output_type == 'stream': return ('stream', o.name, o.text)
    if o.output_type == 'error':  # a SyntaxError names the cell's file: ipykernel's and IPython's names differ
        return ('error', o.ename, re.sub(r'\([^()]*, line (\d+)\)$', r'(<cell>, line \1)', o.evalue))
    return (o.output_type, json.dumps(o.get('data', {}).get('text/plain')))

def _norm(nb, src_has_ids):
    cells = []
    for c in nb.cells:
        made = bool({'injected-parameters', 'papermill-error-cell-tag'} & set(c.metadata.get('tags', [])))
        pmd = c.metadata.get('papermill', {})
        cells.append(dict(id=c.id if src_has_ids and not made else None, type=c.cell_type, source=c.source, tags=c.metadata.get('tags'),
                          hidden=c.metadata.get('jupyter', {}).get('source_hidden'), count=c.get('execution_count'),
                          status=pmd.get('status'), exception=pmd.get('exception'),
                          outputs=sorted(map(_norm_output, c.get('outputs', []))), timed='execution' in c.metadata))
    md = nb.metadata.papermill
    return dict(cells=cells, parameters=md.get('parameters'), exception=md.get('exception'),
                input=Path(md.get('input_path') or '').name, language=nb.metadata.get('language_info', {}).get('name'))

@needs_papermill
def test_papermills_test_notebooks_match_papermills_outputs(tmp_path):
    work = tmp_path / 'w'
    shutil.copytree(PM_NBS, work)
    runs = {}
    for name, args in PM_CASES:
        r1 = hb(f'{name}.ipynb', f'{name}.hb.ipynb', *args, cwd=work)
        r2 = pm(f'{name}.ipynb', f'{name}.pm.ipynb', *args, '--no-progress-bar', cwd=work)
        runs[name] = (r1.returncode, r2.returncode)
        assert r1.returncode == r2.returncode, (name, r1.stderr, r2.stderr)
        has_ids = read(work / f'{name}.ipynb').nbformat_minor >= 5
        a, b = _norm(read(work / f'{name}.hb.ipynb'), has_ids), _norm(read(work / f'{name}.pm.ipynb'), has_ids)
        assert a == b, name
    assert runs['broken1'] == (1, 1) and runs['sysexit0'] == (0, 0) and runs['sysexit1'] == (1, 1) and runs['simple_execute'] == (0, 0)

@needs_papermill
def test_an_unknown_magic_fails_the_run_as_in_papermill(tmp_path):
    # ipykernel reports a UsageError as stderr text with an error reply; the in-process kernel as an error output (issue 14):
    # both fail the run at the same cell, with the banner
    for tool, out in ((hb, 'h.ipynb'), (pm, 'p.ipynb')):
        r = tool(PM_NBS / 'line_magic_error.ipynb', tmp_path / out)
        assert r.returncode == 1
        nb = read(tmp_path / out)
        assert by_tag(nb, 'papermill-error-cell-tag') == [0, 1] and nb.cells[2].metadata.papermill.status == 'failed'
        assert nb.cells[3].execution_count is None

# ---------------------------------------------------------------------------------------------------------------
# Bad input that once escaped as a traceback, other languages' parameters, papermill's -1 timeouts

def test_deeply_nested_parameters_are_a_clear_error(tmp_path):
    src, out = mk_nb(tmp_path / 'p.ipynb', ('x = 1', ['parameters']), 'print(x)'), tmp_path / 'out.ipynb'
    for depth in (300, 5000):  # (300: past Python's parser; 5000: past PyYAML's recursion)
        r = hb(src, out, '-y', 'x: ' + '[' * depth + '1' + ']' * depth)
        assert r.returncode == 2 and 'more than 100 deep' in r.stderr and r.stderr.count('\n') == 1, r.stderr[-500:]
    assert not out.exists()

def _shaped(path, md:dict, cell_md):
    path.write_text(json.dumps({'cells': [{'cell_type': 'code', 'id': 'c0', 'source': 'print(1)', 'metadata': cell_md, 'outputs': [],
                                           'execution_count': None}], 'metadata': md, 'nbformat': 4, 'nbformat_minor': 5}))
    return path

def test_malformed_metadata_is_a_clear_error_naming_the_input(tmp_path):
    out = tmp_path / 'out.ipynb'
    out.write_text('precious')
    cases = [({'kernelspec': 'python3'}, {}, 'metadata.kernelspec is not an object'), ({'language_info': 'python'}, {}, 'metadata.language_info'),
             ({'kernelspec': 5}, {}, 'metadata.kernelspec'), ({'papermill': 'x'}, {}, 'metadata.papermill'),
             ({}, {'tags': 5}, "cell 1's metadata.tags"), ({}, [], "cell 1 (index 0) is not a valid notebook cell: its metadata is a list, not an object"),
             ({}, {'tags': 'injected-parameters'}, "cell 1's metadata.tags is not a list of strings")]  # (a string was matched by substring)
    for i, (md, cell_md, said) in enumerate(cases):
        src = _shaped(tmp_path / f'bad{i}.ipynb', md, cell_md)
        r = hb(src, out, '-p', 'a', '1')
        assert r.returncode == 2 and f'bad{i}.ipynb: {said}' in r.stderr and r.stderr.count('\n') == 1, (md, cell_md, r.stderr[-500:])
    (tmp_path / 'deep.ipynb').write_text('{"cells":' + '[' * 100000)
    r = hb(tmp_path / 'deep.ipynb', out)
    assert r.returncode == 2 and 'deep.ipynb: not a readable notebook' in r.stderr and r.stderr.count('\n') == 1, r.stderr[-500:]
    assert out.read_text() == 'precious'

def _has_kernel(name:str) -> bool:
    from jupyter_client.kernelspec import find_kernel_specs
    return name in find_kernel_specs()

BASH = {'kernelspec': {'name': 'bash', 'display_name': 'Bash', 'language': 'bash'}}
needs_bash_kernel = pytest.mark.skipif(not _has_kernel('bash'), reason='no bash kernelspec (pip install bash_kernel; python -m bash_kernel.install)')

@needs_bash_kernel
def test_parameters_of_a_bash_notebook_stay_strings(tmp_path):
    src = mk_nb(tmp_path / 'b.ipynb', ('name="world"', ['parameters']), 'echo "hello $name"; echo "n=$n"; echo "${l[1]}"', metadata=BASH)
    evil = "x$(touch PWNED1)`touch PWNED2`; touch PWNED3 '\""
    r = hb(src, tmp_path / 'out.ipynb', '-p', 'name', evil, '-p', 'n', '3', '-y', 'l: [a, "$(touch PWNED4)"]')
    assert r.returncode == 0, r.stderr
    nb = read(tmp_path / 'out.ipynb')
    assert texts(nb.cells[2]) == f'hello {evil}\nn=3\n$(touch PWNED4)\n', texts(nb.cells[2])
    assert nb.cells[1].metadata.tags == ['injected-parameters'] and not list(tmp_path.glob('PWNED*'))

def test_parameters_for_a_language_without_a_translator_are_refused(tmp_path):
    src = mk_nb(tmp_path / 's.ipynb', 'println("x")', metadata={'kernelspec': {'name': 'scala', 'display_name': 'Scala', 'language': 'scala'}})
    r = hb(src, tmp_path / 'out.ipynb', '-p', 'a', '1')
    assert r.returncode == 2 and "parameters can be injected into Python, R, Julia and bash notebooks, and this one's language is 'scala'" in r.stderr, r.stderr
    assert not (tmp_path / 'out.ipynb').exists()

@needs_bash_kernel
def test_a_failing_bash_cell_is_said_by_its_exit_status(tmp_path):
    src = mk_nb(tmp_path / 'b.ipynb', 'echo one', 'false', metadata=BASH)
    r = hb(src, tmp_path / 'out.ipynb', '--summary', tmp_path / 's.json')
    assert r.returncode == 1 and 'headlesnb: cell 2 (id c1) failed: exit status 1' in r.stderr and ': : ' not in r.stderr, r.stderr

def test_minus_one_is_no_limit_for_the_timeouts_as_in_papermill(tmp_path):
    src = mk_nb(tmp_path / 'p.ipynb', 'print(6 * 7)')
    r = hb(src, tmp_path / 'out.ipynb', '--execution-timeout', '-1', '--start-timeout', '-1', '-k', 'python3')
    assert r.returncode == 0 and texts(read(tmp_path / 'out.ipynb').cells[0]) == '42\n', r.stderr
    r = hb(src, mk_nb(tmp_path / 'q.ipynb', 'print(1)'), '--output-dir', tmp_path / 'o', '--jobs', '2', '--start-timeout', '-1', '--timeout', '-1')
    assert r.returncode == 0 and (tmp_path / 'o' / 'q.ipynb').exists(), r.stderr  # (each child got -1 too)
    r = hb(src, tmp_path / 'out.ipynb', '--execution-timeout', '-2')
    assert r.returncode == 2 and 'or -1 for no limit' in r.stderr, r.stderr

def test_a_summary_refused_for_standard_output_is_not_written_there(tmp_path):
    src = mk_nb(tmp_path / 'p.ipynb', 'print(1)')
    for args in (['-'], ['-o', '-']):
        r = hb(src, *args, '--summary', '-')
        assert r.returncode == 2 and 'give --summary a file' in r.stderr and r.stdout == '', (r.stdout, r.stderr)

STUBBORN = 'import time\nwhile True:\n    try: time.sleep(0.1)\n    except KeyboardInterrupt: print("ignored", flush=True)'

@pytest.mark.parametrize('sig,code', [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_in_process_cell_that_catches_the_interrupt_still_ends_the_run(tmp_path, sig, code):
    rc, took, rest, nb = _interrupt(tmp_path, STUBBORN, sig)  # one signal: the run ends after a grace of 5 s
    assert rc == code and took < 20 and 'caught the interrupt and ran on' in rest and 'Traceback' not in rest, rest
    assert [c.metadata.papermill.status for c in nb.cells] == ['completed', 'failed', 'pending']
    assert texts(nb.cells[1]).startswith('started\nignored\n') and nb.cells[2].execution_count is None

def test_ctrl_c_past_a_cells_timeout_is_the_users(tmp_path):
    "The kernel stops a timed-out cell with a signal of its own, so Ctrl-C then is still the user's: a second one ends the run at once (it was ignored till the watchdog's kill, 137)"
    src = mk_nb(tmp_path / 'in.ipynb', f'print("started", flush=True)\n{STUBBORN}', 'print("never")')
    p = subprocess.Popen([*HB, str(src), str(tmp_path / 'out.ipynb'), '--log-output', '--execution-timeout', '2'], stderr=subprocess.PIPE,
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, preexec_fn=_default_sigint)
    for line in p.stderr:
        if line.startswith('started'): break
    time.sleep(2.5)  # past the timeout: the kernel is stopping the cell, which runs on
    p.send_signal(signal.SIGINT); time.sleep(0.3); p.send_signal(signal.SIGINT)
    rest = p.stderr.read()
    assert p.wait(30) == 130 and 'caught the interrupt and ran on' in rest, rest

def test_an_in_process_cell_that_catches_the_interrupt_and_ends_stops_the_run_there(tmp_path):
    rc, took, rest, nb = _interrupt(tmp_path, 'import time\ntry: time.sleep(30)\nexcept KeyboardInterrupt: print("caught")', signal.SIGINT)
    assert rc == 130 and took < 10 and rest.strip().splitlines()[-1] == INTERRUPTED, rest
    assert texts(nb.cells[1]) == 'started\ncaught\n' and nb.cells[2].execution_count is None and texts(nb.cells[2]) == ''

def test_an_output_that_is_a_fifo_is_written_through_once_and_stays_a_fifo(tmp_path):
    import threading
    src = mk_nb(tmp_path / 'p.ipynb', 'print(1)', 'print(2)')
    fifo = tmp_path / 'fifo'; os.mkfifo(fifo)
    (tmp_path / 'link').symlink_to(fifo)
    for target in (fifo, tmp_path / 'link'):
        got = []
        reader = threading.Thread(target=lambda: got.append(open(fifo, 'rb').read()), daemon=True); reader.start()
        r = hb(src, target, timeout=60)
        reader.join(10)
        assert r.returncode == 0 and fifo.is_fifo() and (tmp_path / 'link').is_symlink(), (target, r.stderr)
        assert texts(read_str(got[0].decode()).cells[1]) == '2\n'  # one whole notebook, not one per save

def test_double_dash_ends_the_options_here_and_in_a_batchs_children(tmp_path):
    mk_nb(tmp_path / '-k.ipynb', 'print(1)'); mk_nb(tmp_path / '-p.ipynb', 'print(2)')
    r = hb('--', '-k.ipynb', 'out.ipynb', cwd=tmp_path)
    assert r.returncode == 0 and texts(read(tmp_path / 'out.ipynb').cells[0]) == '1\n', r.stderr
    r = hb('--output-dir', 'o', '--', '-k.ipynb', '-p.ipynb', cwd=tmp_path)
    assert r.returncode == 0 and texts(read(tmp_path / 'o' / '-p.ipynb').cells[0]) == '2\n', r.stderr

def test_output_dir_dash_is_refused_up_front(tmp_path):
    r = hb(mk_nb(tmp_path / 'p.ipynb', 'open("ran", "w").close()'), '--output-dir', '-')
    assert r.returncode == 2 and 'standard output cannot hold several notebooks' in r.stderr and not (tmp_path / 'ran').exists(), r.stderr

def test_the_summary_names_the_input_whatever_stops_the_run(tmp_path):
    src = mk_nb(tmp_path / 'p.ipynb', 'print(1)')
    r = hb(src, tmp_path / 'o.ipynb', '--summary', tmp_path / 's.json', '-k', 'nosuchkernel')  # (refused before the run starts)
    s = json.loads((tmp_path / 's.json').read_text())
    assert r.returncode == 2 and s['input'] == str(src) and s['status'] == 'error', (r.stderr, s)

def test_cwd_that_is_a_file_is_said_to_be_one(tmp_path):
    (tmp_path / 'afile').write_text('x')
    r = hb(mk_nb(tmp_path / 'p.ipynb', 'print(1)'), '--cwd', tmp_path / 'afile')
    assert r.returncode == 2 and f'--cwd {tmp_path / "afile"}: not a folder' in r.stderr, r.stderr
