"""The MCP server gives back what closed notebooks held: notebooks whose cell printed 50 MB (each keeps 10 MB, its output
cap), run and closed one after another, leave the server's resident memory where the first left it. Each ended run's
answer kept its outputs alive (about 10 MB per closed notebook, growing without bound), through the official client over
stdio; the server's memory is read with psutil by its PID, which `stdio_session` stops.

glibc's malloc raises its mmap threshold when a large block is freed, so a later 50 MB print may come from the heap, which
it keeps: the resident memory then stays at a plateau that says nothing of what is still referenced (a CI run saw 106 MB
after the first notebook, then 151-155). The server runs with that threshold fixed, so a freed output goes back to the
system at once and resident memory follows what is still alive.
"""
import psutil
import pytest
from test_mcp import stdio_session, ok, run

pytestmark = pytest.mark.timeout(300)


def server_of(root) -> psutil.Process:
    "The MCP server this test started over `root` (a child of this process)"
    for p in psutil.Process().children(recursive=True):
        try:
            if 'headlesnb.fronts.mcp' in ' '.join(p.cmdline()) and str(root) in p.cmdline(): return p
        except psutil.NoSuchProcess: pass
    raise AssertionError(f'no MCP server over {root} among this process\'s children')


def test_closed_notebooks_give_their_memory_back(tmp_path, monkeypatch):
    monkeypatch.setenv('MALLOC_MMAP_THRESHOLD_', str(1 << 20))  # (the server's env is this process's)
    async def go():
        async with stdio_session(tmp_path) as s:
            srv, rss = server_of(tmp_path), []
            for i in range(8):
                await ok(s, 'use_notebook', notebook_name=f'n{i}', mode='create')
                await ok(s, 'insert_execute_code_cell', cell_index=-1, cell_source="print(('x' * 99 + '\\n') * 500_000)")
                await ok(s, 'unuse_notebook', notebook_name=f'n{i}')
                rss.append(srv.memory_info().rss / 2**20)
            assert all(len((tmp_path / f'n{i}.ipynb').read_text()) > 10_000_000 for i in range(8))  # each file keeps its 10 MB
            grew = rss[-1] - rss[0]
            assert grew < 35, f'the server kept {grew:.0f} MB more after 7 more closed notebooks (MB after each: {[round(m) for m in rss]})'
    run(go)
