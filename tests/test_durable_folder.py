"""What MCP acknowledges is on disk when several notebooks of one folder are edited at once: their writes share the
folder's fsync (nbs/03_document.ipynb, `_FolderSync`). Four HTTP clients, each inserting cells into its own notebook
in the server's root; SIGKILL of the server right after one client's last answer, while the others are mid-stream:
every insert answered to any client is in its file. (A SIGKILL keeps the kernel's page cache, so this checks that no
answer comes before its rename; that the folder fsync covering the rename started after it is checked in the
notebook, by logging the calls.) The server is stopped by PID.
"""
import json, os, signal, subprocess, sys

import anyio
import pytest
from test_mcp import http_session, ok, run, server_args, until_answering

pytestmark = pytest.mark.timeout(240)

CLIENTS, CALLS = 4, 15


def test_acknowledged_edits_of_one_folder_survive_sigkill(tmp_path):
    from conftest import free_port
    port = free_port()
    p = subprocess.Popen([sys.executable, *server_args(tmp_path, '--transport', 'http', '--port', str(port))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    acked, killed = {c: 0 for c in range(CLIENTS)}, []  # inserts answered, per client
    try:
        url = f'http://127.0.0.1:{port}/mcp'
        async def client(c, ready, go):
            try:
                async with http_session(url) as s:
                    await ok(s, 'use_notebook', notebook_name=f'nb{c}', mode='create')
                    ready.set()
                    await go.wait()
                    for i in range(CALLS if c == 0 else 10 * CALLS):  # client 0 ends first; the others are still inserting
                        await ok(s, 'insert_cell', notebook_name=f'nb{c}', cell_index=-1, cell_type='code', cell_source=f'x = {i}')
                        acked[c] = i + 1
                        if c == 0 and i + 1 == CALLS: killed.append(1); os.kill(p.pid, signal.SIGKILL)  # right after its last answer
            except Exception:
                if not killed: raise  # (the killed server ends the other clients' calls)
        async def edits():
            await until_answering(url)
            go, readies = anyio.Event(), [anyio.Event() for _ in range(CLIENTS)]
            with anyio.fail_after(120):
                async with anyio.create_task_group() as tg:
                    for c in range(CLIENTS): tg.start_soon(client, c, readies[c], go)
                    for r in readies: await r.wait()
                    go.set()
        run(edits)
        assert p.wait(10) == -signal.SIGKILL
        assert acked[0] == CALLS and sum(acked.values()) > CALLS, acked  # the others had answers too when it died
        for c in range(CLIENTS):
            cells = json.loads((tmp_path / f'nb{c}.ipynb').read_text())['cells']
            srcs = [''.join(x['source']) for x in cells]
            assert srcs == [f'x = {i}' for i in range(len(srcs))] and len(srcs) >= acked[c], (c, acked[c], srcs)
    finally:
        if p.poll() is None: p.kill(); p.wait()
