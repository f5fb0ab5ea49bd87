"""Long runs (issue #26), as the runs audit found them broken: a wait too long to count, queued runs that could not be
stopped or dropped at once, a blocking call whose client went away, polls that repeated output, runs forgotten when
their notebook closed, and an outside edit of the file during a run. Through the Python API (`Engine(root).notebooks`)
and the official MCP client over stdio and HTTP against `python -m headlesnb.fronts.mcp` (stopped by PID).
"""
import json, time

import anyio
import nbformat
import pytest
from headlesnb import Engine
from headlesnb.kernels.subkernel import list_kernelspecs
from test_mcp import stdio_session, http_server, http_session, ok, text, run  # noqa: F401 (fixture)
from test_mcp_runs import call, structured as sc

pytestmark = pytest.mark.timeout(180)

SLOW = 'import time\nfor i in range(40):\n    time.sleep(0.5)'  # 20 s of a cell another notebook's run must not wait for
TICKS = 'import time\nfor i in range(6):\n    print("t", i, flush=True); time.sleep(0.5)\nprint("END")'


def texts(outs) -> list: return [''.join(o.get('text', '')) for o in outs]

def ended(nm, rid, within=30) -> dict:
    "The run's answer once it ended (`get_run` with `wait` also returns when new output comes, before its end)"
    end = time.monotonic() + within
    while not (g := nm.get_run(rid, wait=max(0, end - time.monotonic())))['done']: assert time.monotonic() < end, g
    return g


@pytest.fixture
def nm(tmp_path):
    eng = Engine(tmp_path)
    yield eng.notebooks
    eng.close()


def test_a_wait_too_long_to_count_is_no_limit(nm, tmp_path):
    "D1: wait=1e300 was checked only once the run was started (an OverflowError, the code ran anyway, no run id)"
    nm.use_notebook('nb', mode='create')
    nm.insert_cell(-1, 'code', 'x = 1')
    r = nm.execute_code('print("ran")', wait=1e300)
    assert (r['status'], texts(r['outputs'])) == ('ok', ['ran\n']) and r['run_id'].startswith('run-')
    assert nm.run_all(wait=1e308)['status'] == 'ok'
    assert nm.execute_cell(0, wait=1e300)['status'] == 'ok'
    assert nm.get_run(r['run_id'], wait=1e300)['status'] == 'ok'


@pytest.mark.parametrize('kernel', ['inprocess', 'python3'])
def test_since_polls_return_only_new_output(nm, kernel):
    "D12: each poll with the last answer's `next` repeated that answer's last output (a print is an output of its own)"
    if kernel not in ('inprocess', *list_kernelspecs()): pytest.skip(f'no {kernel} kernel installed')
    nm.use_notebook('nb', mode='create', kernel=kernel)
    nm.execute_code('1')  # (the kernel started)
    r = nm.execute_code('import time\nfor i in range(6):\n    print("line", i, flush=True); time.sleep(0.4)', wait=0.9)
    seen, shown, d = {}, [], r
    while True:
        for i, o in enumerate(d['outputs'], d['since']):
            # shown again only if it could still grow: stream text an in-process kernel had not sent yet (its text a string)
            assert i not in seen or isinstance(seen[i]['text'], str) and kernel == 'inprocess', (i, seen.get(i), o)
            seen[i] = o; shown.append(''.join(o['text']))
        if d['done']: break
        d = nm.get_run(r['run_id'], wait=5, since=d['next'])
    assert ''.join(shown) == ''.join(f'line {i}\n' for i in range(6)), shown  # every line, once


def test_runs_of_a_closed_notebook_stay_known(nm):
    "D13: closing a notebook forgot its runs: get_run said the run 'never existed, or ended long ago'"
    nm.use_notebook('nb', mode='create')
    r = nm.insert_execute_code_cell(-1, 'print(1)', wait=5)
    c = nm.execute_code('print(2)', wait=5)
    nm.unuse_notebook('nb')
    g = nm.get_run(r['run_id'])
    assert (g['status'], g['done'], g['name']) == ('ok', True, 'nb')
    assert "notebook 'nb' was closed since: its outputs are in nb.ipynb" in g['note'], g
    assert 'were not kept' in nm.get_run(c['run_id'])['note']
    assert [x['run_id'] for x in nm.list_runs()] == [r['run_id'], c['run_id']]


