"""What a new user's first hour hit (audit newuser): a stray third path, a Solveit dialog, `--inject-paths` from another
folder, `--stdout-file -` into a closed pipe (a mistyped server `--root`: test_fronts_options). The real `headlesnb` command in subprocesses."""
import hashlib, json, os, re, subprocess, sys
from pathlib import Path
import nbformat, pytest

CLI = [sys.executable, '-m', 'headlesnb.fronts.cli']
KS = {'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}}

def hb(*args, cwd=None, timeout=120):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)

def mk_nb(path, *sources, metadata=KS):
    nb = nbformat.v4.new_notebook(metadata=dict(metadata))
    for i, s in enumerate(sources):
        c = nbformat.v4.new_code_cell(s); c.id = f'c{i}'
        nb.cells.append(c)
    nbformat.write(nb, path)
    return path

def md5(p) -> str: return hashlib.md5(Path(p).read_bytes()).hexdigest()

# ---------------------------------------------------------------------------------------------------------------
# N3: a third path without a batch option is an unexpected argument, as papermill says

def test_a_third_path_without_a_batch_option_is_refused_and_nothing_changes(tmp_path):
    t, other = mk_nb(tmp_path / 't.ipynb', 'x = 1'), mk_nb(tmp_path / 'other.ipynb', 'y = 2')
    out = mk_nb(tmp_path / 'out.ipynb', 'old = 0')
    before = {p: md5(p) for p in (t, out, other)}
    r = hb('run', t, out, other)
    assert r.returncode == 2, r.stderr
    assert str(other) in r.stderr and 'quote' in r.stderr and '--output-dir' in r.stderr, r.stderr
    assert 'notebook' not in r.stdout and {p: md5(p) for p in (t, out, other)} == before  # no batch table, nothing run or written
    # what an unquoted `-p title my report` leaves behind: the extra word is named, the output is not taken for an input
    r = hb('run', t, tmp_path / 'new_out.ipynb', '-p', 'title', 'my', 'report')
    assert r.returncode == 2 and 'report' in r.stderr and 'no such notebook' not in r.stderr, r.stderr
    assert not (tmp_path / 'new_out.ipynb').exists()

def test_the_documented_batch_forms_still_run(tmp_path):
    a, b, c = (mk_nb(tmp_path / f'{n}.ipynb', f'print("{n}")') for n in 'abc')
    r = hb('run', a, b, c, '--output-dir', tmp_path / 'out', '--jobs', '2')
    assert r.returncode == 0 and all((tmp_path / 'out' / f'{n}.ipynb').exists() for n in 'abc'), r.stderr
    r = hb('run', a, b, c, '--jobs', '2')  # several notebooks checked, each in its own process
    assert r.returncode == 0 and r.stderr.count('ok') == 3, r.stderr

# ---------------------------------------------------------------------------------------------------------------
# N6: a Solveit dialog runs its code; its prompts and their replies stay as they are

def mk_dialog(path):
    nb = nbformat.v4.new_notebook(metadata={'solveit': {'mode': 'learning', 'ver': 2}})
    code1 = nbformat.v4.new_code_cell('x = 2\nprint("first", x)'); code1.id = 'aaaa0001'
    prompt = nbformat.v4.new_code_cell('%%prompt\nWhat is 2+2?', metadata={'solveit_ai': True}); prompt.id = 'aaaa0002'
    prompt.outputs = [nbformat.v4.new_output('display_data', data={'text/markdown': 'Four.'}, metadata={'is_ai_res': True})]
    note = nbformat.v4.new_markdown_cell('A note'); note.id = 'aaaa0003'
    code2 = nbformat.v4.new_code_cell('print("second", x * 21)'); code2.id = 'aaaa0004'
    nb.cells = [code1, prompt, note, code2]
    nbformat.write(nb, path)
    return path

