"""Dialog fixes from an audit, checked across a process boundary: `headlesnb serve` as a real subprocess (its prompts
answered by tests/fake_anthropic.py through ANTHROPIC_BASE_URL), and a real python3 kernel for prompt tools.
Every server process is stopped by PID at the end of its test."""
import json, os, re, time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from fake_anthropic import FakeAnthropic
import test_serve_audit as serve_audit

pytestmark = pytest.mark.timeout(300)


@contextmanager
def serve(root: Path, fake: FakeAnthropic | None = None, *args):
    "`headlesnb serve --root root` (test_serve_audit's), prompts sent to `fake`: an httpx client for it"
    env = {'ANTHROPIC_API_KEY': 't', **({'ANTHROPIC_BASE_URL': fake.url} if fake is not None else {})}
    with serve_audit.serve(root, *args, env=env, timeout=60) as (http, log): yield http


def post(http, ep, **data) -> httpx.Response: return http.post(f'/{ep}', data=data)


def test_rm_dialog_refuses_folders_that_hold_more_than_dialogs(tmp_path):
    root = tmp_path / 'root'
    (root / 'w' / 'src').mkdir(parents=True); (root / 'w' / 'src' / 'app.py').write_text('x=1\n'); (root / 'w' / '.git').mkdir()
    with serve(root) as http:
        for name in ('w/src', 'w/.git', 'w'):
            r = post(http, 'rm_dialog_', name=name)
            assert r.status_code == 400 and 'holds more than dialogs' in r.json()['error'], (name, r.status_code, r.text)
        assert (root / 'w' / 'src' / 'app.py').read_text() == 'x=1\n' and (root / 'w' / '.git').is_dir()
        assert post(http, 'create_dialog_', name='w/notes/a').status_code == 200
        r = post(http, 'rm_dialog_', name='w/notes')
        assert r.status_code == 200 and r.json() == {'success': 'deleted "w/notes"'}, r.text
        assert not (root / 'w' / 'notes').exists() and (root / 'w' / 'src' / 'app.py').exists()


def wait_for(cond, secs=30, what='a condition'):
    end = time.monotonic() + secs
    while not cond():
        assert time.monotonic() < end, f'timed out waiting for {what}'
        time.sleep(0.05)


def test_serve_interrupt_stops_a_prompt(tmp_path):
    "A prompt streaming slowly (40 text blocks, 12 s in all) is stopped by interrupt_; the reply so far is stored, marked interrupted"
    root, words = tmp_path / 'root', [f'word{i} ' for i in range(40)]
    text = ''.join(words)
    root.mkdir()
    with FakeAnthropic(replies=[[{'type': 'text', 'text': w} for w in words]], delay=0.1) as fake, serve(root, fake) as http:
        def ok(ep, **d):
            r = post(http, ep, **d); assert r.status_code == 200, (ep, r.text); return r.json()
        ok('create_dialog_', name='chat')
        assert ok('interrupt_', dlg_name='chat')['success'] == 'nothing was running'
        pid = ok('add_relative_', dlg_name='chat', content='Tell me a story', msg_type='prompt', run='true')['id']
        wait_for(lambda: fake.requests, what='the prompt to reach the model')
        time.sleep(1)  # a few chunks in
        t0 = time.monotonic()
        r = ok('interrupt_', dlg_name='chat')
        assert r['interrupted'] is True and r['success'] == 'stopped the prompt being answered', r
        read = lambda: ok('read_msg_', dlg_name='chat', id_=pid, n=0)
        wait_for(lambda: not read()['run'], 10, 'the prompt to stop')
        assert time.monotonic() - t0 < 5  # the whole reply would take 10 s more
        m = read()
        assert m['meta'].get('interrupted') is True and 0 < len(m['output']) < len(text) and text.startswith(m['output'].strip()), m
        assert ok('interrupt_', dlg_name='chat')['success'] == 'nothing was running'


def test_serve_errors_say_what_where_and_what_to_do(tmp_path):
    root = tmp_path / 'root'
    root.mkdir(); (root / 'victim.ipynb').write_text('{}')
    with serve(root) as http:
        assert post(http, 'create_dialog_', name='chat').status_code == 200
        r = post(http, 'bookmark_', dlg_name='chat', n='5')
        assert r.status_code == 400 and r.json()['error'] == 'no message id given: name the message to put bookmark 5 on (or take it off)', r.text
        r = post(http, 'create_dialog_', name='victim.ipynb/x')
        assert r.status_code == 400 and "'victim.ipynb' is a file, not a folder; choose another name" in r.json()['error'], r.text
        assert (root / 'victim.ipynb').read_text() == '{}'