def test_an_interrupted_queued_run_ends_at_once(nm):
    "D3 (Python API): a queued run interrupted by id stayed queued, holding the queue, until the run ahead of it ended"
    nm.use_notebook('nb', mode='create')
    a = nm.insert_execute_code_cell(-1, SLOW, wait=0.5)
    q = nm.execute_code('print("never")', wait=0)
    assert q['status'] == 'queued' and q['queued_behind'] == [a['run_id']]
    t0 = time.monotonic()
    assert nm.interrupt_run(q['run_id'])['status'] == 'interrupted'
    g = nm.get_run(q['run_id'], wait=3)
    assert time.monotonic() - t0 < 10 and (g['status'], g['done'], g['reason']) == ('interrupted', True, 'interrupted before it ran'), g  # (not after a's 20 s)
    n = nm.execute_code('print("next")', wait=0)
    assert n['queued_behind'] == [a['run_id']], n  # not behind the run just stopped
    nm.interrupt_run(a['run_id'])
    assert ended(nm, n['run_id'])['status'] == 'ok'


def test_a_blocked_background_run_says_what_to_do(nm):
    """D7: a run started with `wait` runs on a worker thread, where an in-process interrupt cannot stop a call blocked in C
    (no signal reaches that thread in a plain script): the run says so, and what to do"""
    nm.use_notebook('nb', mode='create')
    nm.execute_code('import time')
    r = nm.execute_code('time.sleep(3)', wait=0.3)
    nm.interrupt_run(r['run_id'])
    g = nm.get_run(r['run_id'], wait=10)
    while not g['done']: g = nm.get_run(r['run_id'], wait=10)
    assert "kernel='python3'" in g['reason'] and 'without wait' in g['reason'], g


async def _behind_a_cell(s, step):
    """Notebook a runs a 20 s in-process cell; `step(s, queued, ends_at_once)` acts on notebook b, whose runs wait for it: they
    must end at once (interrupted before they ran), not when a's cell ends; a's cell is left alone"""
    await ok(s, 'use_notebook', notebook_name='b', mode='create')
    await ok(s, 'execute_code', code='y = 2', notebook_name='b')
    await ok(s, 'use_notebook', notebook_name='a', mode='create')
    a = sc(await call(s, 'insert_execute_code_cell', cell_index=-1, cell_source=SLOW, wait=0.5, notebook_name='a'))
    async def queued(code):
        d = sc(await call(s, 'execute_code', code=code, notebook_name='b', wait=0.2))
        assert d['status'] == 'queued' and d['queued_behind'] == [a['run_id']], d
        return d['run_id']
    async def ends_at_once(rid, t0):
        g = sc(await call(s, 'get_run', run_id=rid, wait=5))
        assert time.monotonic() - t0 < 2 and g['status'] == 'interrupted' and g['reason'] == 'interrupted before it ran', g
    then = await step(s, queued, ends_at_once)
    assert sc(await call(s, 'get_run', run_id=a['run_id']))['status'] == 'running'
    await ok(s, 'interrupt', notebook_name='a')
    return then


def test_interrupting_a_run_queued_behind_another_notebooks_cell_ends_it_at_once(tmp_path):
    "D3 over stdio: by run id it stayed `queued` until a's cell ended; by notebook, its dropped runs still held the queue"
    async def step(s, queued, ends_at_once):
        rid = await queued('print(1)'); t0 = time.monotonic()
        assert 'stopping it' in await ok(s, 'interrupt', run_id=rid)
        await ends_at_once(rid, t0)
        rid = await queued('print(2)'); t0 = time.monotonic()  # (queued behind a's run, not behind the one just stopped)
        assert '1 queued run dropped' in await ok(s, 'interrupt', notebook_name='b')
        await ends_at_once(rid, t0)
    async def go():
        async with stdio_session(tmp_path) as s: await _behind_a_cell(s, step)
    run(go)


def test_restarting_a_notebook_whose_run_waits_for_another_notebooks_cell_answers_at_once(tmp_path):
    "D2 over stdio: restart_notebook(b) answered only when a's cell ended (19 s in the audit)"
    async def step(s, queued, ends_at_once):
        rid = await queued('print(3)'); t0 = time.monotonic()
        await ok(s, 'restart_notebook', notebook_name='b')
        await ends_at_once(rid, t0)
        return await queued('y')
    async def go():
        async with stdio_session(tmp_path) as s:
            rid = await _behind_a_cell(s, step)
            assert 'NameError' in text(await call(s, 'get_run', run_id=rid, wait=10))  # once a's cell ends: in a fresh namespace
    run(go)