@pytest.mark.parametrize('kernel', [None, 'python3'])
def test_a_dialog_runs_its_code_and_keeps_its_prompts_replies_in_place(tmp_path, kernel):
    d = mk_dialog(tmp_path / 'd.ipynb')
    prompt_before = nbformat.read(d, 4).cells[1]
    r = hb('run', d, '--inplace', *(['-k', kernel] if kernel else []))
    assert r.returncode == 0, r.stderr
    assert '1 prompt' in r.stderr and 'left as' in r.stderr, r.stderr  # said, not silent
    cells = nbformat.read(d, 4).cells
    assert cells[1].source == prompt_before.source and cells[1].outputs == prompt_before.outputs  # the reply is kept
    out = lambda c: ''.join(o.get('text', '') for o in c.outputs)
    assert out(cells[0]) == 'first 2\n' and out(cells[3]) == 'second 42\n'

# ---------------------------------------------------------------------------------------------------------------
# N7: --inject-paths names the notebooks from the kernel's folder (the notebook's own), not the caller's

def test_injected_local_paths_are_absolute_and_urls_unchanged(tmp_path):
    (tmp_path / 'pm').mkdir()
    mk_nb(tmp_path / 'pm' / 'selfpath.ipynb', 'import os\nprint(os.path.exists(PAPERMILL_INPUT_PATH), PAPERMILL_INPUT_PATH, PAPERMILL_OUTPUT_PATH)')
    r = hb('run', 'pm/selfpath.ipynb', 'pm/out.ipynb', '--inject-paths', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = ''.join(o.get('text', '') for o in nbformat.read(tmp_path / 'pm' / 'out.ipynb', 4).cells[-1].outputs)
    assert text.split() == ['True', str(tmp_path / 'pm' / 'selfpath.ipynb'), str(tmp_path / 'pm' / 'out.ipynb')], text
    from headlesnb.fronts.run_exec import collect_parameters
    got = collect_parameters(paths={'PAPERMILL_INPUT_PATH': 's3://bucket/in.ipynb', 'PAPERMILL_OUTPUT_PATH': '-'})
    assert got == {'PAPERMILL_INPUT_PATH': 's3://bucket/in.ipynb', 'PAPERMILL_OUTPUT_PATH': '-'}

# ---------------------------------------------------------------------------------------------------------------
# N8: --stdout-file - into a pipe that closes: no traceback, the stream named, exit 74 (an output not written)

@pytest.mark.parametrize('kernel', [None, 'python3'])
def test_a_closed_stdout_file_pipe_is_named_without_a_traceback(tmp_path, kernel):
    big = mk_nb(tmp_path / 'big.ipynb', 'for i in range(200000): print(i)')
    p = subprocess.Popen([*CLI, 'run', str(big), str(tmp_path / 'o.ipynb'), '--stdout-file', '-', *(['-k', kernel] if kernel else [])],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == '0\n'
    p.stdout.close()  # as `| head -1` does
    err = p.stderr.read()
    assert p.wait(120) == 74, err
    assert 'Traceback' not in err and 'Exception' not in err, err
    assert '--stdout-file' in err and 'Broken pipe' in err, err
    assert ''.join(o['text'] for o in nbformat.read(tmp_path / 'o.ipynb', 4).cells[0].outputs).endswith('199999\n')  # the notebook has it all

# ---------------------------------------------------------------------------------------------------------------
# Python 3.13 logs what an `io` object's finaliser fails at (3.11 and 3.12 in development mode, -X dev): the README's
# main job there ended with two "Exception ignored" tracebacks, as the in-process kernel's streams flushed into a module torn
# down, and the unraisable hook this kernel puts in front failed on its own names, gone too

def test_an_in_process_run_ends_without_a_word_from_the_interpreters_end(tmp_path):
    mk_nb(tmp_path / 'a.ipynb', 'print("hi")', '1 + 1', metadata={})
    r = subprocess.run([sys.executable, '-X', 'dev', *CLI[1:], 'run', tmp_path / 'a.ipynb', '--output', tmp_path / 'out.ipynb'],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and re.fullmatch(rf"headlesnb: ran 2 of 2 code cells in [\d.]+s, wrote {re.escape(str(tmp_path / 'out.ipynb'))}\n", r.stderr), r.stderr
