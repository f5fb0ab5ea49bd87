"The `headlesnb` command as a real subprocess: exit codes, outputs written, errors shown"
import json, re, subprocess, sys
from pathlib import Path
import nbformat

def nb_file(path, sources):
    cells = [dict(cell_type='code', id=f'c{i}', metadata={}, outputs=[], execution_count=None, source=s) for i, s in enumerate(sources)]
    path.write_text(json.dumps(dict(cells=cells, metadata={}, nbformat=4, nbformat_minor=5)))
    return path

def run(*args, cwd=None):
    return subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)

def test_version():
    r = subprocess.run(['headlesnb', '--version'], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith('headlesnb ')

def test_success_writes_outputs_and_leaves_input(tmp_path):
    src = nb_file(tmp_path / 'ok.ipynb', ['x = 6', 'print(x * 7)'])
    before = src.read_text()
    r = run('run', src, '--output', tmp_path / 'out' / 'ok.out.ipynb')
    assert r.returncode == 0, r.stderr
    # no progress bar when stderr is not a terminal: one summary line, nothing else
    assert re.fullmatch(r'headlesnb: ran 2 of 2 code cells in [0-9.]+m?s, wrote .*ok\.out\.ipynb\n', r.stderr), r.stderr
    out = nbformat.read(tmp_path / 'out' / 'ok.out.ipynb', as_version=4)
    nbformat.validate(out)
    assert ''.join(out.cells[1].outputs[0]['text']) == '42\n'
    assert src.read_text() == before

def test_failure_exits_1_and_shows_the_error(tmp_path):
    src = nb_file(tmp_path / 'bad.ipynb', ['a = 1', 'raise ValueError("boom here")', 'b = 2'])
    r = run('run', src, '--inplace')
    assert r.returncode == 1
    assert 'cell 2 (id c1) failed' in r.stderr and 'ValueError' in r.stderr and 'boom here' in r.stderr
    nb = nbformat.read(src, as_version=4)  # papermill's banner at the top, its anchor just before the failing cell
    assert [c.metadata.get('tags') for c in nb.cells] == [['papermill-error-cell-tag'], [], ['papermill-error-cell-tag'], [], []]
    assert nb.cells[3].outputs[0]['output_type'] == 'error' and nb.cells[4].execution_count is None

def test_allow_errors_runs_everything(tmp_path):
    src = nb_file(tmp_path / 'bad.ipynb', ['raise ValueError("x")', 'print("after")'])
    r = run('run', src, '--allow-errors', '--output', tmp_path / 'o.ipynb')
    assert r.returncode == 0
    assert ''.join(nbformat.read(tmp_path / 'o.ipynb', as_version=4).cells[1].outputs[0]['text']) == 'after\n'

def test_timeout_interrupts_a_cell(tmp_path):
    src = nb_file(tmp_path / 'slow.ipynb', ['while True: pass', 'print("never")'])
    r = run('run', src, '--timeout', '1')
    assert r.returncode == 1 and 'timeout' in r.stderr.lower()

def test_bad_input(tmp_path):
    assert run('run', tmp_path / 'missing.ipynb').returncode == 2
    (tmp_path / 'junk.ipynb').write_text('not json')
    r = run('run', tmp_path / 'junk.ipynb')
    assert r.returncode == 2 and 'junk.ipynb' in r.stderr and 'Traceback' not in r.stderr
    ok = nb_file(tmp_path / 'ok.ipynb', ['1'])
    assert run('run', ok, '--inplace', '--output', tmp_path / 'x.ipynb').returncode == 2

def test_relative_paths_in_the_notebook_see_its_folder(tmp_path):
    (tmp_path / 'data.txt').write_text('hello')
    src = nb_file(tmp_path / 'reader.ipynb', ["print(open('data.txt').read())"])
    r = run('run', src, cwd='/')
    assert r.returncode == 0, r.stderr

def test_example_notebook_runs(tmp_path):
    ex = Path(__file__).parent.parent / 'examples' / 'hello.ipynb'
    r = run('run', ex, '--output', tmp_path / 'hello.out.ipynb')
    assert r.returncode == 0, r.stderr
    outs = [o for c in nbformat.read(tmp_path / 'hello.out.ipynb', as_version=4).cells for o in c.get('outputs', [])]
    assert any('image/png' in o.get('data', {}) for o in outs)

def test_python_dash_m_headlesnb_is_the_same_program(tmp_path):
    "`python -m headlesnb`, as an MCP client's configuration names a venv's Python: the command line, and an MCP server over stdio"
    import anyio, os
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    src = nb_file(tmp_path / 'ok.ipynb', ['print(6 * 7)'])
    r = subprocess.run([sys.executable, '-m', 'headlesnb', 'run', str(src), '--inplace'], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ''.join(nbformat.read(src, as_version=4).cells[0].outputs[0]['text']) == '42\n'
    r = subprocess.run([sys.executable, '-m', 'headlesnb', 'nonsense'], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith('usage: headlesnb ') and 'Traceback' not in r.stderr
    async def session():
        params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb', 'mcp', '--root', str(tmp_path)], env=dict(os.environ))
        async with stdio_client(params) as (rd, wr), ClientSession(rd, wr) as s:
            await s.initialize()
            await s.call_tool('use_notebook', dict(notebook_name='ok', mode='connect'))
            return (await s.call_tool('execute_code', dict(code='6 * 7'))).content[0].text
    assert anyio.run(session) == '42'

def test_a_child_process_handed_sys_stdout_writes_to_the_process_not_into_the_protocol(tmp_path):
    """`subprocess.run(cmd, stdout=sys.stdout)` in an in-process cell works as under ipykernel: the child writes to the
    process's own stream. For `headlesnb run` that is its standard output; for `headlesnb mcp` over stdio it is standard
    error, so the JSON-RPC stream stays whole and the next call is answered"""
    import anyio, os
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    child = 'import subprocess, sys; subprocess.run([sys.executable, "-c", "print(\'from-the-child\')"], stdout=sys.stdout, check=True)'
    src = nb_file(tmp_path / 'child.ipynb', [child, 'print("after")'])
    r = run('run', src, '--output', tmp_path / 'child.out.ipynb')
    assert r.returncode == 0, r.stderr
    assert r.stdout == 'from-the-child\n'
    assert ''.join(nbformat.read(tmp_path / 'child.out.ipynb', as_version=4).cells[1].outputs[0]['text']) == 'after\n'
    errlog = (tmp_path / 'server.err').open('w+')
    async def session():
        params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb', 'mcp', '--root', str(tmp_path)], env=dict(os.environ))
        async with stdio_client(params, errlog=errlog) as (rd, wr), ClientSession(rd, wr) as s:
            await s.initialize()
            await s.call_tool('use_notebook', dict(notebook_name='child', mode='connect'))
            got = await s.call_tool('execute_code', dict(code=child + '\n"done"'))
            return got.structured_content['status'], (await s.call_tool('ping', {})).content[0].text
    assert anyio.run(session) == ('ok', 'pong')
    errlog.seek(0)
    assert 'from-the-child' in errlog.read()
