"""MCP notebook and dialog editing, as the second MCP audit found it (#4, #8, #13, #14), through the
official client against `python -m headlesnb.fronts.mcp` subprocesses (stdio and streamable HTTP), prompts answered by the
fake Anthropic API.

A file changed on disk while the server holds unsaved edits (`--no-durable`) is no dead end: the errors name the MCP calls
that settle it, and each works (ours kept with `save(force=true)` / `unuse_dialog(force=true)`, theirs taken with
`mode='reload'`); Ctrl-C of the HTTP server while a prompt is answered stores the reply so far (`interrupted`) and answers
the waiting call, then exits 130; `unuse_notebook` names the run it stopped; the `--tools` groups the README names are the
ones `--tools` takes. Every server process is stopped by PID.
"""
import json, os, re, shlex, signal, subprocess, sys, time
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from conftest import free_port
from fake_anthropic import FakeAnthropic
from test_mcp import stdio_session, http_session, ok, err, text, run, server_args, until_answering
from test_mcp_runs import structured, call

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[1]


def write_outside(path, sources):
    "Another program rewrites the notebook at `path`: one markdown cell per source"
    nb = json.loads(path.read_text())
    nb['cells'] = [dict(cell_type='markdown', id=f'out{i}', metadata={}, source=s) for i, s in enumerate(sources)]
    path.write_text(json.dumps(nb))


def sources(path) -> list: return [''.join(c['source']) for c in json.loads(path.read_text())['cells']]


# ---------------------------------------------------------------- #4: a conflict with an outside write is settled over MCP
def test_a_notebook_in_conflict_names_the_mcp_calls_and_each_settles_it(tmp_path):
    "#4: the errors named reload / save(force=True), which MCP lacked; the notebook was stuck until the server restarted"
    async def go():
        async with stdio_session(tmp_path, '--no-durable') as s:
            for keep in (True, False):
                nd = tmp_path / f'nd{keep}.ipynb'
                await ok(s, 'use_notebook', notebook_name='nd', notebook_path=nd.name, mode='create')
                await ok(s, 'insert_cell', cell_index=-1, cell_type='markdown', cell_source='ours')
                write_outside(nd, ['theirs'])  # at once: before the server's save (0.2 s later) writes ours
                for tool, args in (('insert_cell', dict(cell_index=-1, cell_type='markdown', cell_source='ours2')), ('save', {}),
                                   ('unuse_notebook', dict(notebook_name='nd'))):
                    e = await err(s, tool, **args)
                    assert "save(notebook_name='nd', force=true)" in e and "use_notebook(notebook_name='nd', mode='reload')" in e, e
                    assert 'save with force=True' not in e, e
                if keep:
                    assert 'saved' in await ok(s, 'save', notebook_name='nd', force=True)
                    assert sources(nd) == ['ours']
                else:
                    assert 'reloaded' in await ok(s, 'use_notebook', notebook_name='nd', mode='reload')  # as the error says: its file is the name's
                    assert 'theirs' in await ok(s, 'read_notebook', notebook_name='nd')
                    assert sources(nd) == ['theirs']
                await ok(s, 'unuse_notebook', notebook_name='nd')  # let go: no longer refused
                assert sources(nd) == (['ours'] if keep else ['theirs'])
    run(go)


def test_a_dialog_in_conflict_names_the_mcp_calls_and_each_settles_it(tmp_path):
    "#4 for dialogs: the same conflict (an outside write before the server's save) was as stuck: no save, no reload"
    async def go():
        async with stdio_session(tmp_path, '--no-durable') as s:
            for keep in (True, False):
                name = f'd{keep}'
                d = tmp_path / f'{name}.ipynb'
                await ok(s, 'use_dialog', dialog_name=name, mode='create')
                await ok(s, 'add_msg', content='ours')
                write_outside(d, ['theirs'])
                for tool, args in (('add_msg', dict(content='ours2')), ('unuse_dialog', {})):
                    e = await err(s, tool, **args)
                    assert f"unuse_dialog(dialog_name='{name}', force=true)" in e and f"use_dialog(dialog_name='{name}', mode='reload')" in e, e
                if keep:
                    assert 'closed' in await ok(s, 'unuse_dialog', dialog_name=name, force=True)
                    assert sources(d) == ['ours']
                else:
                    assert 'reloaded' in await ok(s, 'use_dialog', dialog_name=name, mode='reload')
                    assert 'theirs' in await ok(s, 'find_msgs')
                    await ok(s, 'unuse_dialog')
                    assert sources(d) == ['theirs']
    run(go)


