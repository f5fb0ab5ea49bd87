"""A workspace's guards across processes: one process at a time writes a workspace (two real `headlesnb mcp` servers on
one root, a holder killed with SIGKILL), and files swapped under a running server (a folder or file for a symlink out,
a file that stops being UTF-8 text) are never read or written through, while the workspace still renders, over MCP
and in what `headlesnb proxy` sends upstream. Real processes, the official MCP client, real files; stopped by PID."""
import os, signal, subprocess, sys, textwrap
from pathlib import Path

import anyio
import pytest
from headlesnb.errors import ConflictError
from headlesnb.workspace import WorkspaceManager
from test_mcp import stdio_session, ok, err, run
from test_proxy import fake, start_proxy, sdk, workspace_block  # noqa: F401  (fake is a fixture)

pytestmark = pytest.mark.timeout(300)


def cmdline(pid:int) -> str: return Path(f'/proc/{pid}/cmdline').read_bytes().replace(b'\0', b' ').decode()


def test_two_mcp_servers_one_workspace(tmp_path):
    "The second server's workspace tools are refused, naming the first server's pid; nothing the first acknowledged is lost"
    (tmp_path / 'a.py').write_text('x = 1\n')
    async def main():
        async with stdio_session(tmp_path) as one:
            await ok(one, 'todos', operation='add', text='from one')
            assert (await ok(one, 'editor', operation='open', file_path='a.py')).startswith('e1: a.py open')
            async with stdio_session(tmp_path) as two:
                msg = await err(two, 'todos', operation='add', text='from two')
                pid = (tmp_path / '.default.workspace.json.lock').read_text().strip()
                assert f"workspace 'default' (default.workspace.json) is open in another process (pid {pid})" in msg, msg
                assert 'headlesnb.fronts.mcp' in cmdline(int(pid)) and '--workspace NAME' in msg
                assert (await err(two, 'workspace_view')).split(': ', 1)[1] == msg.split(': ', 1)[1]  # (after 'Error executing tool NAME')
                await ok(two, 'todos', operation='add', text='elsewhere', workspace='other')  # another name: its own workspace
                view = await ok(one, 'workspace_view')
                assert '1. [ ] from one' in view and 'from two' not in view
            async with stdio_session(tmp_path) as three:
                await err(three, 'todos', operation='add', text='from three')
        async with stdio_session(tmp_path) as four:  # the first server is gone, and its lock with it: its state is read back
            await ok(four, 'todos', operation='add', text='from four')
            view = await ok(four, 'workspace_view')
            assert '1. [ ] from one' in view and '2. [ ] from four' in view and '---EDITOR_WINDOW_e1' in view
    run(main)


def test_lock_goes_with_a_killed_process(tmp_path):
    "A process killed with SIGKILL while holding a workspace leaves nothing behind that keeps it locked"
    code = textwrap.dedent(f"""
        from headlesnb.workspace import WorkspaceManager
        ws = WorkspaceManager({str(tmp_path)!r}, code_map=False).open_workspace('w')
        ws.add_todo('held'); print('ready', flush=True)
        import time; time.sleep(120)""")
    p = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == 'ready\n'
        with pytest.raises(ConflictError, match=rf'is open in another process \(pid {p.pid}\)'):
            WorkspaceManager(tmp_path, code_map=False).open_workspace('w')
        os.kill(p.pid, signal.SIGKILL); p.wait(timeout=20)
        ws = WorkspaceManager(tmp_path, code_map=False).open_workspace('w')
        assert ws.todos == [dict(text='held', done=False)]
    finally:
        if p.poll() is None: p.kill(); p.wait()


@pytest.fixture
def swapped(tmp_path):
    "A root with files for three editors and an outside folder: `swap()` then swaps them under whoever has them open"
    root, out = tmp_path / 'root', tmp_path / 'out'
    (root / 'sub').mkdir(parents=True); out.mkdir()
    (root / 'sub' / 'a.py').write_text('y = 1\n'); (root / 'c.py').write_text('c = 1\n'); (root / 'n.txt').write_text('hi\n')
    (out / 'a.py').write_text('OUTSIDE-A\n'); (out / 'out.txt').write_text('OUTSIDE-C\n')
    def swap():
        (root / 'sub').rename(root / 's0'); (root / 'sub').symlink_to('../out')           # a folder for a link out
        (root / 'c.py').unlink(); (root / 'c.py').symlink_to('../out/out.txt')            # a file for a link out
        (root / 'n.txt').write_bytes(b'caf\xe9\n')                                         # no longer UTF-8
    return root, out, swap


async def _open_three(s):
    for f in ('sub/a.py', 'c.py', 'n.txt'): await ok(s, 'editor', operation='open', file_path=f)


def _check_view(view:str):
    assert 'OUTSIDE' not in view, view
    for f in ('sub/a.py', 'c.py', 'n.txt'): assert f'conflict: {f} cannot be edited as it is on disk now' in view, view
    assert "'n.txt' is not UTF-8 text" in view and 'a symlink was put on its way' in view


def test_files_swapped_under_a_running_server(swapped):
    "Editors of a running MCP server whose files are swapped: shown in conflict, never read or written through"
    root, out, swap = swapped
    async def main():
        async with stdio_session(root) as s:
            await _open_three(s)
            swap()
            _check_view(await ok(s, 'workspace_view'))
            for e in ('e1', 'e2'):
                assert 'cannot be edited as it is on disk now' in await err(s, 'editor', operation='replace', editor_id=e, old='OUTSIDE', new='WRITTEN')
                assert 'a symlink was put on its way' in await err(s, 'editor', operation='overwrite', editor_id=e)
            assert 'is not UTF-8 text' in await err(s, 'editor', operation='insert', editor_id='e3', before_line=1, text='x')
    run(main)
    assert [(out / f).read_text() for f in ('a.py', 'out.txt')] == ['OUTSIDE-A\n', 'OUTSIDE-C\n']


def test_proxy_renders_swapped_editors(swapped, fake):
    "What `headlesnb proxy` sends upstream after the swap: the editors in conflict, no outside text, and no 500"
    root, out, swap = swapped
    p, url = start_proxy(root, fake.url)
    try:
        async def main():
            async with stdio_session(root) as s: await _open_three(s)
        run(main)
        fake.add('ok', 'ok')
        sdk(url).messages.create(model='m', max_tokens=5, messages=[dict(role='user', content='x')])
        assert '1: c = 1' in workspace_block(fake.requests[-1])
        swap()
        sdk(url).messages.create(model='m', max_tokens=5, messages=[dict(role='user', content='x')])
        _check_view(workspace_block(fake.requests[-1]))
    finally: p.kill(); p.wait()
