"""Long runs over MCP, as the runs audit of issue #26 found them (D5, D6, D11, D14, D15), through the official client against
`python -m headlesnb.fronts.mcp` subprocesses (stdio and streamable HTTP).

`interrupt(run_id=...)` stops a dialog's run as its own answer says; a prompt run answers its reply (run_msg, get_run);
`--tools dialogs` has the interrupt and read_output those answers name; numeric arguments of the run tools refuse booleans and numeric strings, as the Python API does; Ctrl-C of the HTTP server
with a poll pending exits 130 quietly; every cut output of a dialog run names a way to read the rest that works.
Every server process is stopped by PID.
"""
import os, re, signal, subprocess, sys, time

import anyio
import pytest
from conftest import free_port
from fake_anthropic import FakeAnthropic
from test_mcp import stdio_session, http_session, ok, err, text, run, server_args, until_answering
from test_mcp_runs import structured, call, ended

pytestmark = pytest.mark.timeout(180)

SLOW = 'import time\nfor i in range(40):\n    print(i, flush=True); time.sleep(0.5)'


async def new_msg(s, content, msg_type) -> str:
    return re.search(r'message ([0-9a-f]{8})', await ok(s, 'add_msg', content=content, msg_type=msg_type))[1]


# `--tools dialogs`: no notebook tools, yet a dialog run's answer names interrupt and read_output: the server has them
ONLY_DIALOGS = pytest.mark.parametrize('tools', [(), ('--tools', 'dialogs')], ids=['all', 'dialogs'])

@ONLY_DIALOGS
def test_interrupt_by_run_id_stops_a_dialog_run(tmp_path, tools):
    "D5: the [RUNNING ...] line of a dialog run says interrupt(run_id=...): that call stops it (it said 'no run', 'runs known: none')"
    async def go():
        async with stdio_session(tmp_path, *tools) as s:
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            d = structured(await call(s, 'run_msg', msg_id=await new_msg(s, SLOW, 'code'), wait=0.6))
            rid = d['run_id']
            assert f'interrupt(run_id="{rid}")' in text(await call(s, 'get_run', run_id=rid))
            # an unknown id names the runs that exist, the dialog's among them
            assert rid in await err(s, 'interrupt', run_id='run-00000000')
            t0 = time.monotonic()
            assert 'stopping it' in await ok(s, 'interrupt', run_id=rid)
            end = await ended(s, rid, 10)
            assert end['status'] == 'interrupted' and time.monotonic() - t0 < 5, end
    run(go)


def test_a_prompt_run_answers_its_reply(tmp_path, monkeypatch):
    "D6: run_msg on a prompt answers the reply (it failed with KeyError: 'output'); a prompt run polled with get_run shows it at its end; a cut names read_output"
    with FakeAnthropic(replies=['first reply ' * 20, 'second reply ' * 20, 'a' * 15000 + ' MIDDLE ' + 'z' * 15000], delay=0.02) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        async def go():
            async with stdio_session(tmp_path) as s:
                await ok(s, 'use_dialog', dialog_name='d', mode='create')
                mid = await new_msg(s, 'Tell me a story', 'prompt')
                t = text(await call(s, 'run_msg', msg_id=mid))
                assert t.startswith('reply to ') and 'first reply first reply' in t, t
                d = structured(await call(s, 'run_msg', msg_id=mid, wait=0))
                assert d['kind'] == 'prompt' and not d['done'], d
                end = await ended(s, d['run_id'], 30)
                assert end['status'] == 'ok' and end['total_outputs'] == 1, end
                assert 'second reply second reply' in text(await call(s, 'get_run', run_id=d['run_id'])), end
                # a reply too long for one answer names how to read the rest (read_output by run id)
                await reads_the_rest(s, text(await call(s, 'run_msg', msg_id=mid)))
        run(go)



def test_execute_prompt_takes_wait(tmp_path, monkeypatch):
    """execute_prompt takes `wait` as run_msg does (issue #26: the dialog tools that run code, and a prompt's tools run code):
    a slow reply answers within it with the run's id, goes on, and get_run shows the reply at its end; a code message is refused"""
    with FakeAnthropic(replies=['slow reply ' * 40, 'quick'], delay=0.05) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        async def go():
            async with stdio_session(tmp_path) as s:
                await ok(s, 'use_dialog', dialog_name='d', mode='create')
                mid = await new_msg(s, 'Tell me a story', 'prompt')
                t0 = time.monotonic()
                d = structured(await call(s, 'execute_prompt', msg_id=mid, wait=0.3))
                assert time.monotonic() - t0 < 1.5 and d['kind'] == 'prompt' and not d['done'], d
                end = await ended(s, d['run_id'], 30)
                assert end['status'] == 'ok' and 'slow reply slow reply' in text(await call(s, 'get_run', run_id=d['run_id'])), end
                assert text(await call(s, 'execute_prompt', msg_id=mid, wait=30)).startswith('reply to ')  # ended within it: the reply
                code = await new_msg(s, 'x = 1', 'code')
                assert 'not a prompt' in await err(s, 'execute_prompt', msg_id=code, wait=1)
        run(go)


