"""Dialog fixes from the MCP editing audit (#1, #2, #15, #16) and the prompts an Engine's close ends, checked as a client sees them:
the official MCP client against `python -m headlesnb.fronts.mcp` over stdio, prompts answered by tests/fake_anthropic.py
through the real anthropic SDK. Every server is a subprocess the MCP client stops when its session ends."""
import json, os, re, threading, time

import pytest
from headlesnb.engine import Engine
from fake_anthropic import FakeAnthropic
from test_mcp import stdio_session, ok, err, run

pytestmark = pytest.mark.timeout(180)


async def new_msg(s, content, msg_type) -> str:
    return re.search(r'message ([0-9a-f]{8})', await ok(s, 'add_msg', content=content, msg_type=msg_type))[1]


def test_undo_of_the_current_message_leaves_no_current_message(tmp_path, monkeypatch):
    "#1: dialog_undo of the answered prompt (the current message): read_msg(n=0) said 'no cell with id <the undone prompt>'"
    with FakeAnthropic(replies=['R1']) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        async def go():
            async with stdio_session(tmp_path) as s:
                await ok(s, 'use_dialog', dialog_name='d', mode='create')
                await new_msg(s, 'note A', 'note')
                p = await new_msg(s, 'prompt B', 'prompt')
                await ok(s, 'execute_prompt')
                await ok(s, 'dialog_undo')
                assert p not in await ok(s, 'list_dialogs')  # (it was still listed as current)
                e = await err(s, 'read_msg', n=0)
                assert 'no current message' in e and 'no cell' not in e and p not in e, e
                assert 'note A' in await ok(s, 'read_msg', n=-1)  # offsets count from the end, as the error says
                await ok(s, 'dialog_redo')
                assert 'R1' in await ok(s, 'read_msg', msg_id=p)
        run(go)


def test_dialog_tools_name_a_missing_message(tmp_path):
    "#2: an unknown message id is a message of dialog 'd' and find_msgs lists them (it was 'no cell with id ... in d.ipynb')"
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            await new_msg(s, 'hello', 'note')
            calls = [('update_msg', dict(msg_id='nope', content='x')), ('del_msgs', dict(ids=['nope'])),
                     ('add_msg', dict(content='x', msg_id='nope', placement='add_after')), ('execute_prompt', dict(msg_id='nope')),
                     ('read_msg', dict(msg_id='nope')), ('run_msg', dict(msg_id='nope'))]
            for tool, args in calls:
                e = await err(s, tool, **args)
                assert "no message 'nope' in dialog 'd' (d.ipynb): find_msgs (Python: find_messages) lists its messages" in e and 'cell' not in e, (tool, e)
            assert '\t1\t' in await ok(s, 'list_dialogs')  # nothing was added
    run(go)


def test_rm_dialog_refuses_a_dialog_open_as_a_notebook(tmp_path):
    """#15: rm_dialog deleted d.ipynb though notebook 'dn' held it, and dn's next edit wrote the whole dialog back. (One file is
    not open as a dialog and a notebook at once: two copies, one side's edits lost at the other's save)"""
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            await new_msg(s, 'dialog msg', 'note')
            e = await err(s, 'use_notebook', notebook_name='dn', notebook_path='d.ipynb')
            assert "d.ipynb is open as dialog 'd'" in e and 'unuse_dialog' in e, e
            await ok(s, 'unuse_dialog', dialog_name='d')
            await ok(s, 'use_notebook', notebook_name='dn', notebook_path='d.ipynb')
            e = await err(s, 'rm_dialog', dialog_name='d')
            assert "cannot delete 'd.ipynb': it is open as notebook 'dn' (unuse_notebook it first)" in e, e
            assert (tmp_path / 'd.ipynb').exists()
            await ok(s, 'unuse_notebook', notebook_name='dn')
            assert 'deleted d.ipynb' in await ok(s, 'rm_dialog', dialog_name='d')
            assert not (tmp_path / 'd.ipynb').exists()
    run(go)


def test_no_api_key_says_where_a_server_gets_it(tmp_path, monkeypatch):
    "#16: without a key the MCP error said 'or pass api_key', which no tool takes; it names the server's env and a restart"
    with FakeAnthropic(replies=['never sent']) as fake:
        monkeypatch.delenv('ANTHROPIC_API_KEY', raising=False); monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url)
        async def go():
            async with stdio_session(tmp_path) as s:
                await ok(s, 'use_dialog', dialog_name='d', mode='create')
                await new_msg(s, 'p', 'prompt')
                for tool in ('execute_prompt', 'run_msg'):
                    e = await err(s, tool)
                    assert ("put ANTHROPIC_API_KEY in the environment of the process that runs headlesnb and restart it "
                            "(`headlesnb mcp`: the server's `env` in the MCP client's settings") in e and 'or pass api_key' not in e, e
        run(go)
        assert fake.requests == []


def test_closing_the_engine_keeps_the_reply_so_far(tmp_path, monkeypatch):
    """Engine.close() while a prompt streamed dropped the reply (the MCP server ended prompts itself first; a script, serve or any
    other host of an Engine did not): the dialogs' close ends the prompts as `interrupt` does, their replies so far stored"""
    chunks = [dict(type='text', text=f'part{i} ' * 5) for i in range(12)]
    with FakeAnthropic(replies=[dict(content=chunks)], delay=0.15) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        eng = Engine(tmp_path)
        eng.dialogs.use_dialog('dd', mode='create')
        eng.dialogs.add_message('tell me', 'prompt')
        got = {}
        def ask():
            try: got['res'] = eng.dialogs.execute_prompt()
            except Exception as e: got['exc'] = e
        t = threading.Thread(target=ask); t.start()
        end = time.monotonic() + 20
        while 'part1' not in ''.join(eng.dialogs.reply_so_far('dd').values()) and time.monotonic() < end: time.sleep(0.05)
        eng.close()
        t.join(20)
        cell = json.loads((tmp_path / 'dd.ipynb').read_text())['cells'][0]
        reply = ''.join(''.join(o.get('data', {}).get('text/markdown', '')) for o in cell['outputs'])
        assert 'part0' in reply and 'part11' not in reply and cell['metadata'].get('interrupted') is True, (cell, got)
