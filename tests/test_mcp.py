"""The MCP server end to end: `python -m headlesnb.fronts.mcp` as a real subprocess, driven by the official `fronts.mcp` client.

stdio: tool list and schemas, edit/read round trips, running code, images, one-line errors that leave the
server working, progress notifications during a long cell, and calls answered while a cell runs.
Streamable HTTP: the same server on a free port of 127.0.0.1, without a token and with one (401 without it).
Every server process is stopped by PID at the end of its test, whatever happens.
"""
import base64, json, os, re, socket, subprocess, sys, time
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from conftest import free_port
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ImageContent, TextContent
from headlesnb.utils import content_hash

pytestmark = pytest.mark.timeout(180)


# ---------------------------------------------------------------- helpers
def server_args(root, *extra): return ['-m', 'headlesnb.fronts.mcp', '--root', str(root), *extra]


@asynccontextmanager
async def stdio_session(root, *extra):
    "A `ClientSession` on `python -m headlesnb.fronts.mcp --root root` started as a subprocess over stdio"
    params = StdioServerParameters(command=sys.executable, args=server_args(root, *extra), env=dict(os.environ))
    with open(os.devnull, 'w') as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


def text(res) -> str:
    "All text of a tool result"
    return '\n'.join(b.text for b in res.content if isinstance(b, TextContent))


async def ok(s, tool, **args) -> str:
    "Call `tool`; it must succeed; return its text"
    res = await s.call_tool(tool, args)
    assert not res.is_error, f'{tool}({args}) failed: {text(res)}'
    return text(res)


async def ended(s, rid, within=20) -> str:
    "get_run of run `rid` once it ended (it must within `within` s)"
    with anyio.fail_after(within):
        while 'ENDED' not in (t := await ok(s, 'get_run', run_id=rid, wait=1)): pass
    return t


async def err(s, tool, **args) -> str:
    "Call `tool`; it must fail with one line; return that line"
    res = await s.call_tool(tool, args)
    assert res.is_error, f'{tool}({args}) should fail but answered: {text(res)}'
    msg = text(res)
    assert msg and '\n' not in msg and len(res.content) == 1, msg
    return msg


def run(fn, *args): return anyio.run(fn, *args)


async def started_notebook(s, cell_source):
    "Create notebook 'nb' holding one code cell, with its kernel started"
    await ok(s, 'use_notebook', notebook_name='nb', mode='create')
    await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source=cell_source)
    await ok(s, 'execute_code', code='1')


async def wait_idle(s):
    with anyio.fail_after(20):
        while '\tbusy\t' in await ok(s, 'list_kernels'): await anyio.sleep(0.1)


# ---------------------------------------------------------------- stdio
NOTEBOOK_TOOLS = {'list_files', 'list_kernels', 'use_notebook', 'list_notebooks', 'restart_notebook', 'unuse_notebook',
                  'read_notebook', 'read_cell', 'insert_cell', 'overwrite_cell_source', 'edit_cell_source', 'delete_cell',
                  'move_cell', 'clear_cell_output', 'execute_cell', 'insert_execute_code_cell', 'execute_code',
                  'interrupt', 'undo', 'redo', 'history', 'run_all', 'swap_cells', 'save', 'ping', 'connect_to_jupyter'}


DIALOG_TOOLS = {'list_dialogs', 'use_dialog', 'unuse_dialog', 'find_msgs', 'read_msg', 'add_msg', 'update_msg',
                'del_msgs', 'run_msg', 'execute_prompt', 'dialog_undo', 'dialog_redo'}


