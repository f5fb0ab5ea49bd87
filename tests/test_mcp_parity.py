"""headlesnb's MCP server against jupyter-mcp-server (JMS) 2.2.4 and 1.5.2, with the official `fronts.mcp` client over real transports.

The fixtures tests/fixtures/jms-*.json were recorded from the real jupyter-mcp-server (see their README).
- Schemas: every JMS 2.2.4 tool is here with the same parameter names (cell ids included), compatible types,
  the same required set, and an output schema in its shape; the `jupyter_cite` prompt has its arguments.
- Structured output: `kind` and the shapes of JMS 2.2 (tables, outputs), `_meta` cell ids, validated by the client.
- A session written the way JMS 2.2's clients talk: cell ids from `_meta`, resources, old argument names, first lines.
- Tables: replaying JMS's recorded session gives the same rows (Index, Type, Count, First Line).
- Unknown arguments: refused on every tool, naming the argument, with nothing done.
- The content-hash guard: two clients of one server race to edit the same cell; one wins, the other is refused
  with the current source and its hash, and gets through once it uses that hash.
- Old Solveit dialogs: byte-identical after open, read and close (Python API, MCP, `headlesnb serve` over HTTP);
  converted to the current form (which aidialog reads) on the first edit.
Every server process is stopped by PID at the end of its test (conftest reaps the rest).
"""
import base64, json, signal, subprocess, sys, time
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from aidialog.ipynb import read_ipynb
from conftest import free_port
from mcp.types import CallToolResult, TextContent
from test_mcp import err, http_server, http_session, ok, run, stdio_session, text  # noqa: F401  (http_server is a fixture)

from headlesnb import DialogManager
from headlesnb.utils import content_hash

pytestmark = pytest.mark.timeout(240)
FIX = Path(__file__).parent / 'fixtures'
JMS = json.loads((FIX / 'jms-2.2.4-tools.json').read_text())
JMS224_ANSWERS = json.loads((FIX / 'jms-2.2.4-answers.json').read_text())
JMS_ANSWERS = json.loads((FIX / 'jms-1.5.2-answers.json').read_text())
REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- schemas
def types_of(schema: dict) -> set:
    "The JSON types a property schema accepts"
    if 'anyOf' in schema: return set().union(*(types_of(s) for s in schema['anyOf']))
    t = schema.get('type')
    return set(t) if isinstance(t, list) else {t} if t else set()


def accepts(ours: set, theirs: set, optional: bool) -> bool:
    "Does a parameter typed `ours` take every value one typed `theirs` takes? (a number takes an integer; an optional one, null)"
    return all(t in ours or (t == 'integer' and 'number' in ours) or (t == 'null' and optional) for t in theirs)


def enum_of(schema: dict):
    if 'enum' in schema: return set(schema['enum'])
    vals = [s['enum'] for s in schema.get('anyOf', []) if 'enum' in s]
    return set().union(*map(set, vals)) if vals else None


