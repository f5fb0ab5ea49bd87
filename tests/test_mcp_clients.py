"""Several MCP clients on one `headlesnb mcp --transport http` server (a real subprocess, the official client, one session each).

Each session has its own default notebook and dialog (the one it last used; one that used none gets the notebook the
server started with), so a call without `notebook_name` never lands in another client's notebook; and `undo`/`redo`
never revert another client's step. The files on disk are what the tests read back.
"""
import json, re, signal, subprocess, sys, time

import anyio
import pytest
from conftest import free_port
from test_mcp import ended, err, http_server, http_session, ok, run, server_args, text, until_answering  # noqa: F401 (http_server is a fixture)

pytestmark = pytest.mark.timeout(180)


def sources(path) -> list:
    return [''.join(c['source']) for c in json.loads(path.read_text())['cells']]


def test_each_client_has_its_own_default(http_server, tmp_path):
    url = http_server()
    async def main():
        async with http_session(url) as a, http_session(url) as b:
            await ok(a, 'use_notebook', notebook_name='a', mode='create')
            await ok(b, 'use_notebook', notebook_name='b', mode='create')  # b used last: before, a's calls went to b's notebook
            await ok(a, 'insert_cell', cell_index=-1, cell_type='code', cell_source='owner = "a"')
            await ok(b, 'insert_cell', cell_index=-1, cell_type='code', cell_source='owner = "b"')
            await ok(a, 'execute_cell', cell_index=0)
            assert "'a'" in await ok(a, 'execute_code', code='owner')  # a's kernel
            assert 'NameError' in await ok(b, 'execute_code', code='owner')  # b's kernel never ran a's cell
            started = await ok(b, 'run_all', wait=0)  # a run carried out in a thread of its own: b's notebook too
            run_id = re.search(r'get_run\(run_id="(run-\w+)"', started)
            done = await ok(b, 'get_run', run_id=run_id[1], wait=30) if run_id else started
            assert "ENDED: ok" in done and "all run of 'b'" in done, done
            assert "'b'" in await ok(b, 'execute_code', code='owner')
            listed = await ok(a, 'list_notebooks')
            rows = {r.split('\t')[0]: r.split('\t')[4] for r in listed.splitlines()[1:]}
            assert rows == {'a': '✓', 'b': ''}, listed  # each sees its own active notebook
            async with http_session(url) as c:  # a client that chose none: no default (the server started without --notebook)
                assert 'none is active' in await err(c, 'insert_cell', cell_index=-1, cell_type='code', cell_source='lost')
            await ok(b, 'unuse_notebook', notebook_name='a')  # b closes a's notebook: a has no default, not b's
            assert 'none is active' in await err(a, 'insert_cell', cell_index=-1, cell_type='code', cell_source='lost')
            await ok(b, 'insert_cell', cell_index=-1, cell_type='markdown', cell_source='b again')
        assert sources(tmp_path / 'a.ipynb') == ['owner = "a"']
        assert sources(tmp_path / 'b.ipynb') == ['owner = "b"', 'b again']
    run(main)


def test_undo_reverts_only_your_own_steps(http_server, tmp_path):
    url = http_server()
    async def main():
        async with http_session(url) as a, http_session(url) as b:
            await ok(a, 'use_notebook', notebook_name='shared', mode='create')
            await ok(b, 'use_notebook', notebook_name='shared', mode='connect')
            await ok(a, 'insert_cell', cell_index=-1, cell_type='code', cell_source='from_a = 1')
            await ok(b, 'insert_cell', cell_index=-1, cell_type='code', cell_source='from_b = 1')
            steps = (await ok(a, 'history')).splitlines()[1:3]  # a's insert, then b's
            assert 'another client' not in steps[0] and 'by another client: not yours to undo' in steps[1], steps
            e = await err(a, 'undo')  # the newest step is b's: undoing it would revert b's work
            assert "another client made that change" in e and 'nothing changed' in e, e
            assert sources(tmp_path / 'shared.ipynb') == ['from_a = 1', 'from_b = 1']
            await ok(b, 'undo')
            assert "another client" in await err(a, 'redo')  # b's undone step is b's to redo
            await ok(a, 'undo')
            assert sources(tmp_path / 'shared.ipynb') == []
            await ok(b, 'use_dialog', dialog_name='talk', mode='create')  # dialogs: the same rules
            await ok(a, 'use_dialog', dialog_name='talk', mode='connect')
            await ok(b, 'add_msg', content='note from b', msg_type='note')
            assert 'another client' in await err(a, 'dialog_undo')
            await ok(b, 'dialog_undo')
        async with http_session(url) as c:
            await ok(c, 'insert_cell', notebook_name='shared', cell_index=-1, cell_type='code', cell_source='from_c = 1')
        async with http_session(url) as again:  # c's session ended (c reconnecting is a new session): its step is anyone's to undo
            with anyio.fail_after(30):  # (known once the server let the ended session go)
                while 'not yours' in (await ok(again, 'history', notebook_name='shared')).splitlines()[1]: await anyio.sleep(0.2)
            await ok(again, 'undo', notebook_name='shared')
        assert sources(tmp_path / 'shared.ipynb') == []
    run(main)