def test_tools_and_schemas(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert NOTEBOOK_TOOLS <= set(tools)
            ins = tools['insert_cell'].input_schema
            assert set(ins['properties']) == {'cell_index', 'cell_type', 'cell_source', 'notebook_name'}
            assert set(ins['required']) == {'cell_index', 'cell_type', 'cell_source'}  # as jupyter-mcp-server (cell_source has a default here)
            assert ins['properties']['cell_type']['enum'] == ['code', 'markdown', 'raw']
            assert {'cell_index', 'timeout', 'stream', 'progress_interval', 'notebook_name'} <= set(tools['execute_cell'].input_schema['properties'])
            assert set(tools['edit_cell_source'].input_schema['properties']) >= {'cell_index', 'old_string', 'new_string', 'replace_all'}
            assert set(tools['use_notebook'].input_schema['properties']) >= {'notebook_name', 'notebook_path', 'mode'}
            assert set(tools['read_notebook'].input_schema['properties']) >= {'notebook_name', 'response_format', 'start_index', 'limit'}
            assert set(tools['list_files'].input_schema['properties']) == {'path', 'max_depth', 'start_index', 'limit', 'pattern'}
            # a cell may be named by index or id
            assert set(tools['read_cell'].input_schema['properties']['cell_index']['type']) == {'integer', 'string', 'null'}  # null: as JMS's
            assert set(tools['read_cell'].input_schema['properties']) == {'cell_index', 'cell_id', 'include_outputs', 'notebook_name'}
            for name, t in tools.items():  # every tool but the root-level ones names its notebook or dialog
                if name not in ('ping', 'list_files', 'list_kernels', 'list_notebooks', 'list_dialogs', 'dialog_files', 'connect_to_jupyter',
                                'spawn_agent', 'poll_agent', 'wait_agents', 'abort_agent', 'resume_agent', 'list_agents', 'get_run', 'list_runs'):
                    assert {'notebook_name', 'dialog_name', 'workspace'} & set(t.input_schema['properties']), name
                assert t.description, name
            assert DIALOG_TOOLS <= set(tools)
            assert tools['find_msgs'].annotations.read_only_hint is True and tools['del_msgs'].annotations.destructive_hint is True
            for name in ('ping', 'list_files', 'list_kernels', 'list_notebooks', 'read_notebook', 'read_cell', 'history'):
                assert tools[name].annotations.read_only_hint is True, name
            for name in ('delete_cell', 'overwrite_cell_source', 'clear_cell_output', 'restart_notebook'):
                assert tools[name].annotations.destructive_hint is True, name
            assert tools['insert_cell'].annotations.read_only_hint is False
            assert await ok(s, 'ping') == 'pong'
    run(main)


def test_edit_read_round_trip(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            assert (await ok(s, 'use_notebook', notebook_name='nb', mode='create')).splitlines()[:2] == \
                ["[INFO] Successfully activate notebook 'nb'.", "created notebook 'nb' (nb.ipynb, 0 cells); it is now the active notebook"]
            r = await ok(s, 'insert_cell', cell_index=-1, cell_type='markdown', cell_source='# Title', notebook_name='nb')
            assert r.startswith('Cell inserted successfully at index 0 (markdown)!\nid ') and 'Notebook now has 1 cells, showing surrounding cells:' in r
            md_id = r.split('\nid ')[1].split(',')[0]
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='a = 1\nb = 2', notebook_name='nb')
            await ok(s, 'insert_cell', cell_index=0, cell_type='raw', cell_source='raw text')
            brief = await ok(s, 'read_notebook', notebook_name='nb')
            lines = brief.splitlines()  # as JMS: its count, a blank line, its table (our Id and Hash after), then our line
            assert lines[:3] == ['Notebook nb has 3 cells.', '', 'Index\tType\tCount\tFirst Line\tId\tHash'] and lines[-1] == "notebook 'nb' (nb.ipynb): 3 cells; cells 0-2"
            assert lines[3].startswith('0\traw\tN/A\traw text\t') and lines[4].startswith(f'1\tmarkdown\tN/A\t# Title\t{md_id}\t')
            assert lines[5].startswith('2\tcode\tN/A\ta = 1...(1 lines hidden)\t')
            r = await ok(s, 'edit_cell_source', cell_index=2, old_string='b = 2', new_string='b = 3', notebook_name='nb')
            assert r.startswith('Cell 2 edited successfully!\n\n```diff\n') and '-b = 2' in r and '+b = 3' in r and '\n```\nid ' in r  # JMS's diff block
            r = await ok(s, 'read_cell', cell_index=md_id, notebook_name='nb')  # by id
            assert r == f'=====Cell 1 | type: markdown | execution count: N/A=====\nid {md_id} · hash {content_hash("# Title")}\n# Title'
            r = await ok(s, 'read_cell', cell_index='2')  # an index sent as a string
            assert r.startswith('=====Cell 2 | type: code | execution count: N/A=====\nid ') and 'a = 1\nb = 3' in r
            assert (await ok(s, 'move_cell', source_index=md_id, target_index=0)).startswith(f'Cell moved successfully from index 1 to 0 (markdown).\nid {md_id}\n')
            r = await ok(s, 'overwrite_cell_source', cell_index=-1, cell_source='c = 3')
            assert r.startswith('Cell 2 overwritten successfully!\n\n```diff\n') and '+c = 3' in r
            r = await ok(s, 'delete_cell', cell_indices=[1])
            assert r.startswith('Cell 1 (raw) deleted successfully.\nid ') and 'deleted cell source:\nraw text\n' in r and r.endswith('deleted 1 cell; 2 cells left')
            hist = await ok(s, 'history', notebook_name='nb')
            assert hist.startswith('undo (7, most recent last):') and 'delete 1 cell(s)' in hist
            assert (await ok(s, 'undo', steps=2)).startswith('undid delete 1 cell(s), overwrite cell source')
            assert (await ok(s, 'redo')).startswith('redid overwrite cell source')
            detailed = await ok(s, 'read_notebook', response_format='detailed')
            assert '[0] markdown' in detailed and '[1] raw' in detailed and 'c = 3' in detailed
            await ok(s, 'save', notebook_name='nb')
            on_disk = json.loads((tmp_path / 'nb.ipynb').read_text())
            assert [''.join(c['source']) for c in on_disk['cells']] == ['# Title', 'raw text', 'c = 3']
            nbs = await ok(s, 'list_notebooks')
            assert nbs.splitlines()[0] == 'Name\tPath\tKernel_ID\tKernel_Status\tActivate\tCells\tUnsaved\tRuns'  # JMS's columns first
            assert nbs.splitlines()[1].startswith('nb\tnb.ipynb\t-\tnot started\t✓\t3\t')
            files = await ok(s, 'list_files')
            assert 'nb.ipynb\tfile' in files
            assert (await ok(s, 'unuse_notebook', notebook_name='nb')).startswith("Notebook 'nb' unused successfully.\nclosed notebook 'nb'")
            assert 'no notebooks in use' in await ok(s, 'list_notebooks')
    run(main)


def test_errors_are_one_line_and_server_goes_on(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            assert 'pass notebook_name' in await err(s, 'read_notebook')  # nothing open yet
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            assert "no notebook named 'nope'" in await err(s, 'read_cell', cell_index=0, notebook_name='nope')
            assert "no notebook named 'nope'" in await err(s, 'insert_cell', cell_index=0, cell_type='code', notebook_name='nope')
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='x = 1')
            assert 'out of range' in await err(s, 'read_cell', cell_index=5)
            assert 'out of range' in await err(s, 'insert_cell', cell_index=7, cell_type='code')
            assert 'out of range' in await err(s, 'execute_cell', cell_index=3)
            assert 'cell_type' in await err(s, 'insert_cell', cell_index=0, cell_type='python', cell_source='x')
            assert "no cell with id 'first'" in await err(s, 'insert_cell', cell_index='first', cell_type='code')  # a str is a cell id
            assert 'invalid arguments for insert_cell' in await err(s, 'insert_cell', cell_index=[0], cell_type='code')
            assert 'invalid arguments for read_notebook' in await err(s, 'read_notebook', response_format='full')
            assert 'old_string not found' in await err(s, 'edit_cell_source', cell_index=0, old_string='zzz', new_string='y')
            assert 'outside the root' in await err(s, 'use_notebook', notebook_name='evil', notebook_path='../evil.ipynb', mode='create')
            assert 'does not exist' in await err(s, 'use_notebook', notebook_name='missing')
            assert 'cannot undo 5' in await err(s, 'undo', steps=5)
            assert 'no cell' in (await err(s, 'read_cell', cell_index='deadbeef')).lower()
            assert not (tmp_path.parent / 'evil.ipynb').exists()
            # still serving, and nothing half-done
            assert await ok(s, 'ping') == 'pong'
            assert (await ok(s, 'read_notebook')).splitlines()[-1].endswith('1 cell; cells 0-0')
    run(main)


def test_execute_and_outputs(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            r = await ok(s, 'insert_execute_code_cell', cell_index=-1, cell_source='x = 6 * 7\nprint("hello")\nx')
            assert r.splitlines()[:3] == ['hello', '42', r.splitlines()[2]] and r.splitlines()[2].startswith('[COMPLETED in ')
            assert r.splitlines()[3].startswith('inserted and ran cell 0 (id ') and r.endswith(': ok [1]')
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='x + 1')
            r = await ok(s, 'execute_cell', cell_index=1)
            assert r.splitlines()[0] == '43' and r.endswith('ok [2]')
            res = await s.call_tool('execute_code', dict(code='x * 2'))  # as JMS: the outputs alone, the status in structuredContent
            assert [b.text for b in res.content] == ['84'] and (res.structured_content['status'], res.structured_content['execution_count']) == ('ok', 3)
            assert await ok(s, 'execute_code', code='y = 1') == '[No output generated]'
            r = await ok(s, 'execute_code', code='from IPython.display import HTML, Markdown, display\n'
                                                 'display(HTML("<table><tr><td>a</td><td>b</td></tr></table>")); display(Markdown("**bold**"))')
            assert r.splitlines()[:3] == ['| a | b |', '|---|---|', '**bold**']  # an HTML table as compact markdown, never HTML
            # an error in the code is a result (not a failed call), with a readable traceback
            r = await ok(s, 'insert_execute_code_cell', cell_index=-1, cell_source='def f(): return 1/0\nf()')
            assert ': error [' in r.splitlines()[-1] and 'ZeroDivisionError' in r and '\x1b' not in r
            # outputs were stored in the cell
            r = await ok(s, 'read_cell', cell_index=0)
            assert r.endswith('x = 6 * 7\nprint("hello")\nx\nhello\n42')
            assert (await ok(s, 'clear_cell_output', cell_index=0)).startswith('Cell 0 output cleared successfully (2 output(s) removed).\nid ')
            assert (await ok(s, 'read_cell', cell_index=0)).endswith('print("hello")\nx')
            # a long text output is cut with a marker
            r = await ok(s, 'execute_code', code='print("x" * 100_000)')
            assert 'output truncated' in r and len(r) < 25_000
            # a timeout interrupts the code, says so, and the kernel is usable afterwards
            t0 = time.monotonic()
            r = await ok(s, 'execute_code', code='while True: pass', timeout=1)
            assert time.monotonic() - t0 < 30
            assert '[TIMEOUT ERROR: IPython execution exceeded 1 seconds and was interrupted]' in r and ': timeout [' in r, r
            assert (await ok(s, 'execute_code', code='x')).splitlines()[0] == '42'
            # output written straight to the process's stdout (fd 1) must not corrupt the stdio protocol
            res = await s.call_tool('execute_code', dict(code='import os; os.system("echo stray-output")'))
            assert not res.is_error and res.structured_content['status'] == 'ok'
            assert await ok(s, 'ping') == 'pong'
            kernels = await ok(s, 'list_kernels')
            head = 'ID\tName\tDisplay_Name\tLanguage\tState\tConnections\tLast_Activity\tEnvironment'  # JMS's columns, then ours
            assert kernels.splitlines()[0] == head + '\tNotebook\tBackend\tPID\tExecution_Count', kernels
            assert kernels.splitlines()[1].startswith('-\tinprocess\tPython (in this process') and '\tidle\t' in kernels and '\tnb\tinprocess\t' in kernels
            r = await ok(s, 'run_all')
            assert r.startswith('run_all: error; ran 3 of 3 code cells') and 'ZeroDivisionError' in r
            assert 'restarted' in await ok(s, 'restart_notebook')
            assert 'NameError' in await ok(s, 'execute_code', code='x')
    run(main)


def test_output_utf8_cannot_hold_is_answered_and_stored(tmp_path):
    """A cell printing the names in a folder holding a Latin-1 file name: Python decodes the name with a lone surrogate, which
    UTF-8 cannot hold. The output keeps U+FFFD instead, as Jupyter's does (its messages go out as UTF-8); before, the answer
    was a message the SDK could not encode (it ended the server) and the notebook could not be saved at all"""
    (tmp_path / 'data').mkdir()
    (tmp_path / 'data' / (name := os.fsdecode(b'caf\xe9.txt'))).touch()
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            res = await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source='import os\nprint(*os.listdir("data"))'))
            assert not res.is_error and res.content[0].text == 'caf\ufffd.txt' and res.structured_content['outputs'][0] == 'caf\ufffd.txt', res
            assert (await ok(s, 'read_cell', cell_index=0)).endswith('caf\ufffd.txt')
            res = await s.read_resource(f"notebook://nb/cells/{res.meta['io.jupyter-mcp/cell_id']}/outputs/0")
            assert res.contents[0].text == 'caf\ufffd.txt\n'
            assert await ok(s, 'ping') == 'pong'
    run(main)
    raw = (tmp_path / 'nb.ipynb').read_bytes()
    raw.decode('utf-8')  # (strict: the file is UTF-8)
    assert json.loads(raw)['cells'][0]['outputs'][0]['text'] == ['caf\ufffd.txt\n']
    assert name == 'caf\udce9.txt'