def test_tool_schemas_and_prompt_match_jupyter_mcp_server(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            ours = {t.name: t for t in (await s.list_tools()).tools}
            prompts = {p.name: p for p in (await s.list_prompts()).prompts}
        assert len(JMS['tools']) == 18
        for jt in JMS['tools']:
            name = jt['name']
            assert name in ours, f'{name} is missing'
            o = ours[name]
            theirs_props, our_props = jt['inputSchema'].get('properties', {}), o.input_schema.get('properties', {})
            assert set(theirs_props) <= set(our_props), f'{name}: missing parameters {set(theirs_props) - set(our_props)}'
            assert set(jt['inputSchema'].get('required', [])) == set(o.input_schema.get('required', [])), name
            for p, ts in theirs_props.items():
                assert accepts(types_of(our_props[p]), types_of(ts), p not in o.input_schema.get('required', [])), f'{name}.{p}: {our_props[p]} does not take {ts}'
                if 'null' in types_of(ts):  # declared nullable where JMS declares it: a client filling every field from the schema sends null
                    assert 'null' in types_of(our_props[p]), f'{name}.{p}: {our_props[p]} does not declare null, JMS does: {ts}'
                if ts.get('default') is not None:  # JMS's defaults, stated as JMS states them
                    assert our_props[p].get('default') == ts['default'], f"{name}.{p}: default {our_props[p].get('default')!r}, JMS's {ts['default']!r}"
                if (te := enum_of(ts)) is not None:
                    oe = enum_of(our_props[p])
                    assert oe is not None and te <= oe, f'{name}.{p}: enum {oe} lacks some of {te}'
            assert o.output_schema is not None and set(jt['outputSchema']['properties']) <= set(o.output_schema['properties']), name
            assert o.output_schema['required'] == ['kind'], name
            if jt['annotations'].get('readOnlyHint'): assert o.annotations.read_only_hint is True, name
            else: assert not o.annotations.read_only_hint, name
        assert sum(t.output_schema is not None for t in ours.values()) == 18  # JMS's 18 tools; ours beyond them answer text
        assert list(prompts) == ['jupyter_cite']
        theirs = {a['name']: a.get('required', False) for a in JMS['prompts'][0]['arguments']}
        assert {a.name: bool(a.required) for a in prompts['jupyter_cite'].arguments} == theirs
        # the defaults JMS has: execute_code waits 30 s, execute_cell the server's default (120 s)
        assert ours['execute_code'].input_schema['properties']['timeout']['default'] == 30
        assert ours['execute_cell'].input_schema['properties']['timeout']['default'] == 0
    run(main)


def test_null_for_optional_arguments_and_jms_table_headers(tmp_path):
    "Every optional argument JMS declares nullable takes null (as 'not given'); every table starts with JMS's header, ours after"
    async def main():
        async with stdio_session(tmp_path) as s:
            nulls = dict(notebook_name=None, cell_id=None)
            assert 'Showing 0-0 of 0 files' in await ok(s, 'list_files', path='', pattern='')
            await ok(s, 'use_notebook', notebook_name='nb', mode='create', kernel_id=None)
            r = await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='x = 1', notebook_name=None)
            cid = r.split('\nid ')[1].split(',')[0]
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='y = 2', notebook_name=None)
            assert (await ok(s, 'read_cell', cell_index=0, **nulls)).startswith('=====Cell 0')
            assert (await ok(s, 'read_cell', cell_index=None, cell_id=cid, notebook_name=None)).startswith('=====Cell 0')
            assert (await ok(s, 'edit_cell_source', cell_index=0, old_string='1', new_string='3', **nulls)).startswith('Cell 0 edited')
            assert (await ok(s, 'overwrite_cell_source', cell_index=0, cell_source='x = 4', **nulls)).startswith('Cell 0 overwritten')
            assert 'moved' in await ok(s, 'move_cell', source_index=0, target_index=1, notebook_name=None, source_cell_id=None, target_cell_id=None)
            assert await ok(s, 'execute_cell', cell_index=1, **nulls)
            assert await ok(s, 'execute_code', code='x', kernel_id=None) == '4'
            assert 'cleared' in await ok(s, 'clear_cell_output', cell_index=1, **nulls)
            assert 'deleted' in await ok(s, 'delete_cell', cell_indices=None, cell_ids_to_delete=[cid], notebook_name=None)
            await ok(s, 'use_notebook', notebook_name='other', mode='create')
            # the tables: JMS's header line, exactly, then our columns
            files = (await ok(s, 'list_files')).splitlines()
            assert files[1] == 'Path\tType\tSize\tLast_Modified' and files[2].startswith('nb.ipynb\tfile\t'), files
            nbs = (await ok(s, 'list_notebooks')).splitlines()
            assert nbs[0] == 'Name\tPath\tKernel_ID\tKernel_Status\tActivate\tCells\tUnsaved\tRuns', nbs
            assert nbs[1].startswith('nb\tnb.ipynb\t-\tidle\t\t1\t') and nbs[2].startswith('other\tother.ipynb\t-\tnot started\t✓\t0\t'), nbs
            ks = (await ok(s, 'list_kernels')).splitlines()
            assert ks[0] == 'ID\tName\tDisplay_Name\tLanguage\tState\tConnections\tLast_Activity\tEnvironment\tNotebook\tBackend\tPID\tExecution_Count', ks
            assert (await ok(s, 'restart_notebook', notebook_name='other')).startswith("Notebook 'other' kernel restarted successfully.")  # never started: JMS's words too
            brief = await ok(s, 'read_notebook', notebook_name='nb')
            assert '\nIndex\tType\tCount\tFirst Line\tId\tHash\n' in brief, brief
            # switching back names the notebook it leaves, by the name the client gave it
            assert (await ok(s, 'use_notebook', notebook_name='nb')).startswith("[INFO] Reactivating notebook 'nb' and deactivating 'other'.\n")
            # a failed call starts with JMS's words, ours after
            assert (await err(s, 'read_cell', cell_index=9)).startswith('Error executing tool read_cell: ')
            assert "Notebook 'gone' is not connected" in await err(s, 'restart_notebook', notebook_name='gone')
            assert "'missing.ipynb' not found" in await err(s, 'use_notebook', notebook_name='m', notebook_path='missing.ipynb')
    run(main)


