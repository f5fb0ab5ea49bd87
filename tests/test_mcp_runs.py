"""Runs that outlive an MCP call, through the official `fronts.mcp` client against `python -m headlesnb.fronts.mcp` subprocesses.

A long cell started with `wait` answers early with its run id and the outputs so far, and goes on; `get_run` polls it
(only what is new with `since`), the notebook file holds its outputs while it runs, the run survives its client (HTTP)
and a new client reads its end; interrupt by run id; two runs of one notebook queue, runs of two notebooks overlap; the
client is told when a run ends. And what MCP acknowledges is on disk: SIGKILL right after the last answer loses nothing.
Every server process is stopped by PID.
"""
import json, os, re, signal, subprocess, sys, time

import anyio
import pytest
from mcp.types import TextContent
from test_mcp import stdio_session, http_server, http_session, ok, err, text, run, server_args, until_answering  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(240)

LOOP = 'import time\nfor i in range(30):\n    print(f"step {i}", flush=True)\n    time.sleep(1)'


def structured(res) -> dict: return res.structured_content or {}


async def call(s, tool, **args):
    res = await s.call_tool(tool, args)
    assert not res.is_error, f'{tool}({args}) failed: {text(res)}'
    return res


def cell_outputs(path, index=0) -> list: return json.loads(path.read_text())['cells'][index]['outputs']


async def ended(s, rid, within=30) -> dict:
    "Poll run `rid` until it ends (each poll returns at new output or the end); its last answer's structured content"
    with anyio.fail_after(within):
        while not (d := structured(await call(s, 'get_run', run_id=rid, wait=within)))['done']: pass
    return d


def test_long_cell_answers_early_and_is_polled(tmp_path):
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            t0 = time.monotonic()
            res = await call(s, 'insert_execute_code_cell', cell_index=-1, cell_source=LOOP, wait=2)
            took = time.monotonic() - t0
            assert 1.8 < took < 6, took  # answered after about `wait`, not at the end of the 30 s loop
            d = structured(res)
            assert d['status'] == 'running' and not d['done'] and d['run_id'].startswith('run-')
            first = text(res)
            assert first.startswith('[RUNNING: run ' + d['run_id']) and 'get_run(run_id=' in first.splitlines()[0]
            assert 'step 0' in first and 'step 5' not in first  # the outputs so far, and only those
            rid = d['run_id']

            # the file holds the outputs so far while it runs (written every couple of seconds)
            await anyio.sleep(3)
            on_disk = ''.join(''.join(o.get('text', '')) for o in cell_outputs(tmp_path / 'nb.ipynb'))
            assert 'step 2' in on_disk, on_disk

            # polls with `since` get only what is new
            p1 = structured(await call(s, 'get_run', run_id=rid, since=0))
            assert p1['status'] == 'running' and p1['total_outputs'] >= 3
            p2 = await call(s, 'get_run', run_id=rid, since=p1['next'], wait=5)
            t2 = text(p2)
            assert 'step 0' not in t2 and structured(p2)['since'] == p1['next'] and structured(p2)['outputs']

            # a poll with nothing new costs nothing: since past the end is an empty answer, not an error
            far = structured(await call(s, 'get_run', run_id=rid, since=10_000))
            assert far['outputs'] == [] and far['since'] == 10_000

            # read_cell shows the outputs so far
            assert 'step 1' in await ok(s, 'read_cell', cell_index=0)
            # list_runs and list_notebooks show the run going on
            assert rid in await ok(s, 'list_runs') and rid in await ok(s, 'list_notebooks')
            # its notebook's runs, named as every other tool names a notebook (or as list_runs does); another's has none of them
            assert rid in await ok(s, 'list_runs', notebook_name='nb') and rid in await ok(s, 'list_runs', name='nb')
            await ok(s, 'use_notebook', notebook_name='other', mode='create')
            assert rid not in await ok(s, 'list_runs', notebook_name='other')
            await ok(s, 'use_notebook', notebook_name='nb')

            # interrupt by run id stops it within a second or two
            t0 = time.monotonic()
            assert 'stopping it' in await ok(s, 'interrupt', run_id=rid)
            end = await ended(s, rid, 10)
            assert end['status'] == 'interrupted' and time.monotonic() - t0 < 5, end
            assert 'it had already ended' in await ok(s, 'interrupt', run_id=rid)

            # bad input: a clear error, nothing changed
            assert "runs known:" in await err(s, 'get_run', run_id='run-nope')
            assert 'wait' in await err(s, 'get_run', run_id=rid, wait=-1)
            assert 'since' in await err(s, 'get_run', run_id=rid, since=-1)
    run(go)