PLOT = "import matplotlib.pyplot as plt; plt.plot([1,2]); plt.show()"


def test_image_output(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            res = await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source=PLOT))
            assert not res.is_error, text(res)
            imgs = [b for b in res.content if isinstance(b, ImageContent)]
            assert len(imgs) == 1 and imgs[0].mime_type == 'image/png'
            data = base64.b64decode(imgs[0].data)
            assert data[:8] == b'\x89PNG\r\n\x1a\n' and len(data) <= 200_000
            assert '<Figure' not in text(res)  # the figure's text repr adds nothing once the image is there
            res = await s.call_tool('read_cell', dict(cell_index=0))  # read_cell sends the stored image too
            assert [type(b).__name__ for b in res.content] == ['TextContent', 'TextContent', 'ImageContent']  # header, source, the image
            detailed = await ok(s, 'read_notebook', response_format='detailed')  # a notebook read only notes it
            assert '[image/png image, ' in detailed and 'read_cell shows it' in detailed
    run(main)


def test_dialog_tools(tmp_path):
    async def main():
        async with stdio_session(tmp_path, '--timeout', '20') as s:
            assert 'created dialog' in await ok(s, 'use_dialog', dialog_name='work/chat', mode='create')
            note = (await ok(s, 'add_msg', content='# Plan', msg_type='note')).split()[3]
            code = (await ok(s, 'add_msg', content='x = 6\nx * 7', msg_type='code')).split()[3]
            run_out = await ok(s, 'run_msg', msg_id=code)
            assert run_out.startswith(f'message {code}: ok') and '42' in run_out
            assert 'pinned' in await ok(s, 'update_msg', msg_id=note, pinned=True)
            found = await ok(s, 'find_msgs', re_pattern='x \\* 7')
            assert f'code · id {code}' in found and '--- output:\n42' in found and '# Plan' not in found
            head = (await ok(s, 'read_msg', n=0, relative=False)).splitlines()[0]
            assert head == f'note · id {note} · hash {content_hash("# Plan")} · pinned'
            assert 'deleted 1 message' in await ok(s, 'del_msgs', ids=[note])
            assert 'undid' in await ok(s, 'dialog_undo')
            msg = await err(s, 'execute_prompt', msg_id=code)
            assert 'not a prompt' in msg
            await err(s, 'read_msg', msg_id='nope')
            await err(s, 'add_msg', content='x', msg_type='image')
        nb = json.loads((tmp_path / 'work' / 'chat.ipynb').read_text())
        assert [c['cell_type'] for c in nb['cells']] == ['markdown', 'code'] and nb['cells'][0]['metadata'].get('pinned')
    run(main)