def test_clients_without_a_choice_get_the_servers_notebook(http_server, tmp_path):
    (tmp_path / 'start.ipynb').write_text(json.dumps({'cells': [], 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}))
    url = http_server(extra=['--notebook', 'start.ipynb'])
    async def main():
        async with http_session(url) as a, http_session(url) as b:
            await ok(a, 'use_notebook', notebook_name='mine', mode='create')
            await ok(b, 'insert_cell', cell_index=-1, cell_type='code', cell_source='into start')  # b chose none: the server's
            await ok(a, 'insert_cell', cell_index=-1, cell_type='code', cell_source='into mine')
        assert sources(tmp_path / 'start.ipynb') == ['into start']
        assert sources(tmp_path / 'mine.ipynb') == ['into mine']
    run(main)


def test_ctrl_c_starts_no_cell_that_waits_its_turn_and_answers_every_call(tmp_path):
    """Three clients each run a cell of their own notebook; in-process cells take turns, so two wait. Ctrl-C: the running cell is
    interrupted, the waiting ones never start (one did start after the Ctrl-C, as the server ended), every call is answered, 130"""
    port = free_port()
    p = subprocess.Popen([sys.executable, *server_args(tmp_path, '--transport', 'http', '--port', str(port))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url, got, asked = f'http://127.0.0.1:{port}/mcp', {}, set()
    cell = 'import time\nopen("started-{i}", "w").write(repr(time.time()))\nfor k in range(40): print(k, flush=True); time.sleep(0.25)'
    async def client(i):
        try:
            async with http_session(url) as s:
                await ok(s, 'use_notebook', notebook_name=f'n{i}', mode='create')
                await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source=cell.format(i=i))
                asked.add(i)
                got[i] = text(await s.call_tool('execute_cell', dict(cell_index=0, timeout=60)))
        except BaseException as e: got.setdefault(i, repr(e))
    async def main():
        await until_answering(url)
        async with anyio.create_task_group() as tg:
            for i in range(3): tg.start_soon(client, i)
            with anyio.fail_after(60):
                while not list(tmp_path.glob('started-*')) or len(asked) < 3: await anyio.sleep(0.05)
            await anyio.sleep(1)  # all three calls made and received: two wait for their turn
            p.send_signal(signal.SIGINT)
            got['sigint'] = time.time()
    try:
        try: run(main)
        except BaseException: pass  # (the sessions end with the server)
        p.wait(30)
        errs = p.stderr.read()
        assert p.returncode == 130 and 'ERROR' not in errs and 'Traceback' not in errs, (p.returncode, errs)
        started = [float(f.read_text()) for f in tmp_path.glob('started-*')]
        assert len(started) == 1 and started[0] < got['sigint'], (started, got)
        assert all(got[i].startswith('[INTERRUPTED') for i in range(3)), got
    finally:
        if p.poll() is None: p.kill(); p.wait()
        p.stderr.close()


def test_run_all_passes_over_a_cell_another_client_deleted(http_server, tmp_path):
    "A cell deleted by another client before run_all reached it is passed over and named; the run is what the code did (ok)"
    url = http_server()
    async def main():
        async with http_session(url) as a, http_session(url) as b:
            await ok(a, 'use_notebook', notebook_name='na', mode='create')
            for i in range(4):
                await ok(a, 'insert_cell', cell_index=-1, cell_type='code', cell_source=f'import time\nprint("cell {i}", flush=True); time.sleep(0.6)')
            last = json.loads((tmp_path / 'na.ipynb').read_text())['cells'][-1]['id']
            started = await ok(a, 'run_all', wait=0.3)
            run_id = re.search(r'get_run\(run_id="(run-\w+)"', started)[1]
            await ok(b, 'use_notebook', notebook_name='na', mode='connect')
            await ok(b, 'delete_cell', cell_indices=[3], notebook_name='na')
            done = await ended(a, run_id, within=30)
            assert 'ENDED: ok' in done and f'note: passed over 1 cell deleted before its turn (id {last})' in done, done
        assert [c.get('outputs', [{}])[0].get('text') for c in json.loads((tmp_path / 'na.ipynb').read_text())['cells']] == [['cell 0\n'], ['cell 1\n'], ['cell 2\n']]
    run(main)


def test_a_run_whose_cell_another_client_deleted_says_so_and_how_to_read_it(http_server, tmp_path):
    "Its end notes the outputs were not stored, and a cut names the run (which keeps them), not the cell that is gone"
    url = http_server()
    async def main():
        async with http_session(url) as a, http_session(url) as b:
            await ok(a, 'use_notebook', notebook_name='nd', mode='create')
            started = await ok(a, 'insert_execute_code_cell', cell_index=-1, wait=0.3,
                               cell_source='print("x" * 60000, flush=True)\nimport time; time.sleep(1.5)')
            run_id = re.search(r'get_run\(run_id="(run-\w+)"', started)[1]
            await ok(b, 'use_notebook', notebook_name='nd', mode='connect')
            await ok(b, 'delete_cell', cell_indices=[0], notebook_name='nd')
            await ended(a, run_id, within=30)
            last = await ok(a, 'get_run', run_id=run_id)  # (from output 0: the whole print, cut)
            assert 'note: the cell was deleted while it ran, so its outputs were not stored' in last, last
            assert f"read_output(run_id='{run_id}'" in last and 'read_output(cell_id=' not in last, last
            page = await ok(a, 'read_output', run_id=run_id, output_index=0, offset=10000)
            assert page.startswith(f'output 0 of run {run_id}: characters 10,000-') and 'x' * 100 in page, page[:200]
    run(main)
