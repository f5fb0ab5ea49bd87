"""Notebooks and dialogs over MCP as the fixes2 audit found them (`python -m headlesnb.fronts.mcp` driven by the official client).

- F6: a cell whose `attachments` are not {name: {mime: data}} is refused when opened, naming the cell: it used to open,
  and then every read of the dialog failed with "internal error: AttributeError".
- F7: a folder put where an open notebook's or dialog's file was: save(force=true), edits and unuse_dialog(force=true) say
  so and what to do, write nothing, and print no traceback: they answered "internal error: IsADirectoryError ... 9".
- F9: mode='create' on an open notebook or dialog whose file was deleted is refused: it answered "created", wrote
  nothing and kept the old content.
"""
import json, os, sys
from contextlib import asynccontextmanager

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from test_mcp import err, ok, run, server_args

pytestmark = pytest.mark.timeout(180)


@asynccontextmanager
async def session(root, errlog, *extra):
    "A `ClientSession` on `python -m headlesnb.fronts.mcp --root root`, the server's stderr written to file `errlog`"
    params = StdioServerParameters(command=sys.executable, args=server_args(root, *extra), env=dict(os.environ))
    with open(errlog, 'w') as f:
        async with stdio_client(params, errlog=f) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


def test_odd_attachments_are_refused_on_open(tmp_path):
    code = {'cell_type': 'code', 'id': 'a', 'source': '1', 'metadata': {}, 'outputs': [], 'execution_count': None}
    for name, att in (('att_int', 5), ('att_inner', {'a.png': 5})):
        md = {'cell_type': 'markdown', 'id': 'm1', 'metadata': {}, 'source': 'x', 'attachments': att}
        (tmp_path / f'{name}.ipynb').write_text(json.dumps({'cells': [code, md], 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}))
    async def main():
        async with session(tmp_path, tmp_path / 'err.log') as s:
            for name in ('att_int', 'att_inner'):
                for tool, arg in (('use_dialog', 'dialog_name'), ('use_notebook', 'notebook_name')):
                    msg = await err(s, tool, **{arg: name})
                    assert (f'{name}.ipynb: cell 2 (index 1) is not a valid notebook cell: its attachments must be an object of '
                            '{name: {mime: data}}' in msg and 'correct the file' in msg), msg
    run(main)
    assert json.loads((tmp_path / 'att_int.ipynb').read_text())['cells'][1]['attachments'] == 5  # refused untouched


def test_a_folder_where_the_file_was_is_said_and_nothing_written(tmp_path):
    async def main():
        async with session(tmp_path, tmp_path / 'err.log', '--no-durable') as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='kept')
            await ok(s, 'use_dialog', dialog_name='dl', mode='create')
            await ok(s, 'add_msg', content='hello')
            for f in ('nb.ipynb', 'dl.ipynb'): (tmp_path / f).unlink(); (tmp_path / f).mkdir()
            for tool, args in (('save', dict(notebook_name='nb', force=True)),
                               ('insert_cell', dict(notebook_name='nb', cell_index=-1, cell_type='code', cell_source='refused')),
                               ('unuse_dialog', dict(dialog_name='dl', force=True))):
                msg = await err(s, tool, **args)
                f = 'nb.ipynb' if 'notebook_name' in args else 'dl.ipynb'
                assert f'{f} is now a folder: headlesnb neither reads nor writes there and nothing was changed; move it away' in msg, msg
                assert 'internal error' not in msg, msg
            for f in ('nb.ipynb', 'dl.ipynb'): assert list((tmp_path / f).iterdir()) == []  # nothing written into it
            (tmp_path / 'nb.ipynb').rmdir()  # moved away: the edits held are written back
            await ok(s, 'save', notebook_name='nb')
            assert [''.join(c['source']) for c in json.loads((tmp_path / 'nb.ipynb').read_text())['cells']] == ['kept']
            (tmp_path / 'dl.ipynb').rmdir()
            await ok(s, 'unuse_dialog', dialog_name='dl')
    run(main)
    assert 'Traceback' not in (tmp_path / 'err.log').read_text()


def test_create_on_an_open_item_whose_file_was_deleted_is_refused(tmp_path):
    async def main():
        async with session(tmp_path, tmp_path / 'err.log') as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='old content')
            await ok(s, 'use_dialog', dialog_name='dl', mode='create')
            await ok(s, 'add_msg', content='old message')
            for kind, name in (('notebook', 'nb'), ('dialog', 'dl')):
                (tmp_path / f'{name}.ipynb').unlink()
                msg = await err(s, f'use_{kind}', **{f'{kind}_name': name, 'mode': 'create'})
                assert (f"{kind} {name!r} is open, and its file {name}.ipynb was deleted: nothing was created; unuse it first "
                        "to create a new empty one, or keep it (mode='connect')") in msg, msg
            await ok(s, 'insert_cell', notebook_name='nb', cell_index=-1, cell_type='code', cell_source='new')
            await ok(s, 'save', notebook_name='nb')  # kept: its next change writes the file again
            assert [''.join(c['source']) for c in json.loads((tmp_path / 'nb.ipynb').read_text())['cells']] == ['old content', 'new']
    run(main)