def test_mcp_run_msg_names_the_dialog_path(tmp_path):
    import anyio
    from test_mcp import stdio_session, err
    async def go():
        async with stdio_session(tmp_path) as s:
            assert not (await s.call_tool('create_dialog', {'dialog_name': 'a/b/c'})).is_error
            return await err(s, 'run_msg', msg_id='zz', dialog_name='a/b/c')
    assert "no message 'zz' in dialog 'a/b/c' (a/b/c.ipynb)" in anyio.run(go)


def test_prompt_tools_run_in_a_python3_kernel(tmp_path):
    "&`f` tools with a kernel process: schemas made there, calls (sync and async) made there, arguments never pasted into code"
    from headlesnb import DialogManager
    from headlesnb.llm import AnthropicClient
    tricky = "x'); import os; os._exit(3) #\"\\"
    calls = [('add', {'a': 2, 'b': 3}), ('aadd', {'a': 3, 'b': 4}), ('echo', {'s': tricky}), ('boom', {})]
    with FakeAnthropic(replies=[{'tool_calls': calls}, 'done']) as fake:
        dm = DialogManager(tmp_path, llm=AnthropicClient(api_key='t', base_url=fake.url))
        try:
            dm.use_dialog('k', mode='create', kernel='python3')
            dm.add_message('def add(a:int, b:int):\n    "Add two numbers"\n    return a + b\nasync def aadd(a:int, b:int): return a + b\n'
                           'def echo(s:str): return s\ndef boom(): raise ValueError("no luck")\nimport os; pid = os.getpid()', 'code')
            assert dm.run_message()['status'] == 'ok'
            assert dm.list_variables()  # (a kernel process: its namespace is not a dict here)
            r = dm.execute_prompt(dm.add_message('Use &`add`, &`aadd`, &`echo`, &`boom`, &`nope`', 'prompt')['id'])
            assert [(c['name'], c['result'], c['is_error']) for c in r['tool_calls']] == [
                ('add', '5', False), ('aadd', '7', False), ('echo', tricky, False), ('boom', 'ValueError: no luck', True)]
            assert r['missing_tools'] == ['nope'] and r['reply'].endswith('done')
            tools = fake.requests[0]['tools']
            assert [t['name'] for t in tools] == ['add', 'aadd', 'echo', 'boom'] and tools[0]['description'] == 'Add two numbers'
            assert tools[0]['input_schema']['properties']['a']['type'] == 'integer'
            assert ''.join(dm.execute_code('print(pid == os.getpid())')['outputs'][0]['text']) == 'True\n'  # the same kernel, alive
        finally: dm.close_all()


def test_mcp_interrupt_dialog_stops_execute_prompt(tmp_path, monkeypatch):
    "MCP interrupt_dialog during a slow execute_prompt (40 text blocks, 12 s in all) stops it; the reply so far is stored"
    import anyio
    from test_mcp import stdio_session, ok
    words = [f'word{i} ' for i in range(40)]
    with FakeAnthropic(replies=[[{'type': 'text', 'text': w} for w in words]], delay=0.1) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 't')
        async def go():
            async with stdio_session(tmp_path) as s:
                await ok(s, 'create_dialog', dialog_name='chat')
                assert 'nothing was running' in await ok(s, 'interrupt_dialog', dialog_name='chat')
                out = await ok(s, 'add_msg', content='Tell me a story', msg_type='prompt', dialog_name='chat')
                pid = re.search(r'\b([0-9a-f]{8})\b', out).group(1)
                res = {}
                async def answer(): res['reply'] = await ok(s, 'execute_prompt', msg_id=pid, dialog_name='chat')
                async with anyio.create_task_group() as tg:
                    tg.start_soon(answer)
                    while not fake.requests: await anyio.sleep(0.05)
                    await anyio.sleep(1)
                    t0 = time.monotonic()
                    said = await ok(s, 'interrupt_dialog', dialog_name='chat')
                assert said.startswith('stopped the prompt being answered') and time.monotonic() - t0 < 5, said
                return res['reply']
        reply = anyio.run(go)
    text = ''.join(words)
    got = json.loads((tmp_path / 'chat.ipynb').read_text())['cells'][0]
    assert got['metadata'].get('interrupted') is True, got
    assert '(interrupted: the reply so far):' in reply, reply
    kept = reply.split(':\n', 1)[1]
    assert 0 < len(kept) < len(text) and text.startswith(kept.strip()), reply
