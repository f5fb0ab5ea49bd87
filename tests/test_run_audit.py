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