# ---------------------------------------------------------------- #8: Ctrl-C while a prompt is answered
def slow_reply(n=12) -> dict: return dict(content=[dict(type='text', text=f'part{i} ' * 5) for i in range(n)])


async def prompt_then_ctrl_c(s, fake, interrupt, got):
    "Ask dialog 'dd' a prompt the fake API answers slowly; Ctrl-C the server a few chunks in; the call's result (or failure) in `got`"
    await ok(s, 'use_dialog', dialog_name='dd', mode='create')
    await ok(s, 'add_msg', content='tell me', msg_type='prompt')
    async with anyio.create_task_group() as tg:
        async def ask():
            with anyio.move_on_after(20):
                try: got['res'] = await s.call_tool('execute_prompt', {})
                except Exception as e: got['exc'] = e
            tg.cancel_scope.cancel()
        tg.start_soon(ask)
        with anyio.fail_after(30):
            while not fake.requests: await anyio.sleep(0.05)
        await anyio.sleep(1.5)  # a few chunks in, many to come
        interrupt()
        await anyio.sleep(30)


def ctrl_c(send, presses:int):
    "Ctrl-C `presses` times, 0.15 s apart, as a person who presses it again does"
    for i in range(presses):
        if i: time.sleep(0.15)
        send(signal.SIGINT)


def check_reply_so_far(root, got):
    "The call was answered with the reply so far, and the prompt stores it marked interrupted (as interrupt_dialog leaves it)"
    assert 'res' in got, got
    t = text(got['res'])
    assert not got['res'].is_error and 'interrupted' in t and 'part0' in t, t
    cell = json.loads((root / 'dd.ipynb').read_text())['cells'][0]
    reply = ''.join(''.join(o.get('data', {}).get('text/markdown', '')) for o in cell['outputs'])
    assert 'part0' in reply and 'part11' not in reply and cell['metadata'].get('interrupted') is True, cell