# ---------------------------------------------------------------- structured output
KINDS = {t['name']: None for t in JMS['tools']}
JMS_KINDS = {c['tool']: c['result']['structuredContent']['kind'] for c in JMS224_ANSWERS['calls']
             if 'tool' in c and 'structuredContent' in c['result']}


def test_structured_output_is_validated_by_the_official_client(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await s.list_tools()  # the client caches the output schemas it validates against
            calls = [('use_notebook', dict(notebook_name='nb', notebook_path='nb.ipynb', mode='create')),
                     ('insert_cell', dict(cell_index=-1, cell_type='code', cell_source='x = 1')),
                     ('insert_cell', dict(cell_index=0, cell_type='markdown', cell_source='# T')),
                     ('overwrite_cell_source', dict(cell_index=1, cell_source='print(2)')),
                     ('edit_cell_source', dict(cell_index=1, old_string='2', new_string='3')),
                     ('execute_cell', dict(cell_index=1)), ('read_cell', dict(cell_index=1)),
                     ('insert_execute_code_cell', dict(cell_index=-1, cell_source='4')), ('execute_code', dict(code='5')),
                     ('move_cell', dict(source_index=1, target_index=0)),
                     ('read_notebook', dict(notebook_name='nb')), ('read_notebook', dict(notebook_name='nb', response_format='detailed')),
                     ('list_files', {}), ('list_notebooks', {}), ('list_kernels', {}),
                     ('clear_cell_output', dict(cell_index=0)), ('restart_notebook', dict(notebook_name='nb')),
                     ('delete_cell', dict(cell_indices=[1])), ('unuse_notebook', dict(notebook_name='nb'))]
            assert {c for c, _ in calls} == set(KINDS) - {'connect_to_jupyter'}
            for tool, args in calls:
                res = await s.call_tool(tool, args)  # raises RuntimeError if structuredContent is missing or off-schema
                assert not res.is_error, f'{tool}: {text(res)}'
                sc = res.structured_content
                assert sc['kind'] == JMS_KINDS[tool], tool  # the kind JMS 2.2.4 answered
                if isinstance(sc['result'], str): assert sc['result'] == text(res), tool
                else:  # a run or a cell read: one entry per content block, images as objects
                    assert sc['result'] == sc['outputs'] and sc['count'] == len(res.content) == len(sc['outputs']), tool
                    assert [b.text for b in res.content] == sc['outputs'], tool
                if tool in ('list_files', 'list_notebooks', 'list_kernels'):
                    assert sc['count'] == len(sc['items']) and all(set(i) == set(sc['columns']) for i in sc['items']), tool
            # the client really checks against our schema: content that does not fit it is rejected
            with pytest.raises(RuntimeError, match='Invalid structured content'):
                await s.validate_tool_result('insert_cell', CallToolResult(content=[], structured_content={'kind': 3}))
            with pytest.raises(RuntimeError, match='did not return structured content'):
                await s.validate_tool_result('insert_cell', CallToolResult(content=[TextContent(type='text', text='x')]))
            # a failed call carries no structured content (and the client does not ask for it)
            res = await s.call_tool('read_notebook', dict(notebook_name='nope'))
            assert res.is_error and res.structured_content is None
            # tools JMS does not have answer text only
            res = await s.call_tool('ping', {})
            assert res.structured_content is None and text(res) == 'pong'
    run(main)


def test_a_session_as_jms_2_2_clients_talk(tmp_path):
    "Cell ids from `_meta`, every cell-id parameter, old argument names, first lines, one block per output, resources"
    PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
    async def main():
        async with stdio_session(tmp_path) as s:
            r = await ok(s, 'use_notebook', notebook_name='demo', notebook_path='demo.ipynb', mode='create')
            assert r.endswith('Notebook has 0 cells.\nShowing first 0 cells:\n\nIndex\tType\tCount\tFirst Line\tId\tHash')
            for src, typ in [('# Demo\nsecond line', 'markdown'), ('print("hi")\nx = 6 * 7\nx', 'code'), ('raw text', 'raw'),
                             (f'from IPython.display import Image, display\nimport base64\ndisplay(Image(base64.b64decode("{PNG}")))\nprint("after")', 'code')]:
                res = await s.call_tool('insert_cell', dict(cell_index=-1, cell_type=typ, cell_source=src))
                assert text(res).startswith(f'Cell inserted successfully at index ') and f'({typ})!' in text(res).splitlines()[0]
            cid = res.meta['io.jupyter-mcp/cell_id']
            code = (await s.call_tool('read_cell', dict(cell_index=1))).meta['io.jupyter-mcp/cell_id']
            # execute by id, with JMS 1.x's timeout_seconds: one block per output, then how it ended
            res = await s.call_tool('execute_cell', dict(cell_id=code, timeout_seconds=30))
            assert [b.text for b in res.content][:2] == ['hi', '42'] and res.content[2].text.startswith('[COMPLETED in ')
            assert res.meta['io.jupyter-mcp/cell_id'] == code
            res = await s.call_tool('execute_cell', dict(cell_id=cid))
            assert [type(b).__name__ for b in res.content] == ['ImageContent', 'TextContent', 'TextContent']
            assert res.structured_content['images'] == 1 and res.structured_content['outputs'][0]['type'] == 'image'
            assert (res.structured_content['status'], res.structured_content['execution_count']) == ('ok', 2)  # ours, beside JMS's fields
            res = await s.call_tool('read_cell', dict(cell_id=code))
            assert [b.text for b in res.content][0].startswith('=====Cell 1 | type: code | execution count: 1=====')
            assert [b.text for b in res.content][1:] == ['print("hi")\nx = 6 * 7\nx', 'hi', '42']
            assert (await ok(s, 'overwrite_cell_source', cell_id=code, cell_source='x = 7\nx')).startswith('Cell 1 overwritten successfully!')
            assert (await ok(s, 'edit_cell_source', cell_id=code, old_string='7', new_string='8', replace_all=True)).startswith('Cell 1 edited successfully!')
            res = await s.call_tool('move_cell', dict(source_cell_id=code, target_cell_id=cid))
            assert text(res).startswith('Cell moved successfully from index 1 to 3 (code).') and res.meta['io.jupyter-mcp/cell_id'] == code
            assert (await ok(s, 'clear_cell_output', cell_id=code)).startswith('Cell 3 output cleared successfully (')
            # a timeout, as JMS words it
            r = await ok(s, 'execute_code', code='while True: pass', timeout_seconds=1)
            assert '[TIMEOUT ERROR: IPython execution exceeded 1 seconds and was interrupted]' in r
            # an unknown argument that is no alias is still an error
            assert "does not take the argument 'timeout_secs'" in await err(s, 'execute_code', code='1', timeout_secs=1)
            # resources: the notebook, one cell (outputs listed), one output (text, or an image's bytes)
            templates = {t.uri_template for t in (await s.list_resource_templates()).resource_templates}
            assert templates == {'notebook://{name}', 'notebook://{name}/cells/{cell_id}', 'notebook://{name}/cells/{cell_id}/outputs/{index}'}
            assert 'capabilities://' in {str(r.uri) for r in (await s.list_resources()).resources}
            nb = json.loads((await s.read_resource('notebook://demo')).contents[0].text)
            assert [c['cell_type'] for c in nb['cells']] == ['markdown', 'raw', 'code', 'code']
            cell = json.loads((await s.read_resource(f'notebook://demo/cells/{cid}')).contents[0].text)
            assert (cell['id'], cell['index'], len(cell['outputs'])) == (cid, 2, 2)
            assert cell['outputs'][0] == {'index': 0, 'mimeType': 'image/png', 'uri': f'notebook://demo/cells/{cid}/outputs/0'}
            img = (await s.read_resource(cell['outputs'][0]['uri'])).contents[0]
            assert base64.b64decode(img.blob)[:8] == b'\x89PNG\r\n\x1a\n' and img.mime_type == 'image/png'
            assert (await s.read_resource(cell['outputs'][1]['uri'])).contents[0].text == 'after\n'
            with pytest.raises(Exception, match='no output 5'): await s.read_resource(f'notebook://demo/cells/{cid}/outputs/5')
            with pytest.raises(Exception, match="no notebook named 'nope'"): await s.read_resource('notebook://nope')
            caps = json.loads((await s.read_resource('capabilities://')).contents[0].text)
            assert 'tools.notebooks' in caps['capabilities']
            # delete by ids: the ids in _meta
            res = await s.call_tool('delete_cell', dict(cell_ids_to_delete=[cid, code]))
            assert text(res).startswith('Cell 2 (code) deleted successfully.') and res.meta['io.jupyter-mcp/cell_ids'] == [cid, code]
            assert 'name the cells' in await err(s, 'delete_cell')
            assert 'name the cell' in await err(s, 'read_cell')
            # one path under two names: the same notebook, not a second copy
            assert "the same notebook as 'demo'" in await ok(s, 'use_notebook', notebook_name='demo2', notebook_path='demo.ipynb')
            await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='z = 2', notebook_name='demo2')
            assert 'z = 2' in await ok(s, 'read_cell', cell_index=-1, notebook_name='demo')
            assert "stays open as 'demo'" in await ok(s, 'unuse_notebook', notebook_name='demo2')
            assert (await ok(s, 'restart_notebook', notebook_name='demo')).startswith("Notebook 'demo' kernel restarted successfully.")
            assert (await ok(s, 'unuse_notebook', notebook_name='demo')).startswith("Notebook 'demo' unused successfully.")
    run(main)