def test_long_messages_say_how_to_read_the_rest(tmp_path):
    "A message cut for the model names the read_msg call that reads on, and following it reaches the end; find_msgs keeps to the budget and names the messages it left out"
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_dialog', dialog_name='sub/d', mode='create')
            long = (await ok(s, 'add_msg', content='x = 1\n' + 'a' * 50_000 + 'THE END', msg_type='code')).split()[3]
            others = [(await ok(s, 'add_msg', content=f'note {i} ' + 'b' * 9_000)).split()[3] for i in range(4)]
            await ok(s, 'use_dialog', dialog_name='other', mode='create')  # the calls named work from another active dialog
            text = await ok(s, 'read_msg', msg_id=long, dialog_name='sub/d')
            assert len(text) < 21_000 and 'THE END' in text, len(text)
            seen, call = '', re.search(r"read_msg\(msg_id='(\w+)', offset=(\d+), dialog_name='sub/d'\)", text)
            assert call and call[1] == long, text[15_000:16_500]
            seen, at = text[:int(call[2])], int(call[2])
            while at is not None:
                page = await ok(s, 'read_msg', msg_id=long, offset=at, dialog_name='sub/d')
                head, _, body = page.partition('\n')
                seen, at = seen + body, int(re.search(r'next: .*offset=(\d+)', head)[1]) if 'next:' in head else None
            assert seen.endswith('a' * 100 + 'THE END') and seen.count('THE END') == 1
            assert 'outside message' in await err(s, 'read_msg', msg_id=long, offset=10**7, dialog_name='sub/d')
            found = await ok(s, 'find_msgs', re_pattern='note', dialog_name='sub/d')
            assert len(found) < 21_000 and f'id {others[0]}' in found, len(found)
            assert f'[2 more matching messages left out of this answer: {others[2]}, {others[3]}; read_msg(msg_id=...) reads one' in found, found[-500:]
    run(main)