@pytest.mark.parametrize('presses', [1, 3])
def test_ctrl_c_of_the_http_server_stores_the_reply_so_far_and_answers_the_prompt(tmp_path, monkeypatch, presses):
    """#8: SIGINT while execute_prompt streamed: the prompt kept no reply, the client's call was cut; now as interrupt_dialog does, then 130.
    Pressed three times, the same (a second Ctrl-C cut the server's end short: a uvicorn traceback)"""
    with FakeAnthropic(replies=[slow_reply()], delay=0.15) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        port = free_port()
        p = subprocess.Popen([sys.executable, *server_args(tmp_path, '--transport', 'http', '--port', str(port))],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url, got = f'http://127.0.0.1:{port}/mcp', {}
            async def go():
                await until_answering(url)
                async with http_session(url) as s: await prompt_then_ctrl_c(s, fake, lambda: ctrl_c(p.send_signal, presses), got)
            try: run(go)
            except BaseException: pass  # (the session ends with the server)
            p.wait(20)
            errs = p.stderr.read()
            assert p.returncode == 130 and 'ERROR' not in errs and 'Traceback' not in errs, (p.returncode, errs)
            check_reply_so_far(tmp_path, got)
        finally:
            if p.poll() is None: p.kill(); p.wait()
            p.stderr.close()


def stdio_prompt_then_ctrl_c(tmp_path, fake, presses:int=1) -> tuple:
    "A stdio server asked a prompt of `fake`, then Ctrl-C `presses` times (`prompt_then_ctrl_c`): (its exit status, its stderr, the call's result or failure, its root)"
    rc, errlog, got, root = tmp_path / 'rc', tmp_path / 'stderr', {}, tmp_path / 'root'
    root.mkdir()
    # the official client starts the server; a shell between keeps its exit status (the client reaps the process it started)
    cmd = f'{shlex.join([sys.executable, *server_args(root)])}; echo $? > {shlex.quote(str(rc))}'
    async def go():
        params = StdioServerParameters(command='sh', args=['-c', cmd], env=dict(os.environ))
        with open(errlog, 'w') as f:
            async with stdio_client(params, errlog=f) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                server = next(c for c in psutil.Process().children(recursive=True) if c.cmdline()[1:3] == ['-m', 'headlesnb.fronts.mcp'])
                await prompt_then_ctrl_c(s, fake, lambda: ctrl_c(server.send_signal, presses), got)
                with anyio.move_on_after(20):  # (the client ends the shell as it leaves: not before its exit status is kept)
                    while not (rc.exists() and rc.read_text().strip()): await anyio.sleep(0.1)
    try: run(go)
    except BaseException: pass  # (the session ends with the server)
    return rc.read_text().strip(), errlog.read_text(), got, root


@pytest.mark.parametrize('presses', [1, 3])
def test_ctrl_c_of_the_stdio_server_stores_the_reply_so_far_and_answers_the_prompt(tmp_path, monkeypatch, presses):
    """#8 over stdio: the reply so far was stored or not (a race with the dialogs' close), and the call was cut; then 130.
    Pressed three times, the same (a second Ctrl-C left the call unanswered)"""
    with FakeAnthropic(replies=[slow_reply()], delay=0.15) as fake:
        monkeypatch.setenv('ANTHROPIC_BASE_URL', fake.url); monkeypatch.setenv('ANTHROPIC_API_KEY', 'test')
        rc, errs, got, root = stdio_prompt_then_ctrl_c(tmp_path, fake, presses)
        assert rc == '130' and 'Traceback' not in errs, (rc, errs)
        check_reply_so_far(root, got)


# ---------------------------------------------------------------- #13: unuse_notebook says which run it stopped
SLOW = 'import time\nfor i in range(30):\n    print(i, flush=True); time.sleep(0.5)'


def test_unuse_notebook_names_the_run_it_stopped(tmp_path):
    "#13: closing a notebook with a run going stopped the run and answered plain success"
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='n', mode='create')
            await ok(s, 'insert_cell', cell_index=-1, cell_type='markdown', cell_source='# first')
            res = await call(s, 'insert_execute_code_cell', cell_index=-1, cell_source=SLOW, wait=1)
            rid, cid = structured(res)['run_id'], res.meta['io.jupyter-mcp/cell_id']
            t = await ok(s, 'unuse_notebook', notebook_name='n')
            assert f'stopped run {rid}, cell 1 (id {cid})' in t, t
            await ok(s, 'use_notebook', notebook_name='m', mode='create')
            assert 'stopped' not in await ok(s, 'unuse_notebook', notebook_name='m')  # nothing was going
    run(go)


# ---------------------------------------------------------------- #14: the docs name the groups --tools takes
def test_the_tool_groups_the_docs_name_are_the_ones_tools_takes(tmp_path):
    "#14: README's size table and 04_servers named `workspace.core` and `agents.tree`, which --tools refused (exit 2)"
    readme = (REPO / 'README.md').read_text()
    table = re.search(r'\| group \| tools \| characters \|\n(.*?)\n\n', readme, re.S)[1]
    rows = {m[1]: int(m[2]) for m in re.finditer(r'^\| `([\w.]+)`[^|]*\| (\d+) \|', table, re.M)}
    servers = ''.join(''.join(c['source']) for c in json.loads((REPO / 'nbs/explanations/04_servers.ipynb').read_text())['cells'])
    named = re.search(r'`--tools GROUPS` \| [^|]*?: ((?:`[\w.]+`, )*`[\w.]+`)', servers)[1]
    assert set(re.findall(r'`([\w.]+)`', named)) == set(rows), (named, rows)
    async def go():
        for group, n in rows.items():
            async with stdio_session(tmp_path, '--tools', group) as s:
                tools = {t.name for t in (await s.list_tools()).tools} - {'ping', 'get_run', 'list_runs', 'interrupt', 'read_output'}
                assert len(tools) == n or group == 'notebooks' and len(tools) == n - 2, (group, n, sorted(tools))
    run(go)