# ---------------------------------------------------------------- tables
def table_rows(answer: str, columns: int = 4) -> list:
    "The rows of the cell table in an answer, cut to the first `columns` columns"
    lines = answer.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('Index\tType\tCount\tFirst Line'))
    return [l.split('\t')[:columns] for l in lines[start + 1:] if l.strip()]


def jms_answer(i: int) -> str:
    c = JMS_ANSWERS['calls'][i]
    return '\n'.join(b['text'] for b in c['result']['content'])


def test_use_insert_move_show_cells_as_jupyter_mcp_server(tmp_path):
    "Replay the recorded JMS session: our tables hold the same rows (then Id and Hash)"
    first = {'cells': [{'cell_type': 'markdown', 'id': 'f1e2d3c4', 'metadata': {}, 'source': 'New Notebook Created by Jupyter MCP Server'}],
             'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}
    (tmp_path / 'demo3.ipynb').write_text(json.dumps(first))  # JMS starts a new notebook with that cell
    calls = JMS_ANSWERS['calls']
    async def main():
        async with stdio_session(tmp_path) as s:
            r = await ok(s, 'use_notebook', notebook_name='demo', notebook_path='demo3.ipynb')
            assert 'Notebook has 1 cells.\nShowing first 1 cells:\n\nIndex\tType\tCount\tFirst Line\tId\tHash\n' in r
            assert table_rows(r) == table_rows(jms_answer(1))
            compared = 1
            for i, c in enumerate(calls):
                if c['tool'] not in ('insert_cell', 'move_cell', 'execute_cell'): continue
                if c['arguments'].get('cell_source') == 'z11 = 11':  # JMS's session added z1..z10 without recording them
                    for k in range(1, 11): await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source=f'z{k} = {k}')
                r = await ok(s, c['tool'], **c['arguments'])
                if c['tool'] == 'execute_cell': continue
                assert table_rows(r) == table_rows(jms_answer(i)), f"call {i} {c['tool']}{c['arguments']}:\n{r}\n--- JMS:\n{jms_answer(i)}"
                assert 'showing surrounding cells:' in r
                compared += 1
            assert compared == 9  # use_notebook, six inserts, two moves
            # after the four columns: each row's id and hash, which later calls can use
            cells = {l.split('\t')[4]: l.split('\t')[5] for l in r.splitlines()[4:]}  # after the first line, ours, and the table's header
            for cid, h in cells.items():
                assert f'hash {h}' in await ok(s, 'read_cell', cell_index=cid, notebook_name='demo')
    run(main)