def test_a_short_run_with_wait_answers_in_full(tmp_path):
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            res = await call(s, 'insert_execute_code_cell', cell_index=-1, cell_source='6 * 7', wait=10)
            assert text(res).splitlines()[0] == '42' and structured(res)['run_id'].startswith('run-')
            t0 = time.monotonic()
            res = await call(s, 'execute_code', code='import time; time.sleep(8)', wait=0)  # wait=0: at once, whatever the code does
            assert time.monotonic() - t0 < 4 and structured(res)['status'] in ('queued', 'running')
            # a second run of the same notebook waits its turn, and says so
            q = structured(await call(s, 'execute_code', code='1 + 1', wait=0))
            assert q['status'] == 'queued' and q['queued_behind'] == [structured(res)['run_id']], q
            done = await ended(s, q['run_id'])
            assert done['status'] == 'ok' and done['outputs'] == ['2'], done
    run(go)


def test_runs_of_two_notebooks_overlap(tmp_path):
    "Two notebooks with kernels of their own run side by side: two 3 s sleeps end in well under 6 s"
    async def go():
        async with stdio_session(tmp_path, '--kernel', 'python3') as s:
            ids = []
            for nb in ('a', 'b'):
                await ok(s, 'use_notebook', notebook_name=nb, mode='create')
                await ok(s, 'execute_code', code='1', notebook_name=nb)  # kernels started first
            t0 = time.monotonic()
            for nb in ('a', 'b'):
                ids.append(structured(await call(s, 'execute_code', code='import time; time.sleep(3); print("slept")', wait=0, notebook_name=nb))['run_id'])
            for rid in ids: assert (await ended(s, rid))['status'] == 'ok'

            assert time.monotonic() - t0 < 5.5
    run(go)


def test_a_killed_kernel_says_so_first(tmp_path):
    "A cell deaf to SIGINT on a kernel of its own: the first line says its kernel was killed and the variables lost (not 'was interrupted')"
    async def go():
        async with stdio_session(tmp_path, '--kernel', 'python3') as s:
            await ok(s, 'use_notebook', notebook_name='k', mode='create')
            r = await ok(s, 'insert_execute_code_cell', cell_index=-1, timeout=1,
                         cell_source='import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)')
            first = r.splitlines()[0]
            assert first.startswith('[TIMEOUT ERROR: IPython execution exceeded 1 seconds and could not be interrupted, so its kernel was killed: '
                                    'variables and imports are lost'), r
    run(go)


def test_in_process_runs_of_two_notebooks_say_they_wait_for_each_other(tmp_path):
    "In-process kernels share one process, so one cell runs at a time: a run waiting for another notebook's says QUEUED behind it, not RUNNING"
    async def go():
        async with stdio_session(tmp_path) as s:
            for nb in ('a', 'b'):
                await ok(s, 'use_notebook', notebook_name=nb, mode='create')
                await ok(s, 'execute_code', code='1', notebook_name=nb)  # kernels started first
            a = structured(await call(s, 'execute_code', code='import time; time.sleep(3)', wait=0, notebook_name='a'))['run_id']
            res = await call(s, 'execute_code', code='1+1', wait=0.5, notebook_name='b')
            d = structured(res)
            assert d['status'] == 'queued' and d['queued_behind'] == [a] and not d['done'], d
            assert text(res).startswith(f'[QUEUED behind {a}: run {d["run_id"]}'), text(res)
            assert 'one cell at a time' in text(res)
            assert {r['run_id']: r['status'] for r in structured(await call(s, 'list_runs'))['items']}[d['run_id']] == 'queued'
            end = await ended(s, d['run_id'])
            assert end['status'] == 'ok' and (await ended(s, a))['status'] == 'ok'
    run(go)


