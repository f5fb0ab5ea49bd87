"The MCP answers of the manager-edits audit fixes: a file deleted, a folder moved away, one file as notebook and dialog"
import json

from test_mcp import err, ok, run, stdio_session


def test_a_notebook_deleted_while_open_is_written_back_saying_so(tmp_path):
    "F10: a notebook another program deleted was written back at the next edit with no notice"
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='d', mode='create')
            (tmp_path / 'd.ipynb').unlink()
            t = await ok(s, 'read_notebook', notebook_name='d')
            assert "notebook 'd' (d.ipynb) was deleted by someone else: headlesnb still holds it, and its next change writes the file again" in t, t
            t = await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='x = 1')
            assert "notebook 'd' (d.ipynb) had been deleted by someone else: this change wrote it again, from what headlesnb held" in t, t
            assert ''.join(json.loads((tmp_path / 'd.ipynb').read_text())['cells'][0]['source']) == 'x = 1'  # (durable: on disk with the answer)
    run(go)


def test_a_folder_moved_away_is_named_and_changes_nothing(tmp_path):
    "F6: a notebook whose folder was renamed answered 'internal error: FileNotFoundError' to edits, save and unuse"
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='a', notebook_path='sub/a.ipynb', mode='create')
            (tmp_path / 'sub').rename(tmp_path / 'sub2')
            e = await err(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='lost')
            assert e.startswith("Error executing tool insert_cell: notebook 'a' (sub/a.ipynb) could not be written: its folder is gone") and \
                   'nothing was changed: move that folder back to sub/' in e, e
            assert 'lost' not in await ok(s, 'read_notebook', notebook_name='a')
            (tmp_path / 'sub2').rename(tmp_path / 'sub')
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='kept')
            await ok(s, 'unuse_notebook', notebook_name='a')
        assert [''.join(c['source']) for c in json.loads((tmp_path / 'sub' / 'a.ipynb').read_text())['cells']] == ['kept']
    run(go)


def test_one_file_is_not_open_as_a_dialog_and_a_notebook(tmp_path):
    "F9: a dialog opened as a notebook too held two copies, and one side's acknowledged edits were lost"
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_dialog', dialog_name='x', mode='create')
            e = await err(s, 'use_notebook', notebook_name='x', notebook_path='x.ipynb')
            assert "x.ipynb is open as dialog 'x': unuse_dialog it first" in e, e
            await ok(s, 'unuse_dialog', dialog_name='x')
            await ok(s, 'use_notebook', notebook_name='x', notebook_path='x.ipynb')
    run(go)