# ---------------------------------------------------------------- unknown arguments
def test_unknown_arguments_are_refused_on_every_tool(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', notebook_path='nb.ipynb', mode='create')
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            tools = (await s.list_tools()).tools
            assert len(tools) > 50
            for t in tools:
                msg = await err(s, t.name, zz_unknown=1)
                assert f"{t.name} does not take the argument 'zz_unknown'" in msg, msg
            # beside valid arguments too, and nothing is done (JMS would have inserted the cell, ignoring the typo)
            msg = await err(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source='x = 1', notebok_name='nb')
            assert "'notebok_name'" in msg and 'notebook_name' in msg  # names the wrong one, lists the right ones
            assert (await ok(s, 'read_notebook', notebook_name='nb')) == "Notebook nb has 0 cells.\n\nNotebook is empty\n\nnotebook 'nb' (nb.ipynb): 0 cells; no cells in range"
            assert 'hash' in await err(s, 'overwrite_cell_source', cell_index=0, cell_source='y', expected_hsh='x')
    run(main)


# ---------------------------------------------------------------- kernel_id, connect_to_jupyter, jupyter_cite
def test_remote_kernel_arguments_refused_clearly_and_cite_prompt(tmp_path):
    "Without a Jupyter server, kernel_id is refused with what to do; connect_to_jupyter refuses a server it cannot reach"
    async def main():
        async with stdio_session(tmp_path) as s:
            msg = await err(s, 'use_notebook', notebook_name='nb', notebook_path='nb.ipynb', mode='create', kernel_id='1a2b')
            assert 'kernel_id names a kernel of a Jupyter server' in msg and '--jupyter-url' in msg and 'connect_to_jupyter' in msg
            assert not (tmp_path / 'nb.ipynb').exists()  # refused before anything was made
            assert 'cannot reach the Jupyter server at http://127.0.0.1:1' in await err(s, 'connect_to_jupyter', jupyter_url='http://127.0.0.1:1', jupyter_token='t')
            await ok(s, 'use_notebook', notebook_name='nb', notebook_path='nb.ipynb', mode='create')
            assert 'connect_to_jupyter' in await err(s, 'execute_code', code='1', kernel_id='1a2b')
            for src in ['x = 6 * 7\nx', '# Title\n', 'print("hi")']:
                await ok(s, 'insert_cell', cell_index=-1, cell_type='markdown' if src.startswith('#') else 'code', cell_source=src)
            await ok(s, 'execute_cell', cell_index=0)
            p = await s.get_prompt('jupyter_cite', dict(prompt='Explain these cells', cell_indices='0-1'))
            assert [m.role for m in p.messages] == ['user']
            assert p.messages[0].content.text == ('USER Cite cells [0, 1] from notebook nb, here are the cells:\n'
                                                  '=====Cell 0 | type: code | execution count: 1=====\nx = 6 * 7\nx\n'
                                                  '=====Cell 1 | type: markdown | execution count: N/A=====\n# Title\n'
                                                  '=====End of Cited Cells=====\nUSER\'s Instruction are follow: Explain these cells')
            # the same shape as JMS's recorded answer
            jms = JMS_ANSWERS['prompts'][0]['result']['messages'][0]['content']['text'].splitlines()
            ours = p.messages[0].content.text.splitlines()
            assert [ours[0].split(' from ')[0], ours[-2], ours[-1]] == [jms[0].split(' from ')[0].replace('[0, 1, 3]', '[0, 1]'), jms[-2], jms[-1]]
            cell2 = (await ok(s, 'read_cell', cell_index=2)).split('id ')[1].split(' ')[0]
            p = await s.get_prompt('jupyter_cite', dict(prompt='and this', cell_indices=cell2, notebook_name='nb'))  # by id
            assert p.messages[0].content.text.startswith('USER Cite cells [2] from notebook nb')
    run(main)


# ---------------------------------------------------------------- the hash guard, two clients racing
def test_hash_guard_two_clients_race(http_server):
    url = http_server()
    async def main():
        async with http_session(url) as a, http_session(url) as b:
            await ok(a, 'use_notebook', notebook_name='nb', notebook_path='nb.ipynb', mode='create')
            await ok(b, 'use_notebook', notebook_name='nb', notebook_path='nb.ipynb')  # the same notebook, the second client
            await ok(a, 'insert_cell', cell_index=-1, cell_type='code', cell_source='total = 0')
            for round_ in range(5):
                seen = {}
                for who, s in (('a', a), ('b', b)):
                    r = await ok(s, 'read_cell', cell_index=0, notebook_name='nb')
                    seen[who] = r.split('hash ')[1].split(' ')[0].split('\n')[0]
                assert seen['a'] == seen['b']
                results = {}
                async def edit(who, s):
                    results[who] = await s.call_tool('overwrite_cell_source', dict(cell_index=0, notebook_name='nb', cell_source=f'total = "{who}{round_}"',
                                                                                   expected_hash=seen[who]))
                async with anyio.create_task_group() as tg:  # both at once, each with the hash it read
                    tg.start_soon(edit, 'a', a); tg.start_soon(edit, 'b', b)
                won = [w for w, r in results.items() if not r.is_error]
                assert len(won) == 1, {w: text(r) for w, r in results.items()}
                winner, loser = won[0], 'b' if won[0] == 'a' else 'a'
                msg = text(results[loser])
                now = f'total = "{winner}{round_}"'
                assert 'was changed since it was read' in msg and now in msg and content_hash(now) in msg and 'nothing was changed' in msg
                assert (await ok(b, 'read_cell', cell_index=0, notebook_name='nb')).splitlines()[2] == now  # the winner's edit stands
                # the loser redoes its edit with the hash the refusal showed
                r = await ok(a if loser == 'a' else b, 'edit_cell_source', cell_index=0, notebook_name='nb', old_string=f'"{winner}{round_}"',
                             new_string=f'"{winner}{round_}+{loser}"', expected_hash=content_hash(now))
                assert f'hash now {content_hash(now.replace(winner + str(round_), f"{winner}{round_}+{loser}"))}' in r
            # deletes are guarded too: one hash per cell
            stale = seen['a']
            msg = text(await a.call_tool('delete_cell', dict(cell_indices=[0], notebook_name='nb', expected_hash=[stale])))
            assert 'was changed since it was read' in msg
            assert (await ok(a, 'read_notebook', notebook_name='nb')).splitlines()[-1].endswith('1 cell; cells 0-0')
            await ok(a, 'save', notebook_name='nb')
    run(main)


def test_hash_guard_on_dialog_messages(tmp_path):
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            r = await ok(s, 'add_msg', content='x = 1', msg_type='code')
            mid, h = r.split()[3], r.split('(hash ')[1].split(')')[0]
            assert h == content_hash('x = 1') and f'hash {h}' in await ok(s, 'read_msg', msg_id=mid)
            assert f'hash now {content_hash("x = 2")}' in await ok(s, 'update_msg', msg_id=mid, content='x = 2', expected_hash=h)
            res = await s.call_tool('update_msg', dict(msg_id=mid, content='x = 3', expected_hash=h))
            assert res.is_error and 'x = 2' in text(res) and content_hash('x = 2') in text(res)
            res = await s.call_tool('del_msgs', dict(ids=[mid], expected_hash=h))
            assert res.is_error and 'x = 2' in text(res)
            assert 'deleted 1 message' in await ok(s, 'del_msgs', ids=[mid], expected_hash=content_hash('x = 2'))
    run(main)


# ---------------------------------------------------------------- old Solveit dialogs
SEP = '\n\n##### 🤖Reply🤖<!-- SOLVEIT_SEPARATOR_7f3a9b2c -->\n\n'


def old_dialog(path: Path, ids: bool = True) -> bytes:
    "An old-format Solveit dialog (prompt and reply in one markdown cell) as Solveit wrote it; its bytes"
    cells = [{'cell_type': 'markdown', 'metadata': {}, 'source': ['# Notes\n', 'from an old dialog']},
             {'cell_type': 'code', 'execution_count': 1, 'metadata': {}, 'outputs': [{'name': 'stdout', 'output_type': 'stream', 'text': ['42\n']}],
              'source': ['print(6 * 7)']},
             {'cell_type': 'markdown', 'metadata': {'solveit_ai': True}, 'source': ['What is 6 * 7?', SEP, 'It is **42**.']}]
    if ids:
        for c, i in zip(cells, ['aa000001', 'aa000002', 'aa000003']): c['id'] = i
    nb = {'cells': cells, 'metadata': {'kernelspec': {'display_name': 'Python 3', 'language': 'python', 'name': 'python3'},
                                        'solveit_dialog_mode': 'learning', 'solveit_ver': 1},
          'nbformat': 4, 'nbformat_minor': 5 if ids else 4}
    data = json.dumps(nb, indent=1, ensure_ascii=False).encode() + b'\n'
    path.write_bytes(data)
    return data


def check_converted(path: Path, note_id: str, note: str):
    "The file is in the current form: the prompt a `%%prompt` code cell with its reply as an `is_ai_res` output; aidialog reads it"
    cells = json.loads(path.read_text())['cells']
    p = cells[2]
    assert p['cell_type'] == 'code' and ''.join(p['source']) == '%%prompt\nWhat is 6 * 7?' and p['metadata']['solveit_ai'] is True
    assert [o['metadata'] for o in p['outputs']] == [{'is_ai_res': True}] and ''.join(p['outputs'][0]['data']['text/markdown']) == 'It is **42**.'
    d = read_ipynb(path)
    assert [(m.msg_type, m.content) for m in d.messages] == [('note', note), ('code', 'print(6 * 7)'), ('prompt', 'What is 6 * 7?')]
    assert d.messages[0].id == note_id and d.messages[2].ai_res == 'It is **42**.'


@pytest.mark.parametrize('ids', [True, False], ids=['with-ids', 'nbformat-4.4-no-ids'])
def test_old_dialog_python_api(tmp_path, ids):
    f = tmp_path / 'old.ipynb'
    before = old_dialog(f, ids)
    dm = DialogManager(tmp_path, save_delay=0.05)
    dm.use_dialog('old')
    ms = dm.messages('old')
    assert [(m['msg_type'], m['content'], m['ai_output']) for m in ms][2] == ('prompt', 'What is 6 * 7?', 'It is **42**.')
    dm.find_messages('42', dialog_name='old'); dm.read_message(n=0, relative=False, dialog_name='old'); dm.msg_idx(ms[2]['id'], dialog_name='old')
    time.sleep(0.3)  # past the autosave delay: nothing is due
    dm.unuse_dialog('old')
    assert f.read_bytes() == before
    f.touch()  # changed on disk (mtime): reloaded on the next operation, still not written
    dm.use_dialog('old'); dm.messages('old'); dm.reload('old'); dm.messages('old'); dm.close_all()
    assert f.read_bytes() == before
    dm.use_dialog('old')
    note_id = dm.messages('old')[0]['id']
    dm.update_message(note_id, content='# Notes\nedited', dialog_name='old')
    dm.close_all()
    check_converted(f, note_id, '# Notes\nedited')


def test_old_dialog_over_mcp(tmp_path):
    f = tmp_path / 'old.ipynb'
    before = old_dialog(f)
    async def main():
        async with stdio_session(tmp_path) as s:
            assert '3 messages' in await ok(s, 'use_dialog', dialog_name='old')
            assert 'It is **42**.' in await ok(s, 'find_msgs', dialog_name='old')
            assert 'What is 6 * 7?' in await ok(s, 'read_msg', msg_id='aa000003', dialog_name='old')
            await ok(s, 'dialog_files')
            await ok(s, 'unuse_dialog', dialog_name='old')
            assert f.read_bytes() == before
            await ok(s, 'use_dialog', dialog_name='old')
            await ok(s, 'read_msg', n=0, relative=False, dialog_name='old')
        assert f.read_bytes() == before  # the server stopped with the dialog still open: still untouched
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_dialog', dialog_name='old')
            await ok(s, 'update_msg', msg_id='aa000001', content='# Notes\nedited over MCP', dialog_name='old')
            await ok(s, 'unuse_dialog', dialog_name='old')
        check_converted(f, 'aa000001', '# Notes\nedited over MCP')
    run(main)


@contextmanager
def serve(root: Path):
    "`headlesnb serve --root root` on a free port; stopped by PID (SIGINT, then kill) at the end"
    port = free_port()
    log = root.parent / f'{root.name}-serve.log'
    with open(log, 'w') as out:
        proc = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', str(root), '--port', str(port)],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    http = httpx.Client(base_url=f'http://127.0.0.1:{port}', timeout=30)
    try:
        end = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if http.get('/health', timeout=1).status_code == 200: break
            except httpx.TransportError: pass
            assert time.monotonic() < end, f'headlesnb serve did not start within 60 s:\n{log.read_text()[-3000:]}'
            time.sleep(0.1)
        yield http
    finally:
        http.close()
        proc.send_signal(signal.SIGINT)
        try: proc.wait(15)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait(5)


def same_bytes(f: Path, before: bytes, when: str):
    now = f.read_bytes()
    assert now == before, f'{f.name} was rewritten {when}: {len(before)} -> {len(now)} bytes'


def test_old_dialog_over_headlesnb_serve(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    f = root / 'old.ipynb'
    before = old_dialog(f)
    def post(http, ep, **data):
        r = http.post(f'/{ep}', data=data)
        assert r.status_code == 200 and 'error' not in r.text[:20], f'{ep}: {r.status_code} {r.text[:500]}'
        return r
    with serve(root) as http:
        d = post(http, 'curr_dialog_', dlg_name='old', with_messages='true').json()
        assert [m['msg_type'] for m in d['messages']] == ['note', 'code', 'prompt']
        assert post(http, 'read_msg_', dlg_name='old', id_='aa000003', n=0).json()['output'] == 'It is **42**.'
        assert 'aa000002' in post(http, 'find_msgs_', dlg_name='old', re_pattern='6').text
        post(http, 'msg_idx_', dlg_name='old', id_='aa000002')
        assert http.get('/dialog_', params={'name': 'old'}).status_code == 200  # the page a browser shows
        post(http, 'list_dialogs_')
        time.sleep(0.5)
        same_bytes(f, before, 'while open and read')
        assert post(http, 'stop_kernel_', name='old').json() == {'success': 'dialog stopped'}  # saved and closed
        same_bytes(f, before, 'on stop_kernel_')
        post(http, 'read_msg_', dlg_name='old', n=0, relative='false')  # opened again
    same_bytes(f, before, 'when the server stopped with the dialog open')
    with serve(root) as http:
        h = post(http, 'read_msg_', dlg_name='old', id_='aa000001', n=0).json()['hash']
        assert h == content_hash('# Notes\nfrom an old dialog')
        post(http, 'update_msg_', dlg_name='old', id_='aa000001', content='# Notes\nedited over HTTP', expected_hash=h)
        # the hash guard over HTTP: the same (now stale) hash is refused, with the message as it is now; nothing changes
        r = http.post('/update_msg_', data=dict(dlg_name='old', id_='aa000001', content='# Notes\nlost edit', expected_hash=h)).json()
        assert 'was changed since it was read' in r['error'] and 'edited over HTTP' in r['error']
        assert 'was changed since it was read' in http.post('/rm_msg_', data=dict(dlg_name='old', msid='aa000001', expected_hash=h)).json()['error']
        post(http, 'stop_kernel_', name='old')
    check_converted(f, 'aa000001', '# Notes\nedited over HTTP')
