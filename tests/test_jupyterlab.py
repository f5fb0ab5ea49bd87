"""headlesnb editing a notebook open in the user's JupyterLab: a real JupyterLab with jupyter-collaboration (its own
cached venv, built by tests/setup.sh) and its page in headless Chromium. Edits and outputs show in the page within 2 s,
nothing typed there is lost, Ctrl+S never brings "File Changed", the page's edits reach headlesnb's next read."""
import asyncio, json, logging, os, queue, secrets, shutil, signal, socket, subprocess, sys, threading, time
from pathlib import Path
from types import SimpleNamespace

import httpx, nbformat, pytest
from nbformat.v4 import new_code_cell, new_notebook

from conftest import CHROMIUM, CHROMIUM_ARGS, free_port
from headlesnb.errors import BadArgumentError, ConflictError, CorruptFileError, NotFoundError
from headlesnb.notebook import NotebookManager
from headlesnb.shared import STALE_AFTER

JLAB_VENV = Path(os.environ.get('HEADLESNB_JLAB_VENV', Path.home() / '.cache/headlesnb/jlab-venv-4.6.6'))
LIVE = 2.0  # seconds within which the page shows what headlesnb did

def serve(root:Path, cmd:list, log:Path, token:str|None=None, port:int|None=None) -> SimpleNamespace:
    "Start a Jupyter server on a free port of 127.0.0.1 (or `port`) in `root`; wait until its REST API answers"
    token, port = token or secrets.token_hex(12), port or free_port()
    proc = subprocess.Popen([*cmd, '--no-browser', '--allow-root', f'--IdentityProvider.token={token}', '--ServerApp.ip=127.0.0.1',
                             f'--ServerApp.port={port}', f'--ServerApp.root_dir={root}'], cwd=root, stdout=open(log, 'w'), stderr=subprocess.STDOUT)
    s = SimpleNamespace(url=f'http://127.0.0.1:{port}', token=token, root=root, proc=proc, log=log)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if proc.poll() is not None: pytest.fail(f'{cmd[0]} exited ({proc.returncode}) while starting:\n{log.read_text()[-3000:]}')
        try:
            if httpx.get(f'{s.url}/api/status', headers={'Authorization': f'token {token}'}, timeout=5).status_code == 200: return s
        except httpx.HTTPError: pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f'{cmd[0]} did not answer within 120 s:\n{log.read_text()[-3000:]}')

def stop(s, sig=signal.SIGTERM):
    if s.proc.poll() is None: s.proc.send_signal(sig)
    try: s.proc.wait(20)
    except subprocess.TimeoutExpired: s.proc.kill(); s.proc.wait(5)

def start_lab(root:Path, **kw) -> SimpleNamespace:
    exe = JLAB_VENV / 'bin' / 'jupyter-lab'
    if not exe.exists(): pytest.fail(f'JupyterLab with jupyter-collaboration is not installed at {JLAB_VENV}: run tests/setup.sh (it builds that venv)')
    return serve(root, [str(exe), '--LabApp.expose_app_in_browser=True', '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate'],
                 root.parent / f'{root.name}-lab.log', **kw)