def test_client_is_told_when_a_run_ends(tmp_path):
    async def go():
        got = []
        async def on_log(params): got.append(params)
        async with stdio_session(tmp_path) as s:
            s._logging_callback = on_log
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            rid = structured(await call(s, 'execute_code', code='import time; time.sleep(1.5)', wait=0))['run_id']
            with anyio.fail_after(15):
                while not got: await anyio.sleep(0.1)
            assert got[0].data['run_id'] == rid and got[0].data['status'] == 'ok' and got[0].logger == 'headlesnb.runs'
    run(go)


def test_a_run_outlives_its_http_client(http_server, tmp_path):
    url = http_server()
    async def first():
        async with http_session(url) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            d = structured(await call(s, 'insert_execute_code_cell', cell_index=-1, wait=1,
                                      cell_source='import time\nfor i in range(4):\n    print("tick", i, flush=True); time.sleep(1)\nprint("done")'))
            assert d['status'] == 'running'
            return d['run_id']
    rid = run(first)  # the client has gone away; the server and its run go on
    async def second():
        async with http_session(url) as s:
            assert rid in await ok(s, 'list_runs')
            d = await ended(s, rid)
            assert d['status'] == 'ok'
            outs = text(await call(s, 'get_run', run_id=rid))
            assert 'tick 3' in outs and 'done' in outs
    run(second)
    assert 'done' in ''.join(''.join(o.get('text', '')) for o in cell_outputs(tmp_path / 'nb.ipynb'))


def test_acknowledged_edits_survive_sigkill(tmp_path):
    "Twenty insert_cell calls answered over HTTP, then SIGKILL right after the last answer: all twenty are in the file"
    from conftest import free_port
    port = free_port()
    p = subprocess.Popen([sys.executable, *server_args(tmp_path, '--transport', 'http', '--port', str(port))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f'http://127.0.0.1:{port}/mcp'
        async def edits():
            await until_answering(url)
            async with http_session(url) as s:
                await ok(s, 'use_notebook', notebook_name='nb', mode='create')
                for i in range(20): await ok(s, 'insert_cell', cell_index=-1, cell_type='code', cell_source=f'x = {i}')
                os.kill(p.pid, signal.SIGKILL)  # right after the last answer
        run(edits)
        p.wait(10)
        cells = json.loads((tmp_path / 'nb.ipynb').read_text())['cells']
        assert [''.join(c['source']) for c in cells] == [f'x = {i}' for i in range(20)]
    finally:
        if p.poll() is None: p.kill(); p.wait()


def test_kernels_and_dialog_runs(tmp_path):
    async def go():
        async with stdio_session(tmp_path) as s:
            k = await ok(s, 'list_kernels')
            assert 'Installed kernels' in k and re.search(r'^python3\tpython\t', k, re.M) and re.search(r'^inprocess\tpython\t', k, re.M)
            await ok(s, 'use_dialog', dialog_name='d', mode='create')
            mid = re.search(r'[0-9a-f]{8}', await ok(s, 'add_msg', content='import time; time.sleep(2); print("dialog done")', msg_type='code')).group(0)
            d = structured(await call(s, 'run_msg', msg_id=mid, wait=0.5))
            assert d['status'] == 'running' and d['run_id'].startswith('run-')
            assert (await ended(s, d['run_id']))['status'] == 'ok'
            assert 'dialog done' in text(await call(s, 'get_run', run_id=d['run_id']))
    run(go)