def test_closing_a_notebook_whose_run_waits_for_another_notebooks_cell_answers_at_once(tmp_path):
    "D4 over stdio: unuse_notebook(b) answered when a's cell ended, and b's run ended `error: NotFoundError`"
    async def step(s, queued, ends_at_once):
        rid = await queued('print(4)'); t0 = time.monotonic()
        await ok(s, 'unuse_notebook', notebook_name='b')
        await ends_at_once(rid, t0)
    async def go():
        async with stdio_session(tmp_path) as s: await _behind_a_cell(s, step)
    run(go)


async def _ended(s, rid) -> dict:
    with anyio.fail_after(30):
        while not (d := sc(await call(s, 'get_run', run_id=rid, wait=10)))['done']: pass
    return d


def _file_outputs(path) -> list: return json.loads(path.read_text())['cells'][0]['outputs']


def test_a_blocking_run_whose_http_client_leaves_is_interrupted_keeping_its_outputs(http_server, tmp_path):
    "D8 (HTTP): the outputs printed were lost and the run ended `error: CancelledError: Cancelled via cancel scope … <Task …>`"
    url = http_server()
    async def first():
        async with http_session(url) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            with anyio.move_on_after(1.3): await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source=TICKS))
    run(first)
    async def second():
        async with http_session(url) as s:
            rid = text(await call(s, 'list_runs')).splitlines()[1].split('\t')[0]
            return await _ended(s, rid)
    d = run(second)
    assert d['status'] == 'interrupted' and 'Task' not in d.get('reason', '') and 'Cancel' not in d.get('reason', ''), d
    outs = _file_outputs(tmp_path / 'nb.ipynb')  # what it printed, then the interrupt
    assert texts(outs[:1]) == ['t 0\n'] and outs[-1]['ename'] == 'KeyboardInterrupt' and 'END\n' not in texts(outs), outs


def test_a_blocking_run_cancelled_over_stdio_is_interrupted(tmp_path):
    "D8 (stdio): the outputs were kept, but the run said `error` with an asyncio cancel-scope repr"
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            with anyio.move_on_after(1.3): await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source=TICKS))
            rid = text(await call(s, 'list_runs')).splitlines()[1].split('\t')[0]
            d = await _ended(s, rid)
            assert d['status'] == 'interrupted' and 'Task' not in d.get('reason', ''), d
            outs = _file_outputs(tmp_path / 'nb.ipynb')
            assert texts(outs[:1]) == ['t 0\n'] and outs[-1]['ename'] == 'KeyboardInterrupt', outs
    run(go)


def test_an_outside_edit_during_a_run_loses_nothing(tmp_path):
    """D16: another program writes the file while a cell runs: the poll failed with a save error, the run ended `error`
    though its code succeeded, and its later outputs never reached the file. Our only unsaved edits are the running
    cell's outputs so far: the file is read again (README: noticed and reloaded) and the outputs written into it"""
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            src = 'import time\nfor i in range(8):\n    print("t", i, flush=True); time.sleep(0.5)'
            rid = sc(await call(s, 'insert_execute_code_cell', cell_index=-1, cell_source=src, wait=1))['run_id']
            with anyio.fail_after(20):  # just after a write of its outputs so far: no write of ours is under way (see below)
                while 't 1' not in (tmp_path / 'nb.ipynb').read_text(): await anyio.sleep(0.02)
            # (a write of ours in flight when another program writes the file still replaces theirs: document.py checks
            # for their change before writing its snapshot, not just before renaming it into place)
            nb = nbformat.read(tmp_path / 'nb.ipynb', as_version=4)
            nb.cells.append(nbformat.v4.new_markdown_cell('OUTSIDE EDIT'))
            nbformat.write(nb, tmp_path / 'nb.ipynb')
            d = await _ended(s, rid)  # every poll answers (none fails with the save error)
            assert (d['status'], d['execution_count']) == ('ok', 1), d
            await ok(s, 'save')
    run(go)
    cells = json.loads((tmp_path / 'nb.ipynb').read_text())['cells']
    assert [c['cell_type'] for c in cells] == ['code', 'markdown'] and ''.join(cells[1]['source']) == 'OUTSIDE EDIT'
    assert texts(cells[0]['outputs']) == [f't {i}\n' for i in range(8)] and cells[0]['execution_count'] == 1


def test_a_first_runs_timeout_message_names_the_limit_given(tmp_path):
    """D10: the first run of a server said 'timed out after 0.73s' for timeout=1: the time its kernel took to start
    (importing IPython) came off the cell's limit, and the kernel named what was left. Only the wait for its turn counts"""
    async def go():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            got = await ok(s, 'execute_code', code='import time; time.sleep(5)', timeout=1)
            assert 'The cell timed out after 1s and was interrupted.' in got, got
    run(go)