def test_workspace_tools(tmp_path):
    (tmp_path / 'a.py').write_text('import os\n\ndef f(x):\n    return x + 1\n')
    async def main():
        async with stdio_session(tmp_path) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert {'file_windows', 'editor', 'tool_windows', 'grep', 'todos', 'augments', 'workspace_view'} <= set(tools)
            props = tools['file_windows'].input_schema['properties']
            assert {'operation', 'file_path', 'start', 'end', 'workspace'} <= set(props) and 'open_range' in props['operation']['enum']
            opened = await ok(s, 'file_windows', operation='open_range', file_path='a.py', start=3, end=4)
            assert opened.startswith('opened f1: a.py lines 3-4') and '\n' not in opened
            await ok(s, 'editor', operation='open', file_path='a.py')
            assert 'replace' in await ok(s, 'editor', operation='replace', editor_id='e2', old='x + 1', new='x + 2')
            await ok(s, 'todos', operation='add', text='check f')
            view = await ok(s, 'workspace_view')
            assert '---FILE_WINDOW_f1' in view and '4:     return x + 1' in view and '1. [ ] check f' in view
            assert await err(s, 'file_windows', operation='open_range', file_path='../outside.py')
        assert (tmp_path / 'a.py').read_text().endswith('return x + 2\n') and (tmp_path / 'default.workspace.json').exists()
    run(main)


