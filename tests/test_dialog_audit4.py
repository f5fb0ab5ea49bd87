"""Dialog defects of the fixes2 audit (F13, F4, F12, F11), checked as a client sees them: the official MCP client against
`python -m headlesnb.fronts.mcp` (stdio), prompts answered by tests/fake_anthropic.py through the real anthropic SDK.
Every server is a subprocess the MCP client stops when its session ends (the Ctrl-C one is signalled by its PID)."""
import json, re, time

import anyio
import pytest
from fake_anthropic import FakeAnthropic
from test_mcp import ended, stdio_session, ok, text, run
from test_mcp_audit2 import slow_reply, stdio_prompt_then_ctrl_c

pytestmark = pytest.mark.timeout(180)


def prompt_cell(path) -> dict: return json.loads(path.read_text())['cells'][0]
def stored_reply(cell) -> str: return ''.join(''.join(o.get('data', {}).get('text/markdown', '')) for o in cell['outputs'])


def slow_start(seconds):
    "A reply the fake API starts to stream only after `seconds` (a slow first token, long thinking, a retry)"
    def reply(body):
        time.sleep(seconds)
        return 'late words'
    return reply


async def run_id_of(s, tool, **args) -> str: return re.search(r'run-[0-9a-f]{8}', await ok(s, tool, **args))[0]


async def prompt_sent(s, fake, dialog:str, question:str) -> str:
    "A new dialog's prompt started (wait=0), once the fake API has its request; the run's id"
    await ok(s, 'use_dialog', dialog_name=dialog, mode='create')
    await ok(s, 'add_msg', content=question, msg_type='prompt')
    rid = await run_id_of(s, 'execute_prompt', wait=0)
    with anyio.fail_after(30):
        while not fake.requests: await anyio.sleep(0.05)
    return rid


# ---------------------------------------------------------------- F13: unuse_dialog during a prompt
@pytest.mark.parametrize('force', [False, True])
def test_unuse_dialog_ends_its_prompt_and_never_writes_into_it_opened_again(tmp_path, monkeypatch, force):
    """F13: unuse_dialog during execute_prompt closed the dialog at once; the prompt went on unseen, its reply was lost (the run
    failed: no dialog 'dd'), or written into 'dd' opened again. Now the close ends it as interrupt_dialog does: reply so far
    stored, marked interrupted, its run ended 'interrupted', and nothing written after the close"""
    with FakeAnthropic(replies=[slow_reply()], delay=0.15) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        async def go():
            async with stdio_session(tmp_path) as s:
                await ok(s, 'use_dialog', dialog_name='dd', mode='create')
                await ok(s, 'add_msg', content='tell me', msg_type='prompt')
                rid = await run_id_of(s, 'execute_prompt', wait=0)
                with anyio.fail_after(30):
                    while not fake.requests: await anyio.sleep(0.05)
                await anyio.sleep(1.5)  # a few chunks in, many to come
                assert "closed dialog 'dd'" in await ok(s, 'unuse_dialog', dialog_name='dd', force=force)
                cell = prompt_cell(tmp_path / 'dd.ipynb')  # stored by the close itself
                assert 'part0' in stored_reply(cell) and 'part11' not in stored_reply(cell) and cell['metadata'].get('interrupted') is True, cell
                await ok(s, 'use_dialog', dialog_name='dd')  # opened again while the old stream would still run
                assert 'ENDED: interrupted' in await ended(s, rid, within=5)
                await anyio.sleep(7)  # the whole reply would have streamed by now
                assert 'part11' not in await ok(s, 'read_msg', n=0, relative=False)
                await ok(s, 'unuse_dialog', dialog_name='dd')
                assert prompt_cell(tmp_path / 'dd.ipynb') == cell  # nothing written after the close
        run(go)


# ---------------------------------------------------------------- F4: a stop before the model's first chunk
def test_interrupt_before_the_first_chunk_answers_the_prompt_at_once(tmp_path, monkeypatch):
    "F4: a stop was seen only at the model's next chunk, so interrupt_dialog before the first one left the prompt going until it came"
    with FakeAnthropic(replies=[slow_start(6)]) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        async def go():
            async with stdio_session(tmp_path) as s:
                rid = await prompt_sent(s, fake, 'dd', 'tell me')
                await anyio.sleep(0.5)
                t0 = time.monotonic()
                await ok(s, 'interrupt_dialog')
                assert 'ENDED: interrupted' in await ended(s, rid, within=3)
                assert time.monotonic() - t0 < 2.5  # (not when the first chunk comes, 6 s after the request)
                assert 'late words' not in await ok(s, 'read_msg', n=0, relative=False)
        run(go)


def test_ctrl_c_before_the_first_chunk_answers_the_prompt(tmp_path, monkeypatch):
    "F4: Ctrl-C of the stdio server while the prompt waited for the model's first chunk: the call was never answered (EOF), then 130"
    with FakeAnthropic(replies=[slow_start(6)]) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        rc, errs, got, root = stdio_prompt_then_ctrl_c(tmp_path, fake)
        assert rc == '130' and 'Traceback' not in errs, (rc, errs)
        assert 'res' in got and not got['res'].is_error and 'interrupted' in text(got['res']), got
        assert 'late words' not in json.dumps(prompt_cell(root / 'dd.ipynb'))