def write_nb(path:Path, cells:list):
    nb = new_notebook(cells=cells, metadata={'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}})
    nbformat.write(nb, path)

@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    "One JupyterLab (with jupyter-collaboration) for the module (module scope: not reaped by conftest after the first test)"
    root = tmp_path_factory.mktemp('lab') / 'root'; root.mkdir()
    s = start_lab(root)
    yield s
    stop(s)

@pytest.fixture(scope='module')
def chromium():
    assert Path(CHROMIUM).exists(), f'{CHROMIUM} is not installed (tests/setup.sh installs it)'
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()

class Page:
    "The JupyterLab page with one notebook open, read as the user sees it (the rendered cells; the tests' notebooks hold code cells only)"
    def __init__(self, chromium, lab, name:str):
        self.pg = chromium.new_page()
        self.dialogs = []  # every dialog that ever showed (title), seen by a watcher in the page
        self.pg.goto(f'{lab.url}/lab/workspaces/t{secrets.token_hex(4)}/tree/{name}?token={lab.token}')  # a workspace of its own: no other tabs
        self.pg.wait_for_selector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .cm-content', timeout=90_000)
        self.pg.evaluate("""() => { window.seenDialogs = [];
            new MutationObserver(() => document.querySelectorAll('.jp-Dialog').forEach(d => {
                const t = d.querySelector('.jp-Dialog-header')?.innerText || d.innerText.slice(0, 80);
                if (!window.seenDialogs.includes(t)) window.seenDialogs.push(t); })).observe(document.body, {childList: true, subtree: true}); }""")

    def cells(self) -> list:
        "Each rendered cell: its source as the editor shows it, its prompt ('[*]:', '[3]:') and its output text"
        return self.pg.evaluate("""() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')].map(c => ({
            source: [...c.querySelectorAll('.cm-content .cm-line')].map(l => l.innerText).join('\\n'),
            prompt: c.querySelector('.jp-InputPrompt')?.innerText.trim() || '',
            output: c.querySelector('.jp-OutputArea')?.innerText || ''}))""")

    def wait(self, test, what:str, timeout:float=LIVE) -> float:
        "Seconds until `test(cells)` holds (polled every 10 ms); fails naming `what` after `timeout`"
        t0 = time.monotonic()
        while True:
            cells = self.cells()
            if test(cells): return time.monotonic() - t0
            if time.monotonic() - t0 > timeout: pytest.fail(f'the page did not show {what} within {timeout} s; it shows {cells}')
            time.sleep(0.01)

    def seen_dialogs(self) -> list: return self.pg.evaluate('window.seenDialogs')
    def editor(self, i:int): return self.pg.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').nth(i).locator('.cm-content')
    def close(self): self.pg.close()

def sources(cells): return [c['source'] for c in cells]

def on_disk(path:Path) -> list:
    "The cell sources of the notebook file; read again if the server is writing it (it writes in place, after a backup copy)"
    for _ in range(50):
        try: return [''.join(c['source']) for c in json.loads(path.read_text())['cells']]
        except json.JSONDecodeError: time.sleep(0.02)
    pytest.fail(f'{path} never held a whole notebook')


@pytest.fixture
def nb(lab, chromium, request):
    "A fresh notebook in the lab's root, open in the page and in a NotebookManager (in-process kernel) given the lab's URL"
    name = f'{request.node.name[5:25]}.ipynb'
    write_nb(lab.root / name, [new_code_cell('t = 0'), new_code_cell('a = 1')])
    page = Page(chromium, lab, name)
    nm = NotebookManager(lab.root, jupyter_url=lab.url, jupyter_token=lab.token, kernel='inprocess', durable=True)
    info = nm.use_notebook('n', name)
    assert info.get('shared') and 'note' not in info, info
    yield SimpleNamespace(name=name, path=lab.root / name, page=page, nm=nm)
    nm.close_all()
    assert page.seen_dialogs() == [], page.seen_dialogs()
    page.close()

def test_insert_edit_run_show_live(nb):
    page, nm = nb.page, nb.nm
    page.wait(lambda cs: sources(cs) == ['t = 0', 'a = 1'], 'the notebook')
    ins = nm.insert_cell(1, 'code', 'b = 2  # from headlesnb')
    t_ins = page.wait(lambda cs: sources(cs) == ['t = 0', 'b = 2  # from headlesnb', 'a = 1'], 'the inserted cell')
    nm.edit_cell_source(ins['id'], 'b = 2', 'b = 22', expected_hash=ins['hash'])
    t_edit = page.wait(lambda cs: cs[1]['source'] == 'b = 22  # from headlesnb', 'the edit')
    code = 'import time\nfor i in range(3):\n    print(f"line {i}", flush=True)\n    time.sleep(0.7)'
    nm.overwrite_cell_source(ins['id'], code)
    assert nm.execute_cell(0)['status'] == 'ok'  # the kernel's start first: what is timed is the outputs, not the start
    r = nm.execute_cell(ins['id'], wait=0)  # the run goes on in the background
    assert r['status'] in ('queued', 'running')
    page.wait(lambda cs: cs[1]['prompt'] == '[*]:', 'the cell running')
    t_out = page.wait(lambda cs: 'line 0' in cs[1]['output'] and 'line 2' not in cs[1]['output'] and cs[1]['prompt'] == '[*]:',
                      'the first line printed while the cell still runs')
    end = time.monotonic() + 30
    while (done := nm.get_run(r['run_id'], wait=5))['status'] in ('queued', 'running') and time.monotonic() < end: pass
    assert done['status'] == 'ok', done
    page.wait(lambda cs: cs[1]['prompt'] == f"[{done['execution_count']}]:" and cs[1]['output'].split() == ['line', '0', 'line', '1', 'line', '2'],
              'the run ended: its count and every output')
    print(f'\nvisible in the page after: insert {t_ins:.3f}s, edit {t_edit:.3f}s, first output {t_out:.3f}s')
    # the server saves the shared document to the file itself (about a second after the last change)
    end = time.monotonic() + 10
    while on_disk(nb.path)[1] != code and time.monotonic() < end: time.sleep(0.1)
    assert on_disk(nb.path)[1] == code

def test_a_run_on_the_servers_kernel_shows_as_it_runs(nb, lab):
    "The same on a kernel of the Jupyter server (the default with a server): outputs as they come, the busy state, the count"
    page = nb.page
    nm = NotebookManager(lab.root, jupyter_url=lab.url, jupyter_token=lab.token, durable=True)
    try:
        nm.use_notebook('s', nb.name)
        assert nm.execute_cell(0, timeout=90)['status'] == 'ok'  # the kernel's start first: the page shows [*] from the run's start, before its kernel answers
        nm.overwrite_cell_source(1, 'import time\nfor i in range(3):\n    print(f"step {i}", flush=True)\n    time.sleep(1)')
        r = nm.execute_cell(1, wait=0)
        page.wait(lambda cs: cs[1]['prompt'] == '[*]:', 'the cell running')
        page.wait(lambda cs: 'step 0' in cs[1]['output'] and 'step 2' not in cs[1]['output'] and cs[1]['prompt'] == '[*]:',
                  'the first line printed while the cell still runs', timeout=LIVE + 1)
        end = time.monotonic() + 60
        while (done := nm.get_run(r['run_id'], wait=5))['status'] in ('queued', 'running') and time.monotonic() < end: pass
        assert done['status'] == 'ok' and nm.list_kernels()[0]['backend'] == 'remote', (done, nm.list_kernels())
        page.wait(lambda cs: cs[1]['prompt'] == f"[{done['execution_count']}]:" and cs[1]['output'].split() == ['step', '0', 'step', '1', 'step', '2'],
                  'the run ended: its count and every output')
    finally: nm.close_all()

def test_typing_in_the_page_keeps_every_character(nb):
    "The user types in a cell while headlesnb inserts and edits cells around it and runs one: nothing typed is lost"
    page, nm = nb.page, nb.nm
    page.wait(lambda cs: len(cs) == 2, 'the notebook')
    stop_at, errors, done = time.monotonic() + 30, [], threading.Event()
    def assistant():
        try:
            k = 0
            while time.monotonic() < stop_at and not done.is_set():
                c = nm.insert_cell(-1 if k % 2 else 0, 'code', f'x{k} = {k}')
                nm.overwrite_cell_source(c['id'], f'x{k} = {k} * 2')
                if k % 5 == 0: nm.execute_cell(c['id'])
                k += 1
                time.sleep(0.05)
        except Exception as e: errors.append(e)
    page.editor(1).click()  # the cell 'a = 1' (before the assistant starts moving it)
    page.pg.keyboard.press('End')
    th = threading.Thread(target=assistant); th.start()
    try:
        typed = '  # typed by the user 0123456789'
        page.pg.keyboard.type(typed, delay=45)
    finally:
        done.set(); th.join(30)
    assert not errors, errors
    want = 'a = 1' + typed
    page.wait(lambda cs: want in sources(cs), 'every character typed')
    end = time.monotonic() + LIVE
    while time.monotonic() < end and want not in [c['source'] for c in nm.read_notebook(response_format='detailed', limit=0)['cells']]:
        time.sleep(0.02)
    assert want in [c['source'] for c in nm.read_notebook(response_format='detailed', limit=0)['cells']]
    theirs = [c['source'] for c in nm.read_notebook(response_format='detailed', limit=0)['cells']]
    page.wait(lambda cs: sources(cs) == theirs, "headlesnb's last edits as well")  # the page may be a moment behind

def test_ctrl_s_at_any_moment_brings_no_dialog(nb):
    page, nm = nb.page, nb.nm
    page.wait(lambda cs: len(cs) == 2, 'the notebook')
    done, errors = threading.Event(), []
    def assistant():
        try:
            k = 0
            while not done.is_set():
                c = nm.insert_cell(-1, 'code', f's{k} = {k}')
                if k % 3 == 0: nm.delete_cell(c['id'])
                k += 1
                time.sleep(0.03)
        except Exception as e: errors.append(e)
    th = threading.Thread(target=assistant); th.start()
    try:
        page.editor(0).click()
        for i in range(12):
            page.pg.keyboard.press('Control+s')
            time.sleep(0.1 + 0.07 * (i % 5))
    finally:
        done.set(); th.join(30)
    assert not errors, errors
    time.sleep(1.5)  # a dialog the last save brings shows by now
    assert page.seen_dialogs() == []
    nm.save()  # the server writes the file: it is what headlesnb holds
    want = [c['source'] for c in nm.read_notebook(response_format='detailed', limit=0)['cells']]
    assert on_disk(nb.path) == want

def test_the_users_saved_edit_is_read_next_and_an_older_edit_refused(nb):
    page, nm = nb.page, nb.nm
    page.wait(lambda cs: len(cs) == 2, 'the notebook')
    before = nm.read_cell(1)
    page.editor(1).click()
    page.pg.keyboard.press('End')
    page.pg.keyboard.type(' + 41')
    page.pg.keyboard.press('Control+s')
    page.wait(lambda cs: cs[1]['source'] == 'a = 1 + 41', "the user's edit")
    end = time.monotonic() + LIVE
    while nm.read_cell(1)['source'] != 'a = 1 + 41' and time.monotonic() < end: time.sleep(0.02)
    assert nm.read_cell(1)['source'] == 'a = 1 + 41'
    with pytest.raises(ConflictError, match='a = 1 \\+ 41'):  # made for the source before the user's edit: refused, showing theirs
        nm.overwrite_cell_source(1, 'a = 2', expected_hash=before['hash'])
    time.sleep(0.3)
    assert page.cells()[1]['source'] == 'a = 1 + 41' and nm.read_cell(1)['source'] == 'a = 1 + 41'

def test_undo_reverts_headlesnbs_edit_in_the_page(nb):
    page, nm = nb.page, nb.nm
    page.wait(lambda cs: len(cs) == 2, 'the notebook')
    nm.overwrite_cell_source(1, 'a = "headlesnb"')
    nm.insert_cell(0, 'code', 'inserted')
    page.wait(lambda cs: sources(cs) == ['inserted', 't = 0', 'a = "headlesnb"'], 'the two edits')
    assert nm.undo(2)['undone'] == ['insert code cell', 'overwrite cell source']
    page.wait(lambda cs: sources(cs) == ['t = 0', 'a = 1'], 'both edits undone')
    nm.redo()
    page.wait(lambda cs: sources(cs) == ['t = 0', 'a = "headlesnb"'], 'the edit redone')

def test_edits_not_waited_for_reach_the_page_in_their_order(nb):
    """Not durable (the Python API's default): inserted cells go into the shared document a moment later, from the loop's thread;
    an edit of a cell just inserted, an insert before it, an undo and a move made meanwhile all land, in order"""
    page, nm = nb.page, nb.nm
    page.wait(lambda cs: sources(cs) == ['t = 0', 'a = 1'], 'the notebook')
    nm.durable = False
    for k in range(5):  # each edit right after the insert it depends on (well within the 2 ms before the loop's thread takes the cell)
        c = nm.insert_cell(-1 if k % 2 else 0, 'code', f'n{k}')
        nm.overwrite_cell_source(c['id'], f'n{k} edited')
        nm.insert_cell(c['id'], 'code', f'before n{k}')
        nm.insert_cell(1, 'code', 'undone'); nm.undo()
        m = nm.insert_cell(-1, 'code', f'moved {k}'); nm.move_cell(m['id'], 0)
    want = [c['source'] for c in nm.read_notebook(response_format='detailed', limit=0)['cells']]
    assert want[0] == 'moved 4' and 'undone' not in want and len(want) == 2 + 5 * 3, want
    assert all(want.index(f'before n{k}') == want.index(f'n{k} edited') - 1 for k in range(5)), want
    page.wait(lambda cs: sources(cs) == want, 'every edit, in the order made')
    nm.save()  # the server writes the file: every edit, in that order
    assert on_disk(nb.path) == want

def test_cells_the_shared_document_cannot_take_go_to_the_file(nb, monkeypatch):
    "A cell that cannot go into the shared document (inserted not durably: it goes in from the loop's thread): the file takes over, with it"
    import headlesnb.shared as shared
    ycell = shared.ycell
    def refuse(c):
        if c['source'] == 'refused': raise ValueError('a value it cannot hold')
        return ycell(c)
    monkeypatch.setattr(shared, 'ycell', refuse)
    nm = nb.nm
    nm.durable = False
    nm.insert_cell(-1, 'code', 'refused')
    end = time.monotonic() + LIVE
    while on_disk(nb.path)[-1:] != ['refused'] and time.monotonic() < end: time.sleep(0.02)
    assert on_disk(nb.path) == ['t = 0', 'a = 1', 'refused']
    r = nm.insert_cell(-1, 'code', 'next')
    assert "could not go into the Jupyter server's shared document (ValueError: a value it cannot hold" in r['notice'], r
    assert 'now edits the file' in r['notice'] and 'went away' not in r['notice'], r  # the server is still there: the notice does not say it went
    nm.save()
    assert on_disk(nb.path) == ['t = 0', 'a = 1', 'refused', 'next']

def test_what_the_shared_document_cannot_hold_never_puts_the_file_under_the_page(nb):
    """pycrdt cannot hold an int over 64 bits (it panics) nor a lone surrogate. Writing the file under the open page would be undone by
    its next save (and bring "File Changed"): a source holding such a character is refused, nothing changed; an output holding such an
    int goes in as text (its digits), the run ends ok with the output exact in its answer, and the answer says so. The document stays shared"""
    page, nm = nb.page, nb.nm
    page.wait(lambda cs: sources(cs) == ['t = 0', 'a = 1'], 'the notebook')
    with pytest.raises(BadArgumentError, match="a character UTF-8 cannot hold .*nothing changed"): nm.insert_cell(-1, 'code', 'bad \udc80 char')
    r = nm.execute_cell(nm.insert_cell(-1, 'code', "from IPython.display import JSON\nJSON({'id': 2**70})")['id'])
    assert r['status'] == 'ok' and r['outputs'][0]['data']['application/json'] == {'id': 2**70}, r
    assert 'an integer over 64 bits' in r['notice'] and 'as text' in r['notice'] and 'now edits the file' not in r['notice'], r
    after = nm.insert_cell(-1, 'code', 'after')
    assert 'notice' not in after and nm.list_notebooks()[0]['shared']  # said once; still live
    page.wait(lambda cs: sources(cs)[-1:] == ['after'] and len(cs) == 4, 'the cells after it')
    page.editor(0).click(); page.pg.keyboard.press('End'); page.pg.keyboard.type(' # typed'); page.pg.keyboard.press('Control+s')
    page.wait(lambda cs: cs[0]['source'] == 't = 0 # typed', "the user's typing")
    nm.save()
    cells = json.loads(nb.path.read_text())['cells']
    assert [''.join(c['source']) for c in cells] == ['t = 0 # typed', 'a = 1', "from IPython.display import JSON\nJSON({'id': 2**70})", 'after']
    assert cells[2]['outputs'][0]['data']['application/json'] == {'id': str(2**70)}

def test_two_headlesnb_clients_and_the_user_on_one_notebook(nb, lab):
    page, nm = nb.page, nb.nm
    other = NotebookManager(lab.root, jupyter_url=lab.url, jupyter_token=lab.token, kernel='inprocess', durable=True)
    try:
        other.use_notebook('n', nb.name)
        page.wait(lambda cs: len(cs) == 2, 'the notebook')
        def edits(m, tag):
            for k in range(15): m.insert_cell(-1, 'code', f'{tag}{k} = {k}')
        ths = [threading.Thread(target=edits, args=(m, t)) for m, t in ((nm, 'p'), (other, 'q'))]
        for t in ths: t.start()
        page.editor(0).click(); page.pg.keyboard.press('End'); page.pg.keyboard.type(' and more', delay=30)
        for t in ths: t.join(60)
        want = {f'{t}{k} = {k}' for t in 'pq' for k in range(15)} | {'t = 0 and more', 'a = 1'}
        page.wait(lambda cs: set(sources(cs)) == want and len(cs) == 32, 'all 30 inserts and the typing', timeout=5)
        for m in (nm, other):
            end = time.monotonic() + LIVE
            while {c['source'] for c in m.read_notebook(response_format='detailed', limit=0)['cells']} != want and time.monotonic() < end: time.sleep(0.05)
            assert {c['source'] for c in m.read_notebook(response_format='detailed', limit=0)['cells']} == want
        nm.save()
        assert set(on_disk(nb.path)) == want
    finally: other.close_all()

def test_the_mcp_server_edits_through_the_shared_document(nb, lab):
    "headlesnb mcp --jupyter-url: its edits show in the page, and the user's typing shows in its reads"
    from test_mcp import stdio_session, ok
    page, said, go = nb.page, queue.Queue(), threading.Event()
    page.wait(lambda cs: len(cs) == 2, 'the notebook')
    async def session():
        async with stdio_session(lab.root, '--jupyter-url', lab.url, '--jupyter-token', lab.token, '--kernel', 'inprocess') as s:
            await ok(s, 'use_notebook', notebook_name='m', notebook_path=nb.name)
            said.put(await ok(s, 'insert_cell', cell_index=0, cell_type='code', cell_source='m = "from the MCP server"'))
            await asyncio.to_thread(go.wait, 60)  # the user types meanwhile
            for _ in range(int(LIVE / 0.1)):
                if 'a = 1  # typed' in (out := await ok(s, 'read_cell', cell_index=2)): break
                await asyncio.sleep(0.1)
            said.put(out)
    th = threading.Thread(target=lambda: said.put(asyncio.run(session())))
    th.start()
    try:
        assert 'Cell inserted successfully' in said.get(timeout=90)
        page.wait(lambda cs: sources(cs) == ['m = "from the MCP server"', 't = 0', 'a = 1'], "the MCP server's insert")
        page.editor(2).click(); page.pg.keyboard.press('End'); page.pg.keyboard.type('  # typed')
        page.wait(lambda cs: cs[2]['source'] == 'a = 1  # typed', "the user's typing")
    finally: go.set()
    assert 'a = 1  # typed' in said.get(timeout=30)
    th.join(30)

def test_bad_input_is_refused_clearly(lab, tmp_path):
    write_nb(lab.root / 'bad.ipynb', [new_code_cell('1')])
    nm = NotebookManager(lab.root, jupyter_url=lab.url, jupyter_token='wrong', kernel='inprocess')
    with pytest.raises(BadArgumentError, match='refused the token'): nm.use_notebook('b', 'bad.ipynb')
    assert nm.list_notebooks() == []
    (lab.root / 'corrupt.ipynb').write_text('{not json')
    nm = NotebookManager(lab.root, jupyter_url=lab.url, jupyter_token=lab.token, kernel='inprocess')
    with pytest.raises(CorruptFileError, match='corrupt.ipynb: not valid JSON'): nm.use_notebook('c', 'corrupt.ipynb')  # as for a file
    assert nm.list_notebooks() == []
    outside = tmp_path / 'elsewhere'; outside.mkdir()  # a folder the server does not serve
    write_nb(outside / 'x.ipynb', [new_code_cell('1')])
    nm = NotebookManager(outside, jupyter_url=lab.url, jupyter_token=lab.token, kernel='inprocess')
    with pytest.raises(NotFoundError, match="does not serve the folder"): nm.use_notebook('x', 'x.ipynb')
    with pytest.raises(NotFoundError, match="does not serve the folder"): nm.use_notebook('y', 'new.ipynb', mode='create')
    assert nm.list_notebooks() == [] and not (outside / 'new.ipynb').exists()  # nothing made
    assert not list(outside.glob('headlesnb-probe-*'))  # the probe file is gone
    nm = NotebookManager(lab.root, jupyter_url=f'http://127.0.0.1:{free_port()}', jupyter_token='t', kernel='inprocess')
    with pytest.raises(BadArgumentError, match='cannot reach the Jupyter server'): nm.use_notebook('b', 'bad.ipynb')

def test_a_server_without_collaboration_says_what_to_install_and_works_on_the_file(tmp_path):
    root = tmp_path / 'root'; root.mkdir()
    write_nb(root / 'plain.ipynb', [new_code_cell('1')])
    s = serve(root, [sys.executable, '-m', 'jupyter_server'], tmp_path / 'server.log')  # this venv's server: no jupyter-collaboration
    try:
        nm = NotebookManager(root, jupyter_url=s.url, jupyter_token=s.token, kernel='inprocess', durable=True)
        info = nm.use_notebook('p', 'plain.ipynb')
        assert 'shared' not in info and 'pip install jupyter-collaboration' in info['note'], info
        nm.insert_cell(-1, 'code', 'on the file')
        assert on_disk(root / 'plain.ipynb')[1] == 'on the file'
        nm.close_all()
    finally: stop(s)

def test_a_server_that_goes_away_leaves_the_file_with_every_acknowledged_edit(tmp_path, chromium):
    root = tmp_path / 'root'; root.mkdir()
    write_nb(root / 'gone.ipynb', [new_code_cell('a = 1')])
    s = start_lab(root)
    try:
        page = Page(chromium, s, 'gone.ipynb')
        nm = NotebookManager(root, jupyter_url=s.url, jupyter_token=s.token, kernel='inprocess', durable=True)
        assert nm.use_notebook('g', 'gone.ipynb')['shared']
        nm.insert_cell(-1, 'code', 'b = 2')
        page.wait(lambda cs: sources(cs) == ['a = 1', 'b = 2'], 'the insert')
        page.close()  # the notebook closed in the page: headlesnb's edits still reach the file (the server saves them)
        nm.insert_cell(-1, 'code', 'c = 3')
        end = time.monotonic() + 10
        while len(on_disk(root / 'gone.ipynb')) != 3 and time.monotonic() < end: time.sleep(0.1)
        assert on_disk(root / 'gone.ipynb') == ['a = 1', 'b = 2', 'c = 3']
        nm.insert_cell(-1, 'code', 'd = 4')  # acknowledged by the server (durable), which is killed before it saves (1 s later)
        nm.durable = False
        nm.insert_cell(-1, 'code', 'd = 5')  # not waited for: in the shared document or not yet when the server dies
        nm.durable = True
        stop(s, signal.SIGKILL)
        end = time.monotonic() + 10
        while len(on_disk(root / 'gone.ipynb')) != 5 and time.monotonic() < end: time.sleep(0.05)
        assert on_disk(root / 'gone.ipynb') == ['a = 1', 'b = 2', 'c = 3', 'd = 4', 'd = 5']
        r = nm.insert_cell(-1, 'code', 'e = 5')  # now on the file, and the answer says so
        assert 'went away' in r['notice'] and 'now edits the file' in r['notice'], r
        assert 'notice' not in nm.read_cell(-1)  # said once
        assert on_disk(root / 'gone.ipynb')[-1] == 'e = 5'
        assert 'shared' not in nm.list_notebooks()[0] and 'went away' in nm.list_notebooks()[0]['note']
        nm.close_all()
    finally: stop(s)

# ---- the audit of #27: tests that need no page use a second client of the room, or the REST API, as "the user"

def manager(root, lab, **kw): return NotebookManager(root, jupyter_url=lab.url, jupyter_token=lab.token, kernel='inprocess', durable=True, **kw)

def test_a_copy_with_the_same_bytes_is_never_edited_for_the_notebook(lab, tmp_path):
    "The server's path of our folder is proven by a probe file, not guessed: a copy at the same relative path (in the server's root, or in another clone) is not taken"
    proj = lab.root / 'proj'; proj.mkdir()
    write_nb(proj / 'same.ipynb', [new_code_cell('a = 1')])
    shutil.copy(proj / 'same.ipynb', lab.root / 'same.ipynb')  # same bytes, same name
    nm = manager(proj, lab)
    try:
        assert nm.use_notebook('n', 'same.ipynb')['shared']
        nm.insert_cell(-1, 'code', 'b = 2  # edit'); nm.save()
        assert on_disk(proj / 'same.ipynb') == ['a = 1', 'b = 2  # edit'] and on_disk(lab.root / 'same.ipynb') == ['a = 1']
    finally: nm.close_all()
    clone = tmp_path / 'clone'; clone.mkdir()  # a second clone, not served: the server's same.ipynb has the same bytes
    shutil.copy(lab.root / 'same.ipynb', clone / 'same.ipynb')
    nm = manager(clone, lab)
    with pytest.raises(NotFoundError, match='does not serve the folder'): nm.use_notebook('n', 'same.ipynb')
    assert on_disk(lab.root / 'same.ipynb') == ['a = 1'] and not list(clone.glob('headlesnb-probe-*')) and not list(proj.glob('headlesnb-probe-*'))

def test_the_url_jupyterlab_prints_is_taken_and_its_token_never_shown(lab, caplog):
    write_nb(lab.root / 'url.ipynb', [new_code_cell('1')])
    caplog.set_level(logging.DEBUG)
    for url, token in [(f'{lab.url}/lab?token={lab.token}', None), (f'{lab.url}/?token={lab.token}', None), (f'{lab.url}/lab', lab.token),
                       (f'{lab.url}/lab/tree/url.ipynb', lab.token)]:
        nm = NotebookManager(lab.root, jupyter_url=url, jupyter_token=token, kernel='inprocess')
        try:
            info = nm.use_notebook('u', 'url.ipynb')
            assert info.get('shared') and 'note' not in info, (url, info)
        finally: nm.close_all()
    nm = NotebookManager(lab.root, jupyter_url=f'{lab.url}/lab?token=wrong', kernel='inprocess')
    with pytest.raises(BadArgumentError, match='refused the token') as e: nm.use_notebook('u', 'url.ipynb')
    assert 'wrong' not in str(e.value)
    nm = NotebookManager(lab.root, jupyter_url=f'{lab.url}/lab?token={lab.token}', jupyter_token='other', kernel='inprocess')
    with pytest.raises(BadArgumentError, match='two different tokens') as e: nm.use_notebook('u', 'url.ipynb')
    assert lab.token not in str(e.value) and 'other' not in str(e.value)
    assert lab.token not in caplog.text

def test_connect_to_jupyter_takes_the_url_jupyterlab_prints(lab):
    from test_mcp import stdio_session, ok
    write_nb(lab.root / 'mcpurl.ipynb', [new_code_cell('1')])
    async def session():
        async with stdio_session(lab.root, '--kernel', 'inprocess') as s:
            said = await ok(s, 'connect_to_jupyter', jupyter_url=f'{lab.url}/lab?token={lab.token}')
            said += await ok(s, 'use_notebook', notebook_name='m', notebook_path='mcpurl.ipynb')
            return said
    said = []
    th = threading.Thread(target=lambda: said.append(asyncio.run(session())))  # (playwright's loop may run in this thread)
    th.start(); th.join(90)
    said = said[0]
    assert f'Jupyter server: {lab.url}\n' in said and 'live in JupyterLab' in said and lab.token not in said, said

def test_a_wrong_token_or_no_jupyter_server_is_refused_up_front(tmp_path):
    "Checked on a route that needs the token, before asking for shared documents: a plain server (no jupyter-collaboration) too"
    root = tmp_path / 'root'; root.mkdir()
    write_nb(root / 'p.ipynb', [new_code_cell('1')])
    s = serve(root, [sys.executable, '-m', 'jupyter_server'], tmp_path / 'server.log')
    web = subprocess.Popen([sys.executable, '-m', 'http.server', '--bind', '127.0.0.1', str(port := free_port())], cwd=root,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        nm = NotebookManager(root, jupyter_url=s.url, jupyter_token='bad', kernel='inprocess')
        with pytest.raises(BadArgumentError, match='refused the token'): nm.use_notebook('p', 'p.ipynb')
        assert nm.list_notebooks() == []
        end = time.monotonic() + 20
        while time.monotonic() < end:
            with __import__('contextlib').suppress(httpx.HTTPError):
                if httpx.get(f'http://127.0.0.1:{port}/').status_code == 200: break
            time.sleep(0.1)
        nm = NotebookManager(root, jupyter_url=f'http://127.0.0.1:{port}', jupyter_token='t', kernel='inprocess')
        with pytest.raises(BadArgumentError, match='does not answer as a Jupyter server'): nm.use_notebook('p', 'p.ipynb')
    finally: stop(s); web.terminate(); web.wait(10)

def test_undo_does_not_wipe_what_someone_else_typed_since(lab):
    "As on a file (where the change clears the history), an undo of a step whose cell someone else changed since is refused, saying why"
    write_nb(lab.root / 'un.ipynb', [new_code_cell('x = 0'), new_code_cell('y = 0')])
    a, b = manager(lab.root, lab), manager(lab.root, lab)
    try:
        a.use_notebook('n', 'un.ipynb'); b.use_notebook('n', 'un.ipynb')
        a.overwrite_cell_source(0, 'x = 1  # by A')
        typed = 'x = 1  # by A, then the user typed this'
        end = time.monotonic() + LIVE
        while b.read_cell(0)['source'] != 'x = 1  # by A' and time.monotonic() < end: time.sleep(0.02)
        b.overwrite_cell_source(0, typed)
        end = time.monotonic() + LIVE
        while a.read_cell(0)['source'] != typed and time.monotonic() < end: time.sleep(0.02)
        with pytest.raises(ConflictError, match='was changed since, by someone else'): a.undo()
        assert a.read_cell(0)['source'] == typed and a.get_history()['undo']  # nothing undone; the step stays
        a.save()
        assert on_disk(lab.root / 'un.ipynb')[0] == typed
        c = a.insert_cell(-1, 'code', 'inserted by A')  # the user deletes it; undoing the insert says so
        end = time.monotonic() + LIVE
        while len(b.read_notebook(limit=0)['cells']) != 3 and time.monotonic() < end: time.sleep(0.02)
        b.delete_cell(c['id'])
        end = time.monotonic() + LIVE
        while len(a.read_notebook(limit=0)['cells']) != 2 and time.monotonic() < end: time.sleep(0.02)
        with pytest.raises(ConflictError, match="cannot undo 'insert code cell': its cell .* was deleted since"): a.undo()
    finally: a.close_all(); b.close_all()

def test_renaming_the_open_notebook_is_followed(lab):
    "Renamed in JupyterLab: the room follows it (it is named by the file id), and so does headlesnb: edits go on live into the renamed notebook"
    h = {'Authorization': f'token {lab.token}'}
    write_nb(lab.root / 'ren.ipynb', [new_code_cell('a = 1')])
    nm, user = manager(lab.root, lab), manager(lab.root, lab)
    try:
        nm.use_notebook('n', 'ren.ipynb')
        nm.insert_cell(-1, 'code', 'before'); nm.save()
        assert httpx.patch(f'{lab.url}/api/contents/ren.ipynb', headers=h, json={'path': 'ren2.ipynb'}).status_code == 200
        r = nm.insert_cell(-1, 'code', 'after')
        s = nm.save()
        said = ' '.join(x.get('notice', '') for x in (r, s))
        assert "ren.ipynb was renamed to 'ren2.ipynb'" in said and 'follows it' in said, (r, s)
        assert s['path'] == 'ren2.ipynb' and nm.list_notebooks()[0]['path'] == 'ren2.ipynb' and nm.list_notebooks()[0]['shared']
        assert on_disk(lab.root / 'ren2.ipynb') == ['a = 1', 'before', 'after']
        user.use_notebook('u', 'ren2.ipynb')  # the page, reopened on the new name: the same room
        nm.insert_cell(-1, 'code', 'later')
        end = time.monotonic() + LIVE
        while user.read_cell(-1)['source'] != 'later' and time.monotonic() < end: time.sleep(0.02)
        assert user.read_cell(-1)['source'] == 'later'
        assert nm.use_notebook('m', 'ren2.ipynb')['same_as'] == 'n'  # the new path is the open notebook's
        time.sleep(1.5)  # (the old name written again would be there by now)
        assert not (lab.root / 'ren.ipynb').exists()
    finally: nm.close_all(); user.close_all()

def test_a_rename_is_noticed_without_a_save(lab):
    "Between saves, the server's file is watched: the next answer names the new path, and the server saves our edits there"
    write_nb(lab.root / 'w.ipynb', [new_code_cell('a = 1')])
    nm = manager(lab.root, lab)
    try:
        nm.use_notebook('n', 'w.ipynb')
        httpx.patch(f'{lab.url}/api/contents/w.ipynb', headers={'Authorization': f'token {lab.token}'}, json={'path': 'w2.ipynb'})
        nm.insert_cell(-1, 'code', 'acked')
        end = time.monotonic() + 5
        while (not (lab.root / 'w2.ipynb').exists() or on_disk(lab.root / 'w2.ipynb') != ['a = 1', 'acked']) and time.monotonic() < end: time.sleep(0.05)
        assert on_disk(lab.root / 'w2.ipynb') == ['a = 1', 'acked'] and not (lab.root / 'w.ipynb').exists()
        assert "was renamed to 'w2.ipynb'" in nm.read_cell(0).get('notice', '')
    finally: nm.close_all()

def test_a_notebook_deleted_in_jupyterlab_is_not_written_again(lab):
    """Deleted in JupyterLab: headlesnb does not bring it back behind the user's back. What it holds stays readable, edits are refused
    saying what to do; save(force=True) writes it back (then the file takes over), unuse_notebook lets it go"""
    h = {'Authorization': f'token {lab.token}'}
    for name in ('del.ipynb', 'del2.ipynb'):
        write_nb(lab.root / name, [new_code_cell('a = 1')])
        nm = manager(lab.root, lab)
        try:
            nm.use_notebook('n', name)
            nm.insert_cell(-1, 'code', 'before')
            assert httpx.delete(f'{lab.url}/api/contents/{name}', headers=h).status_code == 204
            end, notice = time.monotonic() + 5, ''
            while not notice and time.monotonic() < end: notice = nm.read_notebook(limit=0).get('notice', ''); time.sleep(0.05)
            assert f'{name} was deleted' in notice and 'save(force=True)' in notice and 'unuse_notebook' in notice, notice
            with pytest.raises(ConflictError, match=f'{name} was deleted .*save\\(force=True\\) writes it back'): nm.insert_cell(-1, 'code', 'refused')
            with pytest.raises(ConflictError, match='was deleted'): nm.save()
            assert [c['source'] for c in nm.read_notebook(response_format='detailed', limit=0)['cells']] == ['a = 1', 'before']
            assert 'was deleted' in nm.list_notebooks()[0]['note'] and 'shared' not in nm.list_notebooks()[0]
            time.sleep(1.5)  # (written again, it would be there by now)
            assert not (lab.root / name).exists()
            if name == 'del.ipynb':  # the user wants it back after all
                assert nm.save(force=True)['saved'] and on_disk(lab.root / name) == ['a = 1', 'before']
                nm.insert_cell(-1, 'code', 'on the file')
                assert on_disk(lab.root / name) == ['a = 1', 'before', 'on the file'] and 'shared' not in nm.list_notebooks()[0]
            else:
                assert nm.unuse_notebook('n')['closed'] and nm.list_notebooks() == []
                assert not (lab.root / name).exists()
        finally: nm.close_all()

def drop_connection(nm, name='n'):
    "Cut headlesnb's websocket to the room from its side (the server and the room stay up): as a network drop or a NAT timeout would"
    fd = nm.item(name).doc._ws.transport.get_extra_info('socket').fileno()
    with socket.socket(fileno=os.dup(fd)) as s: s.shutdown(socket.SHUT_RDWR)

def test_a_dropped_connection_is_joined_again_while_the_server_answers(lab):
    """Only headlesnb's websocket drops: the server still answers, so it joins the room again and stays shared (the file under an open
    page would bring "File Changed" at the user's next save). Edits made meanwhile, acknowledged or not, reach the room and the file"""
    write_nb(lab.root / 'drop.ipynb', [new_code_cell('a = 1')])
    nm, user = manager(lab.root, lab), manager(lab.root, lab)
    try:
        nm.use_notebook('n', 'drop.ipynb'); user.use_notebook('u', 'drop.ipynb')
        nm.insert_cell(-1, 'code', 'before')
        drop_connection(nm)
        time.sleep(0.5)  # (the drop is seen)
        r = nm.insert_cell(-1, 'code', 'after the drop')  # durable: acknowledged by the server, on the new connection
        assert 'notice' not in r and nm.list_notebooks()[0].get('shared'), (r, nm.list_notebooks())
        drop_connection(nm)
        nm.durable = False
        for k in range(5): nm.insert_cell(-1, 'code', f'quick {k}')  # right after the drop, not waited for
        nm.durable = True
        r = nm.overwrite_cell_source(0, 'a = 2')
        want = ['a = 2', 'before', 'after the drop', *[f'quick {k}' for k in range(5)]]
        end = time.monotonic() + LIVE
        while [c['source'] for c in user.read_notebook(response_format='detailed', limit=0)['cells']] != want and time.monotonic() < end: time.sleep(0.05)
        assert [c['source'] for c in user.read_notebook(response_format='detailed', limit=0)['cells']] == want  # through the room
        assert 'notice' not in r and nm.list_notebooks()[0].get('shared'), (r, nm.list_notebooks())
        user.insert_cell(-1, 'code', 'from the user')  # and the other way
        end = time.monotonic() + LIVE
        while nm.read_cell(-1)['source'] != 'from the user' and time.monotonic() < end: time.sleep(0.05)
        assert nm.read_cell(-1)['source'] == 'from the user'
        assert nm.save()['saved'] and on_disk(lab.root / 'drop.ipynb') == [*want, 'from the user']
    finally: nm.close_all(); user.close_all()

def test_a_move_keeps_an_edit_the_server_acknowledged(lab):
    "A move copies the cell: everything the server holds comes in first, so another client's acknowledged edit of it is kept"
    lost = []
    for k in range(15):
        write_nb(lab.root / f'mv{k}.ipynb', [new_code_cell('c0'), new_code_cell('c1'), new_code_cell('c2')])
        p, q = manager(lab.root, lab), manager(lab.root, lab)
        try:
            p.use_notebook('n', f'mv{k}.ipynb'); q.use_notebook('n', f'mv{k}.ipynb')
            q.durable = k % 2 == 0  # not waited for (the Python API's default), or acknowledged
            q.overwrite_cell_source(2, 'c2 edited by q')
            p.move_cell(2, 0)
            want = ['c2 edited by q', 'c0', 'c1']
            end = time.monotonic() + LIVE
            while [c['source'] for c in q.read_notebook(response_format='detailed', limit=0)['cells']] != want and time.monotonic() < end: time.sleep(0.02)
            got = [[c['source'] for c in m.read_notebook(response_format='detailed', limit=0)['cells']] for m in (p, q)]
            if got != [want, want]: lost.append(got)
        finally: p.close_all(); q.close_all()
    assert not lost, lost

def test_a_guarded_overwrite_racing_another_clients_edit_is_never_a_silent_mix(lab):
    "Two clients overwrite one cell with the same (soon stale) hash: the second is refused, never answered ok with both texts merged"
    write_nb(lab.root / 'race.ipynb', [new_code_cell('start')])
    a, b = manager(lab.root, lab), manager(lab.root, lab)
    b.durable = False  # the Python API's default
    try:
        a.use_notebook('n', 'race.ipynb'); b.use_notebook('n', 'race.ipynb')
        mixed = []
        for k in range(20):
            end = time.monotonic() + LIVE
            while a.read_cell(0)['hash'] != b.read_cell(0)['hash'] and time.monotonic() < end: time.sleep(0.01)
            h = a.read_cell(0)['hash']
            b.overwrite_cell_source(0, f'B{k}', expected_hash=h)
            try: a.overwrite_cell_source(0, f'A{k}', expected_hash=h)
            except ConflictError: continue
            time.sleep(0.2)  # (B's edit, if it was still on its way, comes in meanwhile)
            mixed.append(a.read_cell(0)['source'])  # accepted: it must be A's text alone
        assert all(m.startswith('A') and 'B' not in m for m in mixed), mixed
    finally: a.close_all(); b.close_all()

def test_a_file_changed_under_an_open_room_does_not_wipe_the_next_edits(lab):
    "The room holds older content than the file (rewritten by another tool): opening settles that first, so the edits made next stay"
    path = lab.root / 'ob.ipynb'
    write_nb(path, [new_code_cell('a = 1')])
    page = manager(lab.root, lab)
    try:
        page.use_notebook('n', 'ob.ipynb'); page.insert_cell(-1, 'code', 'from the page'); page.save()
        time.sleep(1.1)  # (the file's time must differ from the server's last save)
        write_nb(path, [new_code_cell('a = 1')])  # another tool (git checkout) writes the file
        a = manager(lab.root, lab)
        try:
            a.use_notebook('n', 'ob.ipynb')
            a.insert_cell(-1, 'code', 'ACKED EDIT'); a.save()
            time.sleep(2.5)  # (the server's watcher would have reloaded the room by now)
            assert [c['source'] for c in a.read_notebook(response_format='detailed', limit=0)['cells']] == ['a = 1', 'ACKED EDIT']
            assert on_disk(path) == ['a = 1', 'ACKED EDIT']
        finally: a.close_all()
    finally: page.close_all()

def test_notebooks_the_shared_document_cannot_hold_or_the_server_cannot_show_are_said_clearly(lab):
    big = lab.root / 'big.ipynb'
    nb = new_notebook(cells=[new_code_cell('1', metadata={'n': 2**70})]); nbformat.write(nb, big)
    nm = manager(lab.root, lab)
    try:
        t0 = time.monotonic()
        info = nm.use_notebook('b', 'big.ipynb')
        assert time.monotonic() - t0 < 5 and 'shared' not in info and 'integer over 64 bits' in info['note'], info  # opened as the file
        (lab.root / '.hid').mkdir(); write_nb(lab.root / '.hid' / 'h.ipynb', [new_code_cell('1')])
        with pytest.raises(NotFoundError, match='allow_hidden'): nm.use_notebook('h', '.hid/h.ipynb')
        raw = os.fsencode(str(lab.root)) + b'/caf\xe9.ipynb'
        write_nb(Path(os.fsdecode(raw)), [new_code_cell('1')])
        with pytest.raises(BadArgumentError, match='not UTF-8'): nm.use_notebook('c', os.fsdecode(b'caf\xe9.ipynb'))
    finally: nm.close_all()

def test_a_server_started_again_in_another_folder_has_the_folder_proven_again(tmp_path):
    "The same URL and token after a restart (a fixed token, a long-running MCP server): the folder proven before is not trusted"
    top = tmp_path / 'top'; proj = top / 'proj'; proj.mkdir(parents=True)
    write_nb(proj / 'x.ipynb', [new_code_cell('proj version')]); write_nb(top / 'x.ipynb', [new_code_cell('OTHER file in the parent')])
    s = start_lab(proj, token='my-token')
    nm = manager(proj, s)
    try:
        assert nm.use_notebook('n', 'x.ipynb')['shared']; nm.unuse_notebook('n')
        stop(s)
        s = start_lab(top, token='my-token', port=int(s.url.rsplit(':', 1)[1]))  # the same URL and token, a folder above
        assert nm.use_notebook('n', 'x.ipynb')['shared'] and nm.read_cell(0)['source'] == 'proj version'
        nm.insert_cell(-1, 'code', 'edit'); nm.save()
        assert on_disk(proj / 'x.ipynb') == ['proj version', 'edit'] and on_disk(top / 'x.ipynb') == ['OTHER file in the parent']
    finally: nm.close_all(); stop(s)

def test_a_notebook_the_server_is_saving_is_not_called_corrupt(lab):
    "The server writes a notebook in place when it saves: opening it meanwhile reads it again rather than calling it corrupt"
    write_nb(lab.root / 'saving.ipynb', [new_code_cell('x = 0'), *[new_code_cell('#' * 200_000) for _ in range(15)]])  # 3 MB: a save takes a while
    writer, stop_at, errors = manager(lab.root, lab), time.monotonic() + 12, []
    writer.use_notebook('w', 'saving.ipynb')
    def saves():
        k = 0
        while time.monotonic() < stop_at:
            writer.overwrite_cell_source(0, f'x = {k}'); writer.save(); k += 1
    th = threading.Thread(target=saves); th.start()
    try:
        opened = 0
        while time.monotonic() < stop_at:
            nm = manager(lab.root, lab)
            try: nm.use_notebook('r', 'saving.ipynb'); opened += 1
            except CorruptFileError as e: errors.append(e)
            finally: nm.close_all()
    finally: th.join(30); writer.close_all()
    assert opened and not errors, (opened, errors[:1])

def run_state(nm, i:int, name='n'):
    "Cell `i`'s run state in the shared document as a client holds it (the page's `[*]`: 'running')"
    doc = nm.item(name).doc
    with doc.lock: return doc.ycells[i].get('execution_state')

def test_a_cell_left_running_by_a_killed_client_is_shown_idle_again(lab, tmp_path):
    "A headlesnb killed while its cell runs leaves it marked running (`[*]`) for good; the next one to open the notebook shows it idle again"
    write_nb(lab.root / 'busy.ipynb', [new_code_cell('import time; time.sleep(60)'), new_code_cell('1')])
    script = tmp_path / 'run_and_die.py'
    script.write_text(f"""import os, signal, time
from headlesnb.notebook import NotebookManager
nm = NotebookManager({str(lab.root)!r}, jupyter_url={lab.url!r}, jupyter_token={lab.token!r}, kernel='inprocess', durable=True)
nm.use_notebook('n', 'busy.ipynb')
nm.execute_cell(0, wait=0)
doc, end = nm.item('n').doc, time.monotonic() + 60
while time.monotonic() < end:
    with doc.lock:
        if doc.ycells[0].get('execution_state') == 'running': break
    time.sleep(0.05)
doc.commit()  # (the server holds it)
os.kill(os.getpid(), signal.SIGKILL)
""")
    assert subprocess.run([sys.executable, str(script)], timeout=120).returncode == -signal.SIGKILL
    nm, later = manager(lab.root, lab), manager(lab.root, lab)
    try:
        nm.use_notebook('n', 'busy.ipynb')
        assert run_state(nm, 0) == 'running'  # left by the killed process
        end = time.monotonic() + STALE_AFTER + 10
        while run_state(nm, 0) != 'idle' and time.monotonic() < end: time.sleep(0.2)
        assert run_state(nm, 0) == 'idle'
        later.use_notebook('n', 'busy.ipynb')  # in the room: the page shows it too
        assert run_state(later, 0) == 'idle'
    finally: nm.close_all(); later.close_all()

def test_a_cell_another_headlesnb_runs_is_left_running(lab):
    "A live headlesnb's run is never taken for one left by a dead client: it says which cells it runs, and the newcomer hears it"
    write_nb(lab.root / 'live.ipynb', [new_code_cell(f'import time; time.sleep({STALE_AFTER + 10})')])
    a, b = manager(lab.root, lab), manager(lab.root, lab)
    try:
        a.use_notebook('n', 'live.ipynb')
        r = a.execute_cell(0, wait=0)
        time.sleep(1)
        b.use_notebook('n', 'live.ipynb')
        assert run_state(b, 0) == 'running'
        time.sleep(STALE_AFTER + 3)
        assert run_state(b, 0) == 'running' and a.get_run(r['run_id'])['status'] == 'running'
        assert a.get_run(r['run_id'], wait=30)['status'] == 'ok'
        end = time.monotonic() + LIVE
        while run_state(b, 0) != 'idle' and time.monotonic() < end: time.sleep(0.05)
        assert run_state(b, 0) == 'idle'
    finally: a.close_all(); b.close_all()

def test_a_cell_the_pages_kernel_runs_is_left_running(nb, lab):
    "The page's own run (its kernel, a session of the notebook on the server) is never taken for one left by a dead client"
    page, nm = nb.page, nb.nm
    nm.overwrite_cell_source(1, f'import time; time.sleep({STALE_AFTER + 15})')
    page.wait(lambda cs: cs[1]['source'].startswith('import time'), 'the cell')
    page.editor(1).click(); page.pg.keyboard.press('Shift+Enter')
    page.wait(lambda cs: cs[1]['prompt'] == '[*]:', 'the cell running in the page', timeout=60)
    newcomer = manager(lab.root, lab)
    try:
        newcomer.use_notebook('n', nb.name)
        assert run_state(newcomer, 1) == 'running'
        time.sleep(STALE_AFTER + 3)
        assert run_state(newcomer, 1) == 'running' and page.cells()[1]['prompt'] == '[*]:'
    finally: newcomer.close_all()
    page.wait(lambda cs: cs[1]['prompt'] not in ('[*]:', '[ ]:', ''), 'the run ended', timeout=30)