def test_no_images_flag(tmp_path):
    async def main():
        async with stdio_session(tmp_path, '--no-images') as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            res = await s.call_tool('execute_code', dict(code=PLOT))
            assert not res.is_error and not any(isinstance(b, ImageContent) for b in res.content)
            assert 'images are turned off' in text(res)
    run(main)


def test_progress_during_long_cell(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            await ok(s, 'execute_code', code='1')  # start the kernel first
            seen = []
            async def on_progress(progress, total, message): seen.append((time.monotonic(), progress, message))
            t0 = time.monotonic()
            res = await s.call_tool('execute_code', dict(code='import time; time.sleep(3)', progress_interval=1), progress_callback=on_progress)
            t1 = time.monotonic()  # (jupyter-mcp-server's default interval is 5 s, longer than this cell)
            assert not res.is_error and res.structured_content['status'] == 'ok'
            assert seen, 'no progress notification during a 3 s cell'
            assert all(t0 < t < t1 for t, _, _ in seen)  # they came while it ran
            assert 'running for' in seen[0][2]
    run(main)


def test_calls_answered_while_a_cell_runs(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await started_notebook(s, 'print(1)')
            await ok(s, 'list_kernels')  # its first call imports jupyter_client's kernelspec code (a second or more): not what is timed
            done = {}
            async def long_run():
                done['res'] = await s.call_tool('execute_code', dict(code='import time; time.sleep(3)'))
                done['t'] = time.monotonic()
            async with anyio.create_task_group() as tg:
                tg.start_soon(long_run)
                await anyio.sleep(0.5)
                r1 = await ok(s, 'read_cell', cell_index=0)
                r2 = await ok(s, 'list_notebooks')
                r3 = await ok(s, 'list_kernels')
                t_reads = time.monotonic()
                assert 'res' not in done, 'reads waited for the running cell'
            assert t_reads < done['t']
            assert r1.startswith('=====Cell 0 | type: code') and r2.splitlines()[1].startswith('nb\t') and '\tbusy\t' in r3
            assert not done['res'].is_error
    run(main)


def test_concurrent_runs_on_two_notebooks_get_their_own_outputs(tmp_path):
    "Many calls in flight at once (awaited runs, runs queued behind another notebook's cell, inserted cells)"
    async def main():
        async with stdio_session(tmp_path) as s:
            for nb in ('a', 'b'):
                await ok(s, 'use_notebook', notebook_name=nb, mode='create')
                await ok(s, 'execute_code', code='import time', notebook_name=nb)
            got = {}
            async def one(nb, i):
                code = f'time.sleep(0.01)\nprint("{nb}{i}")\n{i} * 2'
                if i % 3: got[nb, i] = await s.call_tool('execute_code', dict(code=code, notebook_name=nb))
                else: got[nb, i] = await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source=code, notebook_name=nb))
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    for nb in ('a', 'b'): tg.start_soon(one, nb, i)
            for (nb, i), res in got.items():
                out = text(res)
                assert res.structured_content['status'] == 'ok' and out.splitlines()[:2] == [f'{nb}{i}', str(i * 2)], ((nb, i), out)
            assert len(got) == 40
            for nb in ('a', 'b'):
                cells = await ok(s, 'read_notebook', notebook_name=nb, response_format='detailed')
                counts = {i: len(re.findall(rf'\b{nb}{i}\b', cells)) for i in range(0, 20, 3)}
                assert set(counts.values()) == {2}, (counts, cells)  # each in its source and its output
    run(main)


