"""Kernels chosen and used through the managers, the MCP server and `headlesnb run` (issue 14's wiring).

The backends themselves are tested in test_kernel.py (in-process), test_subkernel.py and test_remote.py; here the
managers pick them: a named kernelspec runs in its own process, a notebook in another language runs on its own
kernelspec or is refused naming it, a dying kernel costs one cell, variables are listed on every backend, MCP's
use_notebook/connect_to_jupyter reach a real Jupyter server, and `headlesnb run` runs this project's notebooks.
"""
import json, os, subprocess, sys, time
from pathlib import Path

import psutil, pytest
from headlesnb import NotebookManager, DialogManager
from headlesnb.errors import KernelError
from test_mcp import stdio_session, ok, err, run
from test_remote import jupyter_server  # noqa: F401  (a fixture: a real `jupyter server` on 127.0.0.1, stopped by PID)

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(300)


def _nb(path:Path, kernelspec:dict, *sources):
    path.write_text(json.dumps({'cells': [{'cell_type': 'code', 'id': f'c{i}', 'metadata': {}, 'source': s, 'outputs': [],
                                           'execution_count': None} for i, s in enumerate(sources)],
                                'metadata': {'kernelspec': kernelspec}, 'nbformat': 4, 'nbformat_minor': 5}))

def _text(r): return ''.join(''.join(o.get('text', '')) + ''.join(o.get('data', {}).get('text/plain', '')) for o in r['outputs'])


def test_a_named_kernel_runs_in_its_own_process_and_dies_alone(tmp_path):
    with NotebookManager(tmp_path, kernel='python3') as nm:
        nm.use_notebook('nb', mode='create')
        pid = int(_text(nm.execute_code('import os; os.getpid()')))
        assert pid != os.getpid() and psutil.pid_exists(pid)
        k = nm.list_kernels()[0]
        assert (k['backend'], k['kernel'], k['pid'], k['status']) == ('subprocess', 'python3', pid, 'idle')
        nm.execute_code('xs = [1, 2, 3]')
        assert [(v['name'], v['type'], v['len']) for v in nm.list_variables()] == [('xs', 'list', 3)]
        assert nm.inspect_variable('xs')['repr'] == '[1, 2, 3]'
        r = nm.insert_execute_code_cell(-1, 'import os; os._exit(5)')
        assert r['status'] == 'dead' and 'died' in r['error']['evalue'].lower(), r
        assert _text(nm.execute_code('6 * 7')) == '42'  # a fresh kernel, and we are still here
        new = nm.list_kernels()[0]['pid']
    assert not psutil.pid_exists(new) or psutil.Process(new).status() == psutil.STATUS_ZOMBIE  # closing stopped it


def test_a_notebook_runs_on_its_language_or_is_refused_naming_its_kernel(tmp_path):
    _nb(tmp_path / 'r.ipynb', {'name': 'ir', 'language': 'R', 'display_name': 'R'}, 'print("hi")')
    _nb(tmp_path / 'sh.ipynb', {'name': 'bash', 'language': 'bash', 'display_name': 'Bash'}, 'echo "from $0"')
    with NotebookManager(tmp_path) as nm:
        nm.use_notebook('r', 'r.ipynb')
        with pytest.raises(KernelError, match="this notebook needs the 'ir' kernel \\(R\\), which is not installed"): nm.execute_cell(0)
        assert nm.read_cell(0)['outputs'] == []  # nothing ran as Python
        nm.use_notebook('sh', 'sh.ipynb')
        r = nm.execute_cell(0)
        assert r['status'] == 'ok' and 'bash' in _text(r)
        assert nm.list_kernels()[1]['kernel'] == 'bash'


def test_dialogs_choose_their_kernel_too(tmp_path):
    with DialogManager(tmp_path) as dm:
        dm.use_dialog('d', mode='create', kernel='python3')
        m = dm.add_message('import os; os.getpid()', 'code')
        r = dm.run_message(m['id'])
        assert r['status'] == 'ok' and int(r['ai_output'].strip()) != os.getpid()
        assert [v['name'] for v in dm.list_variables()] == ['os'] or dm.list_variables() == []  # modules are not variables


def test_mcp_picks_kernels_and_lists_variables(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', notebook_path='nb.ipynb', mode='create', kernel='python3')
            await ok(s, 'execute_code', code='answer = 42')
            kernels = await ok(s, 'list_kernels')
            assert '\tnb\tsubprocess\t' in kernels.splitlines()[1], kernels  # JMS's columns, then notebook, backend
            assert 'answer\tint\t\t42' in await ok(s, 'list_variables')
            assert (await ok(s, 'inspect_variable', name='answer')).startswith('answer: int')
            assert 'not installed' in await err(s, 'use_notebook', notebook_name='r', notebook_path='r.ipynb', mode='create', kernel='ir')
            assert not (tmp_path / 'r.ipynb').exists()
    run(main)


def test_mcp_runs_notebooks_on_a_real_jupyter_server(tmp_path, jupyter_server):
    srv = jupyter_server
    before = srv.kernel_ids()
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'connect_to_jupyter', jupyter_url=srv.url, jupyter_token=srv.token)
            await ok(s, 'use_notebook', notebook_name='nb', notebook_path='nb.ipynb', mode='create')
            out = await ok(s, 'insert_execute_code_cell', cell_index=-1, cell_source='import os; os.getpid()')
            kernels = await ok(s, 'list_kernels')
            kid = kernels.splitlines()[1].split('\t')[0]  # JMS's ID: the server's kernel id
            assert '\tnb\tremote\t' in kernels and kid in srv.kernel_ids() - before, kernels
            assert str(os.getpid()) not in out
            assert '7' in await ok(s, 'execute_code', code='3 + 4', kernel_id=kid)  # attached by id, not a notebook's
            await ok(s, 'unuse_notebook', notebook_name='nb')
            for _ in range(100):
                if kid not in srv.kernel_ids(): break
                time.sleep(0.1)
            assert kid not in srv.kernel_ids()  # the kernel we started there is shut down with its notebook
    run(main)


NOTEBOOKS = sorted(p.name for p in (REPO / 'nbs').glob('*.ipynb'))

@pytest.mark.parametrize('name', NOTEBOOKS)
def test_headlesnb_run_runs_this_projects_notebooks(name, tmp_path):
    "Every notebook of nbs/ runs under `headlesnb run` (in-process, in the notebook's folder), as nbdev-test runs it"
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', 'run', str(REPO / 'nbs' / name), str(tmp_path / name)],
                       capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert r.returncode == 0, f'{name}: exit {r.returncode}\n{r.stderr[-3000:]}'