def test_a_run_of_a_closed_notebook_says_so(tmp_path):
    "A run polled after its notebook was closed answers its status and a note saying so (it said 'no run ... never existed')"
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            d = structured(await call(s, 'insert_execute_code_cell', cell_index=-1, cell_source='print(1)', wait=5))
            await ok(s, 'unuse_notebook', notebook_name='nb')
            t = text(await call(s, 'get_run', run_id=d['run_id']))
            assert 'ENDED: ok' in t and "note: its notebook 'nb' was closed since: its outputs are in nb.ipynb" in t, t
    run(go)

BAD_NUMBERS = [
    ('execute_code', dict(code='1', wait=True)), ('execute_code', dict(code='1', wait='1')), ('execute_code', dict(code='1', timeout=True)),
    ('execute_code', dict(code='1', timeout='5')), ('insert_execute_code_cell', dict(cell_index=-1, cell_source='1', progress_interval=True)),
    ('run_all', dict(wait=False)), ('get_run', dict(since=True)), ('get_run', dict(since='0')), ('get_run', dict(wait='1e308')),
    ('get_run', dict(since=1.0)), ('read_output', dict(output_index=True)), ('read_output', dict(offset=True)),
    ('read_output', dict(limit='10')), ('read_output', dict(output_index='0')), ('run_msg', dict(wait=True)), ('run_msg', dict(timeout='1'))]


def test_numeric_arguments_are_strict(tmp_path):
    "D11: a boolean or a numeric string is no number of seconds nor an index (pydantic's lax mode took True as 1, '2' as 2)"
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            rid = structured(await call(s, 'execute_code', code='print(1)', wait=5))['run_id']
            for tool, args in BAD_NUMBERS:
                a = dict(args, run_id=rid) if tool in ('get_run', 'read_output') else args
                msg = await err(s, tool, **a)
                assert f'invalid arguments for {tool}' in msg and next(iter(args.keys() - {'code', 'cell_index', 'cell_source'})) in msg, msg
            # an integer where seconds are a float still works (JMS clients send timeout=30), and 0 is an index
            assert 'outputs 0-0 of 1' in await ok(s, 'get_run', run_id=rid, wait=1, since=0)
            assert '3' in await ok(s, 'execute_code', code='1+2', timeout=30, wait=5, progress_interval=1)
            assert 'output 0 of run' in await ok(s, 'read_output', run_id=rid, output_index=0, offset=0, limit=10)
    run(go)


def test_ctrl_c_of_the_http_server_with_a_poll_pending_exits_130_quietly(tmp_path):
    "D14: SIGINT with a run going and a client in get_run(wait): exit 130, no uvicorn ERROR (it exited 0 and logged one)"
    port = free_port()
    p = subprocess.Popen([sys.executable, *server_args(tmp_path, '--transport', 'http', '--port', str(port))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f'http://127.0.0.1:{port}/mcp'
        async def go():
            await until_answering(url)
            async with http_session(url) as s:
                await ok(s, 'use_notebook', notebook_name='nb', mode='create')
                rid = structured(await call(s, 'insert_execute_code_cell', cell_index=-1, cell_source=SLOW, wait=1))['run_id']
                async with anyio.create_task_group() as tg:
                    async def poll():
                        with anyio.move_on_after(20):
                            try: await s.call_tool('get_run', dict(run_id=rid, since=500, wait=600))
                            except Exception: pass  # the server went away mid-call
                        tg.cancel_scope.cancel()
                    tg.start_soon(poll)
                    await anyio.sleep(1)
                    p.send_signal(signal.SIGINT)
        try: run(go)
        except BaseException: pass  # (the session ends with the server)
        p.wait(20)
        errs = p.stderr.read()
        assert p.returncode == 130 and 'ERROR' not in errs and 'Traceback' not in errs, (p.returncode, errs)
    finally:
        if p.poll() is None: p.kill(); p.wait()
        p.stderr.close()


BIG = 'import time; time.sleep({t}); print("a" * 25000 + "MIDDLE" + "z" * 25000)'


async def reads_the_rest(s, answer_text):
    "The read_output call a cut answer names works, and reaches the part it left out"
    m = re.search(r'(read_output\([^)]*\))', answer_text)
    assert m, answer_text[:3000]
    assert 'notebook_name=' not in m[1] and 'notebook://' not in answer_text, m[1]
    args = dict(re.findall(r"(\w+)=('[^']*'|\d+)", m[1]))
    page = await ok(s, 'read_output', **{k: v.strip("'") if v.startswith("'") else int(v) for k, v in args.items()})
    assert 'MIDDLE' in page or 'a' * 100 in page, page[:300]
    return page


@ONLY_DIALOGS
def test_cut_outputs_of_dialog_runs_say_how_to_read_the_rest(tmp_path, tools):
    "D15: a cut dialog output named read_output(..., notebook_name='d') and notebook://d/..., which fail; run_msg ended within its call named nothing"
    async def go():
        async with stdio_session(tmp_path, *tools) as s:
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            mid = await new_msg(s, BIG.format(t=0), 'code')
            await reads_the_rest(s, text(await call(s, 'run_msg', msg_id=mid)))              # ended within the call, no wait
            await reads_the_rest(s, text(await call(s, 'run_msg', msg_id=mid, wait=30)))     # ended within its wait
            mid = await new_msg(s, BIG.format(t=1), 'code')
            rid = structured(await call(s, 'run_msg', msg_id=mid, wait=0.2))['run_id']
            await ended(s, rid)
            await reads_the_rest(s, text(await call(s, 'get_run', run_id=rid)))             # polled to its end
    run(go)