def test_cancelled_call_interrupts_the_cell(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            await ok(s, 'execute_code', code='n = 0')
            with anyio.move_on_after(1.5):  # the client gives up: the SDK sends notifications/cancelled
                await s.call_tool('execute_code', dict(code='while True: n += 1', timeout=120))
            await wait_idle(s)
            assert int((await ok(s, 'execute_code', code='n')).splitlines()[0]) > 0
    run(main)


def test_cancelled_execute_cell_still_stores_what_the_cell_printed(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await started_notebook(s, 'print("started")\nwhile True: pass')
            with anyio.move_on_after(1.5): await s.call_tool('execute_cell', dict(cell_index=0, timeout=120))
            await wait_idle(s)
            cell = await ok(s, 'read_cell', cell_index=0)
            assert 'started' in cell and 'interrupted' in cell, cell
    run(main)


# ---------------------------------------------------------------- streamable HTTP
@pytest.fixture
def http_server(tmp_path):
    "Start `python -m headlesnb.fronts.mcp --transport http` on a free port; yield a starter; kill by PID afterwards"
    procs = []
    def start(token=None, env_token=None, extra=()):
        port = free_port()
        args = server_args(tmp_path, '--transport', 'http', '--port', str(port), *extra) + (['--token', token] if token else [])
        env = dict(os.environ)
        env.pop('HEADLESNB_MCP_TOKEN', None)
        if env_token: env['HEADLESNB_MCP_TOKEN'] = env_token
        p = subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(p)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if p.poll() is not None: raise RuntimeError(f'server exited: {p.stderr.read().decode()[-2000:]}')
            try:
                with socket.create_connection(('127.0.0.1', port), timeout=0.2): return f'http://127.0.0.1:{port}/mcp'
            except OSError: time.sleep(0.1)
        raise RuntimeError('server did not start listening')
    yield start
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try: p.wait(5)
            except subprocess.TimeoutExpired: p.kill(); p.wait()
        p.stderr.close()


@asynccontextmanager
async def http_session(url, token=None):
    headers = {'Authorization': f'Bearer {token}'} if token else None
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as hc:
        async with streamable_http_client(url, http_client=hc) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s


async def until_answering(url, within=60):
    """Wait until the HTTP server at `url` answers (it was just started): its health probe, not an MCP session opened and closed at
    once, whose `notifications/initialized` races its own DELETE in the SDK (an error in the server's log, nothing lost)"""
    health = url.rsplit('/mcp', 1)[0] + '/api/healthz'
    async with httpx2.AsyncClient(timeout=5) as hc:
        with anyio.fail_after(within):
            while True:
                try:
                    if (await hc.get(health)).status_code == 200: return
                except httpx2.TransportError: pass
                await anyio.sleep(0.2)


async def http_round_trip(url, token=None):
    async with http_session(url, token) as s:
        assert 'insert_cell' in {t.name for t in (await s.list_tools()).tools}
        await ok(s, 'use_notebook', notebook_name='web', mode='create')
        r = await ok(s, 'insert_execute_code_cell', cell_index=-1, cell_source='21 * 2')
        assert r.splitlines()[0] == '42'
        seen = []
        async def on_progress(progress, total, message): seen.append(message)
        r = await s.call_tool('execute_code', dict(code='import time; time.sleep(1.5)', progress_interval=0.5), progress_callback=on_progress)
        assert not r.is_error and seen
        assert 'out of range' in await err(s, 'read_cell', cell_index=9)
        assert await ok(s, 'ping') == 'pong'


def test_http_without_token(http_server):
    url = http_server()
    run(http_round_trip, url)


def test_http_with_token(http_server):
    url = http_server(token='s3cret-token')
    async def main():
        async with httpx2.AsyncClient() as hc:
            init = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {}}
            hdr = {'Accept': 'application/json, text/event-stream', 'Content-Type': 'application/json'}
            assert (await hc.post(url, json=init, headers=hdr)).status_code == 401
            assert (await hc.post(url, json=init, headers={**hdr, 'Authorization': 'Bearer wrong'})).status_code == 401
            assert (await hc.get(url)).status_code == 401
        with pytest.raises(BaseException):  # the official client cannot connect without the token
            with anyio.fail_after(30):
                async with http_session(url, token='wrong') as s: await s.list_tools()
        await http_round_trip(url, token='s3cret-token')
    run(main)


def test_http_token_from_env(http_server):
    url = http_server(env_token='from-env')
    async def main():
        async with httpx2.AsyncClient() as hc: assert (await hc.get(url)).status_code == 401
        async with http_session(url, token='from-env') as s: assert await ok(s, 'ping') == 'pong'
    run(main)


def test_module_help():
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.mcp', '--help'], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and '--transport' in r.stdout and '--no-images' in r.stdout


def test_empty_token_is_refused(tmp_path):
    "`--token \"$SECRET\"` with SECRET unset must not serve without auth"
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.mcp', '--root', str(tmp_path), '--transport', 'http', '--token', ''],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and '--token is empty (an unset variable?)' in r.stderr, r.stderr


def test_tool_groups(tmp_path):
    "--tools offers only the groups named; a bad name is refused before anything starts"
    async def main():
        async with stdio_session(tmp_path, '--tools', 'dialogs,notebooks') as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert {'use_notebook', 'read_cell', 'use_dialog', 'find_msgs', 'ping'} <= names
            assert not names & {'spawn_agent', 'list_agents', 'workspace_view', 'file_windows'}
            assert [p.name for p in (await s.list_prompts()).prompts] == ['jupyter_cite']
        async with stdio_session(tmp_path, '--tools', 'agents') as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert names == {'ping', 'get_run', 'list_runs', 'spawn_agent', 'poll_agent', 'wait_agents', 'abort_agent', 'resume_agent', 'list_agents'}
            assert not (await s.list_resource_templates()).resource_templates  # notebook resources come with the notebooks group
    run(main)
    r = subprocess.run([sys.executable, '-m', 'headlesnb.fronts.mcp', '--root', str(tmp_path), '--tools', 'notebook'], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "unknown tool group 'notebook'" in r.stderr  # (a missing --root is refused first: test_fronts_options)


def test_started_with_a_notebook(tmp_path):
    "`--notebook PATH` starts with that notebook active (as jupyter-mcp-server's --document-id)"
    (tmp_path / 'sub').mkdir()
    nb = {'cells': [{'cell_type': 'code', 'id': 'c1', 'metadata': {}, 'source': 'x = 1', 'outputs': [], 'execution_count': None}],
          'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}
    (tmp_path / 'sub' / 'work.ipynb').write_text(json.dumps(nb))
    async def main():
        async with stdio_session(tmp_path, '--notebook', 'sub/work.ipynb') as s:
            assert (await ok(s, 'list_notebooks')).splitlines()[1].startswith('work\tsub/work.ipynb\t-\tnot started\t✓\t1\t')
            assert 'x = 1' in await ok(s, 'read_cell', cell_id='c1')
    run(main)
