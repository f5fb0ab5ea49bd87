"""Notebook tools over MCP as an audit found them wanting (`python -m headlesnb.fronts.mcp` driven by the official client).

- A file whose cell holds a field of the wrong type (`"metadata": null`, a number as source, no cell_type) is refused when
  opened, naming the cell (1-based, and its 0-based index, as the tools count) and what is wrong: it used to open, and then
  running the cell failed with a raw TypeError.
- An index out of range names the valid ones, with singulars ("1 cell").
- `mode='create'` on a notebook or dialog already open on an existing file is refused as for a file not open: it used to
  answer "created", so a client took the notebook it held for a new, empty one.
- A notebook read again after another program changed its file says so in the next answer, and `undo` says why there is
  nothing to undo: the undo history was cleared silently before.
"""
import json

import pytest
from test_mcp import err, ok, run, stdio_session

pytestmark = pytest.mark.timeout(180)


def nb_with(cell) -> str:
    "A notebook file holding the one cell `cell`"
    return json.dumps({'cells': [cell], 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5})


CODE = {'cell_type': 'code', 'id': 'a', 'source': '1+1', 'metadata': {}, 'outputs': [], 'execution_count': None}
BAD = {  # file -> (cell, what the refusal says)
    'meta_null': ({**CODE, 'metadata': None}, 'its metadata is null, not an object'),
    'meta_list': ({**CODE, 'metadata': []}, 'its metadata is a list, not an object'),
    'out_meta': ({**CODE, 'outputs': [{'output_type': 'display_data', 'data': {'text/plain': 'x'}, 'metadata': None}]},
                 'cell 1 (index 0), output 1 (index 0) is not a valid notebook output: its metadata is null, not an object'),
    'src_num': ({**CODE, 'source': 5}, 'its source is the number 5, not a string or a list of strings'),
    'no_type': ({'id': 'a', 'source': 'x', 'metadata': {}}, 'it has no cell_type (code, markdown or raw)'),
    'weird': ({'cell_type': 'weird', 'id': 'a', 'source': 'x', 'metadata': {}}, "its cell_type 'weird' is not code, markdown or raw"),
    'bare': ('just text', 'it is a string, not an object'),
}


def test_a_cell_of_the_wrong_shape_is_refused_naming_the_cell_and_field(tmp_path):
    for name, (cell, _) in BAD.items(): (tmp_path / f'{name}.ipynb').write_text(nb_with(cell))
    async def main():
        async with stdio_session(tmp_path) as s:
            for name, (_, says) in BAD.items():
                msg = await err(s, 'use_notebook', notebook_name=name)
                assert f'{name}.ipynb: cell 1 (index 0)' in msg and says in msg and 'correct the file' in msg, msg
            assert 'meta_null' not in await ok(s, 'list_notebooks')  # nothing opened
    run(main)
    assert json.loads((tmp_path / 'meta_null.ipynb').read_text())['cells'][0]['metadata'] is None  # refused untouched


def test_out_of_range_names_the_valid_indices(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='n', mode='create')
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='1')
            msg = await err(s, 'execute_cell', cell_index=5)
            assert msg.endswith('cell index 5 out of range: n.ipynb has 1 cell (valid: 0, or -1 from the end)'), msg
            for src in ('2', '3'): await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source=src)
            msg = await err(s, 'read_cell', cell_index=-4)
            assert msg.endswith('cell index -4 out of range: n.ipynb has 3 cells (valid: 0..2, or -3..-1 from the end)'), msg
    run(main)


def test_create_of_an_open_notebook_or_dialog_is_refused(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='n', mode='create')
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='kept')
            msg = await err(s, 'use_notebook', notebook_name='n', mode='create')
            assert "n.ipynb already exists, open as notebook 'n': nothing was created; use mode='connect'" in msg, msg
            assert 'kept' in await ok(s, 'read_cell', cell_index=0)  # nothing changed
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            await ok(s, 'add_msg', content='hello')
            msg = await err(s, 'use_dialog', dialog_name='d', mode='create')
            assert "d.ipynb already exists, open as dialog 'd': nothing was created" in msg, msg
            assert "using notebook 'n' (n.ipynb, 1 cell)" in await ok(s, 'use_notebook', notebook_name='n')  # connect: as before
    run(main)


def test_a_file_changed_on_disk_is_reported_and_undo_says_why_it_has_nothing(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            for src in ('a = 1', 'b = 2'): await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source=src)
            await ok(s, 'edit_cell_source', cell_index=0, old_string='1', new_string='10')
            await ok(s, 'save', notebook_name='nb')
            f = tmp_path / 'nb.ipynb'
            d = json.loads(f.read_text())
            d['cells'][0]['source'] = ['a = 99']
            d['cells'].append({'cell_type': 'markdown', 'id': 'theirs', 'metadata': {}, 'source': ['added elsewhere']})
            f.write_text(json.dumps(d))
            r = await s.call_tool('read_notebook', dict(notebook_name='nb'))
            told = r.content[-1].text
            assert ("notebook 'nb' (nb.ipynb) was changed on disk by someone else: headlesnb read it again" in told
                    and 'its undo history (3 steps) was cleared' in told), told
            assert 'changed on disk' not in '\n'.join(b.text for b in (await s.call_tool('read_notebook', dict(notebook_name='nb'))).content)  # once
            msg = await err(s, 'undo', notebook_name='nb')
            assert ('cannot undo 1 step(s): only 0 available in nb.ipynb: its undo history was cleared when the file was read again '
                    '(it was changed on disk by someone else); edits made since can be undone') in msg, msg
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='c = 3')
            await ok(s, 'undo', notebook_name='nb')  # an edit made since is undone
    run(main)
