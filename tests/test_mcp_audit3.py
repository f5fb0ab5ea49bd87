"""Budgets audit (notes/audit/budgets.md) B5, B7, B8, B11, end to end: `python -m headlesnb.fronts.mcp` as a real subprocess over
stdio, driven by the official `mcp` client.

B5: the per-output cap covers every field of an output, not only its text: a 30 MB JSON and a big PNG are replaced in the file by
    a line saying what they were, and `--output-limit` changes the cap.
B7: `read_output(run_id=...)` of an `execute_code` run whose notebook was closed says why its outputs are gone, not "0 outputs".
B8: `read_cell` of a cell with a long source answers within one budget, its source's cut saying what of the source went and how to read it.
B11: a kernelspec whose kernel.json is broken is listed as unusable with why, `use_notebook(kernel=...)` says where it is and what is
     wrong, and the server's log tells of it in one line, not a traceback per call.
"""
import json, os, re, sys
from contextlib import asynccontextmanager

import nbformat
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from headlesnb.fronts.mcp_format import McpOptions
from test_mcp import err, ok, run, server_args, text

pytestmark = pytest.mark.timeout(300)

BUDGET = McpOptions().text_limit  # characters of text in one answer (the server's default)


@asynccontextmanager
async def session(root, *extra, env=None, errlog=os.devnull):
    "A `ClientSession` on the MCP server over stdio, with `env` added to ours and its stderr in `errlog`"
    params = StdioServerParameters(command=sys.executable, args=server_args(root, *extra), env={**os.environ, **(env or {})})
    with open(errlog, 'w') as f:
        async with stdio_client(params, errlog=f) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


def stored_outputs(path) -> list:
    nb = nbformat.read(str(path), 4)
    nbformat.validate(nb)  # what the cap leaves is still a valid notebook
    return [o for c in nb.cells for o in c.get('outputs', [])]


BIG_JSON = "from IPython.display import display\ndisplay({'application/json': {'a': 'x' * 30_000_000}, 'text/plain': '<J>'}, raw=True)"
BIG_PNG = ("import base64\nfrom IPython.display import display\n"
           "display({'image/png': base64.b64encode(b'\\x89PNG\\r\\n\\x1a\\n' + b'\\0' * 12_000_000).decode()}, raw=True)")  # 16 MB of base64


def test_the_per_output_cap_covers_json_and_images(tmp_path):
    async def main():
        async with session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            for src in (BIG_JSON, BIG_PNG): await ok(s, 'insert_execute_code_cell', cell_index=-1, cell_source=src)
            await ok(s, 'save')
        [j, p] = [o['data'] for o in stored_outputs(tmp_path / 'nb.ipynb')]
        assert set(j) == {'text/plain'} and j['text/plain'] == '<J>\n[application/json output of 30.0 MB removed: over the 10.0 MB per-output limit]', j
        assert set(p) == {'text/plain'} and p['text/plain'] == '[image/png output of 16.0 MB removed: over the 10.0 MB per-output limit]', p
        assert (tmp_path / 'nb.ipynb').stat().st_size < 100_000
    run(main)


def test_output_limit_option_changes_the_cap(tmp_path):
    small_png = "from IPython.display import display\ndisplay({'image/png': 'iVBORw0KGgo' + 'A' * 5000}, raw=True)"
    async def main():
        async with session(tmp_path, '--output-limit', '2000') as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            for src in ("print('y' * 50_000)", small_png): await ok(s, 'insert_execute_code_cell', cell_index=-1, cell_source=src)
            await ok(s, 'save')
        [printed, img] = stored_outputs(tmp_path / 'nb.ipynb')
        assert len(''.join(printed['text'])) < 2_200 and 'output truncated' in ''.join(printed['text'])
        assert img['data'] == {'text/plain': '[image/png output of 5,011 characters removed: over the 2,000 characters per-output limit]'}
    run(main)


def test_read_output_of_a_run_whose_notebook_closed_says_why(tmp_path):
    async def main():
        async with session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            r = await ok(s, 'execute_code', code="print('q' * 50_000)")
            rid = re.search(r"read_output\(run_id='(run-\w+)'", r)[1]
            await ok(s, 'unuse_notebook', notebook_name='nb')
            said = await err(s, 'read_output', run_id=rid, output_index=0, offset=100)
            assert "its notebook 'nb' was closed since: its outputs were not kept" in said and '0 outputs' not in said, said
    run(main)


LONG_SOURCE = "s = '''\n" + ''.join(f'line {i:05d} of a long literal\n' for i in range(10_000)) + "'''\nprint(s)"


def test_read_cell_shares_one_budget_and_says_how_to_read_the_source(tmp_path):
    async def main():
        async with session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            res = await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source=LONG_SOURCE))
            cid = res.meta['io.jupyter-mcp/cell_id']
            for args in (dict(cell_id=cid), dict(cell_id=cid, include_outputs=False)):
                r = await ok(s, 'read_cell', **args)
                assert len(r) <= BUDGET + 1_000, (args, len(r))  # one budget for the source and the outputs (was twice it)
                cut = re.search(r"\[source cut: characters ([\d,]+)-([\d,]+) of ([\d,]+) \(lines ([\d,]+)-([\d,]+)\) left out; "
                                r"the resource (notebook://nb/cells/\w+) holds the whole source", r)
                assert cut and int(cut[3].replace(',', '')) == len(LONG_SOURCE), r[:200]
                assert 'output truncated' not in r.split('[source cut')[0][-200:]  # the cut is the source's, not an "output"
                whole = json.loads((await s.read_resource(cut[6])).contents[0].text)['source']
                assert whole == LONG_SOURCE
    run(main)


def test_a_broken_kernelspec_is_listed_and_named_and_logged_once(tmp_path):
    jp = tmp_path / 'jp'
    (jp / 'kernels' / 'broken').mkdir(parents=True)
    (jp / 'kernels' / 'broken' / 'kernel.json').write_text('{not json')
    log = tmp_path / 'stderr.txt'
    async def main():
        async with session(tmp_path / 'root', env={'JUPYTER_PATH': str(jp)}, errlog=log) as s:
            for _ in range(2):
                listed = await ok(s, 'list_kernels')
                assert re.search(r"cannot be used:\nname\tunusable\nbroken\tinstalled at \S+broken but its kernel.json is not valid JSON "
                                 r"\(.*line 1 column 2\)", listed), listed
                said = await err(s, 'use_notebook', notebook_name='nb', mode='create', kernel='broken')
                assert f"the kernel 'broken' is installed at {jp / 'kernels' / 'broken'} but cannot be used: its kernel.json is not valid JSON" in said, said
                assert 'line 1 column 2' in said and 'not installed' not in said, said
        stderr = log.read_text()
        assert 'Traceback' not in stderr and 'JSONDecodeError' not in stderr, stderr[-2000:]
        assert stderr.count('WARNING') == 1 and 'headlesnb: the kernelspec' in stderr, stderr[-2000:]  # one record (the log may wrap it)
    (tmp_path / 'root').mkdir()
    run(main)