# ---------------------------------------------------------------- F12: a dialog's run is a message's
def test_get_run_names_a_dialog_message_not_a_cell(tmp_path, monkeypatch):
    "F12: get_run of a dialog's run said \"cell run of 'd', cell id …\" (run_msg says 'message')"
    with FakeAnthropic(replies=[slow_reply(3)], delay=0.1) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        async def go():
            async with stdio_session(tmp_path) as s:
                await ok(s, 'use_dialog', dialog_name='d', mode='create')
                code = re.search(r'message ([0-9a-f]{8})', await ok(s, 'add_msg', content='import time; time.sleep(1)', msg_type='code'))[1]
                t = await ended(s, await run_id_of(s, 'run_msg', wait=0))
                assert f"code run of dialog 'd', message {code}: ok" in t and 'cell' not in t, t
                p = re.search(r'message ([0-9a-f]{8})', await ok(s, 'add_msg', content='hi', msg_type='prompt'))[1]
                t = await ended(s, await run_id_of(s, 'execute_prompt', wait=0))
                assert f"prompt run of dialog 'd', message {p}: ok" in t and 'cell' not in t, t
        run(go)


# ---------------------------------------------------------------- F11: find_msgs(context=N) within its budget
def test_find_msgs_shows_matches_before_context_within_the_limit(tmp_path):
    """F11: find_msgs(context=3) spent the answer on a context message (a code message with a long output), showed no match,
    called the context message 'matching' and went past text_limit by its note"""
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            await ok(s, 'add_msg', content="print('y' * 140_000)", msg_type='code')
            await ok(s, 'run_msg')
            for i in range(6): await ok(s, 'add_msg', content=f'big{i} ' + 'x' * 6000)
            t = await ok(s, 'find_msgs', re_pattern='big', context=3)
            assert len(t) <= 20_000, len(t)
            assert 'big0 ' in t and 'big1 ' in t and 'yyyy' not in t, t[:300]
            note = t[t.rindex('\n\n['):]
            assert '3 more matching messages left out' in note and '1 context message (around the matches) left out' in note, note
    run(go)


# ---------------------------------------------------------------- two prompt runs of one dialog
def test_a_prompt_run_waits_for_the_one_before_and_sees_its_reply(tmp_path, monkeypatch):
    """Two prompts of one dialog started as runs (wait=0) are answered in turn, as cells are: the second is QUEUED behind
    the first, and the model gets the first one's reply with it (it was sent before it, as 'pending'); a queued prompt
    run that is interrupted never reaches the model"""
    with FakeAnthropic(replies=[slow_start(2), 'second words', slow_start(2)]) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        async def go():
            async with stdio_session(tmp_path) as s:
                await ok(s, 'use_dialog', dialog_name='d', mode='create')
                first = re.search(r'message ([0-9a-f]{8})', await ok(s, 'add_msg', content='first question', msg_type='prompt'))[1]
                second = re.search(r'message ([0-9a-f]{8})', await ok(s, 'add_msg', content='second question', msg_type='prompt'))[1]
                a = await run_id_of(s, 'execute_prompt', msg_id=first, wait=0)
                queued = await ok(s, 'execute_prompt', msg_id=second, wait=0.3)
                assert queued.startswith(f'[QUEUED behind {a}'), queued
                b = re.search(r': run (run-[0-9a-f]{8})', queued)[1]  # (the first id named is the run it waits for)
                assert 'ENDED: ok' in await ended(s, a) and 'ENDED: ok' in await ended(s, b)
                assert len(fake.requests) == 2
                sent = json.dumps(fake.requests[1]['messages'])
                assert 'late words' in sent and 'pending' not in sent, sent
                third = re.search(r'message ([0-9a-f]{8})', await ok(s, 'add_msg', content='third question', msg_type='prompt'))[1]
                c = await run_id_of(s, 'execute_prompt', msg_id=third, wait=0)
                d = re.search(r': run (run-[0-9a-f]{8})', await ok(s, 'execute_prompt', msg_id=second, wait=0))[1]
                await ok(s, 'interrupt', run_id=d)
                assert 'ENDED: interrupted' in await ended(s, d) and 'ENDED: ok' in await ended(s, c)
                assert len(fake.requests) == 3  # the interrupted one never went out
        run(go)


def test_a_prompt_interrupted_before_any_word_is_marked(tmp_path, monkeypatch):
    "A prompt never answered before, stopped before the model said anything: marked interrupted in its file, not left looking never run"
    with FakeAnthropic(replies=[slow_start(4)]) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        async def go():
            async with stdio_session(tmp_path) as s:
                rid = await prompt_sent(s, fake, 'd', 'a question')
                await ok(s, 'interrupt', run_id=rid)
                assert 'ENDED: interrupted' in await ended(s, rid)
                cell = prompt_cell(tmp_path / 'd.ipynb')
                assert cell['metadata'].get('interrupted') is True and stored_reply(cell) == '', cell
        run(go)
