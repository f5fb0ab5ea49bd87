"""Saves of one notebook by two processes, or by headlesnb and another program: an acknowledged save is never overwritten silently.

A headlesnb worker process inserts cells and saves each; a save that returned counts as acknowledged, and after a
ConflictError the worker reloads (takes the other's file, its own unsaved cell dropped) and makes its edit again. The race
that lost acknowledged saves needs a rename to land at one moment, which happens under load at random (the auditor's two
processes of 60 saves lost some in 3 runs of 4): here the worker pauses at that moment, its first rename of the notebook
held `before` it happens (a rename slowed by the filesystem's journal) or right `after` (its process not scheduled), until
the test has let the other writer save. Before the fix both lost an acknowledged save every time."""
import json, os, subprocess, sys, time
from pathlib import Path
import nbformat

WORKER = r'''
import json, os, sys, time
from pathlib import Path
from headlesnb.errors import HeadlesnbError
from headlesnb.notebook import NotebookManager
root, tag, n, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
flags = Path(root).parent
real_replace = os.replace
def wait_for_go():
    (flags / f'{tag}.held').touch()
    end = time.monotonic() + 30
    while not (flags / f'{tag}.go').exists() and time.monotonic() < end: time.sleep(0.01)
def replace(src, dst, **kw):  # the notebook's first rename is held `before` or `after` it happens, until the test says go
    first = dst == 's.ipynb' and not (flags / f'{tag}.held').exists()
    if first and hold == 'before': wait_for_go()
    real_replace(src, dst, **kw)
    if first and hold == 'after': wait_for_go()
os.replace = replace
nm = NotebookManager(root)
nm.use_notebook('s', 's.ipynb')
acked, conflicts = [], 0
for i in range(n):
    for _ in range(5):
        try:
            nm.insert_cell(-1, 'code', f'{tag}{i}', notebook_name='s')
            nm.save('s')
            acked.append(f'{tag}{i}'); break
        except HeadlesnbError as e:
            if 'changed on disk' not in str(e): raise
            conflicts += 1
            nm.reload('s')  # take theirs: our cell, not acknowledged, goes; made again on the next try
print(json.dumps({'acked': acked, 'conflicts': conflicts}))
nm.close_all()
'''

def _worker(root:Path, tag:str, n:int, hold:str='no'):
    script = root.parent / 'worker.py'
    script.write_text(WORKER)
    return subprocess.Popen([sys.executable, str(script), str(root), tag, str(n), hold], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

def _result(p) -> dict:
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])

def _wait_for(flag:Path, p):
    end = time.monotonic() + 30
    while not flag.exists():
        assert p.poll() is None and time.monotonic() < end, p.communicate()[1][-2000:]
        time.sleep(0.01)

def _cells(path:Path) -> list: return [c.source for c in nbformat.read(str(path), as_version=4).cells]

def _notebook(tmp_path) -> Path:
    root = tmp_path / 'nbs'; root.mkdir()
    nbformat.write(nbformat.v4.new_notebook(), str(root / 's.ipynb'))
    return root

def test_two_processes_never_overwrite_an_acknowledged_save(tmp_path):
    """A's rename is held before it happens, B saves meanwhile, then A's rename lands. Before the fix B's save was acknowledged
    and then lost under A's rename (the check and the rename held only a thread lock). Now A holds the folder's OS lock from
    its check to its rename: B waits for it, then sees A's file, reloads and saves its cell again. Both cells are kept"""
    root = _notebook(tmp_path)
    a = _worker(root, 'A', 1, 'before')
    _wait_for(tmp_path / 'A.held', a)
    b = _worker(root, 'B', 1)
    try: b.wait(timeout=3)  # (before the fix B is done at once; now it waits for A's lock)
    except subprocess.TimeoutExpired: pass
    (tmp_path / 'A.go').touch()
    res = [_result(p) for p in (a, b)]
    disk = _cells(root / 's.ipynb')
    assert [r['acked'] for r in res] == [['A0'], ['B0']]
    lost = [c for r in res for c in r['acked'] if c not in disk]
    assert not lost, f"acknowledged saves overwritten without a ConflictError: {lost}; the file holds {disk}"

def test_a_plain_atomic_save_landing_just_after_ours_is_seen(tmp_path):
    """Another program (no lock) saves by writing a temp file and renaming it over the notebook, as editors do, right after
    our rename. Before the fix the signature of our write was read from the path after the rename, so their file was taken
    for ours and our next save overwrote it silently. Now it is the temp file's own: their file is seen as a change, read
    again, and kept"""
    root = _notebook(tmp_path)
    path, tmp = root / 's.ipynb', root / '.other-editor.tmp'
    a = _worker(root, 'A', 2, 'after')
    _wait_for(tmp_path / 'A.held', a)
    nb = nbformat.read(str(path), as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell('EXT0'))
    nbformat.write(nb, str(tmp)); os.replace(tmp, path)  # their save is done: it must stay
    (tmp_path / 'A.go').touch()
    res = _result(a)
    disk = _cells(path)
    assert res['acked'] == ['A0', 'A1']
    lost = [c for c in ['EXT0', *res['acked']] if c not in disk]
    assert not lost, f"saves overwritten without a ConflictError: {lost}; the file holds {disk}"
