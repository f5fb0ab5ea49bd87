"""Crash safety: SIGKILL mid-save leaves a valid notebook; corrupt files are refused untouched; exit flushes edits.

Every writer here is a real `python` subprocess using the real NotebookManager on real files.
"""
import json, os, random, signal, subprocess, sys, textwrap, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat, pytest

from headlesnb.errors import ConflictError, CorruptFileError
from headlesnb.notebook import NotebookManager

# A writer that edits `nb.ipynb` forever. Cell 0 is a counter: iteration i sets it to str(i).
# mode 'save': explicit save() after every iteration, then prints i (an acknowledged save);
#              the autosaver is kept out of the way (save_delay=3600).
# mode 'auto': no explicit save, the background autosaver writes at a tiny save_delay.
WRITER = textwrap.dedent(r'''
    import random, sys
    from headlesnb.notebook import NotebookManager
    from headlesnb.errors import ConflictError
    root, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rnd = random.Random(seed)
    m = NotebookManager(root, save_delay=3600 if mode == 'save' else 0.0005)
    n = m.use_notebook('nb', mode='connect')['cells']
    print('started', flush=True)
    i = 0
    def src(): return ''.join(f'line {k} ' + 'x' * rnd.randrange(80) + '\n' for k in range(rnd.randrange(1, 12)))
    while True:
        i += 1
        try:
            m.overwrite_cell_source(0, str(i))
            r = rnd.random()
            if r < 0.35 or n < 5: m.insert_cell(rnd.randint(1, n), rnd.choice(['code', 'markdown', 'raw']), src()); n += 1
            elif r < 0.55: m.delete_cell(rnd.randrange(1, n)); n -= 1
            elif r < 0.70: m.move_cell(rnd.randrange(1, n), rnd.randrange(1, n))
            elif r < 0.80: m.swap_cells(rnd.randrange(1, n), rnd.randrange(1, n))
            elif r < 0.90: m.overwrite_cell_source(rnd.randrange(1, n), src())
            else: m.edit_cell_source(rnd.randrange(1, n), 'line 0', 'LINE 0', replace_all=True)
        except ConflictError: pass  # (autosave mode) see test_threads.py::test_own_autosave_is_not_an_external_change
        except Exception as e:
            if 'old_string not found' not in str(e): raise
        if mode == 'save':
            m.save()
            print(i, flush=True)  # acknowledged: this state is on disk
''')

N_TRIES = 20


def _seed_nb(path: Path, n=250, seed=0):
    "A notebook big enough that each save takes a while (a counter cell first)"
    rnd = random.Random(seed)
    cells = [nbformat.v4.new_raw_cell('0')]
    for k in range(n):
        s = '\n'.join(f'print({k}, {j}) # ' + 'y' * rnd.randrange(100) for j in range(rnd.randrange(1, 10)))
        cells.append(nbformat.v4.new_code_cell(s) if k % 2 else nbformat.v4.new_markdown_cell(s))
    nb = nbformat.v4.new_notebook(cells=cells)
    nbformat.write(nb, path)


def _one_try(tmp: Path, mode: str, seed: int) -> str | None:
    "Run a writer, SIGKILL it at a random moment, check the file. Returns an error description or None"
    rnd = random.Random(seed)
    tmp.mkdir(parents=True)
    path = tmp / 'nb.ipynb'
    _seed_nb(path, seed=seed)
    p = subprocess.Popen([sys.executable, '-c', WRITER, str(tmp), mode, str(seed)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()
        if first.strip() != 'started':
            p.kill(); p.wait()
            return f'writer did not start: {first!r} {p.stderr.read()[-2000:]}'
        first_ack = p.stdout.readline() if mode == 'save' else ''  # a loaded machine may take longer than the delay to save once
        delay = rnd.uniform(0.05, 0.4)
        time.sleep(delay)
        if p.poll() is not None: return f'writer died by itself (rc {p.returncode}): {p.stderr.read()[-2000:]}'
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        out, err = p.communicate()
    finally:
        if p.poll() is None: p.kill(); p.wait()
    ctx = f'[mode={mode} seed={seed} kill after {delay*1000:.0f} ms]'
    if p.returncode != -signal.SIGKILL: return f'{ctx} writer was not killed by SIGKILL (rc {p.returncode}): {err[-2000:]}'
    acked = [int(x) for x in (first_ack + out).split()] if mode == 'save' else []
    data = path.read_bytes()
    try: raw = json.loads(data)
    except ValueError as e: return f'{ctx} not valid JSON after SIGKILL: {e}; {len(data)} bytes'
    try: nbformat.validate(nbformat.reads(data.decode(), as_version=nbformat.NO_CONVERT))
    except Exception as e: return f'{ctx} nbformat.validate failed: {e}'
    ids = [c['id'] for c in raw['cells']]
    if len(set(ids)) != len(ids): return f'{ctx} duplicate cell ids on disk'
    counter = int(''.join(raw['cells'][0]['source']))
    if mode == 'save':
        if not acked: return f'{ctx} no save was acknowledged in {delay*1000:.0f} ms (writer too slow?)'
        # nothing acknowledged is lost, and the file is never ahead of the in-flight save
        if not acked[-1] <= counter <= acked[-1] + 1:
            return f'{ctx} counter on disk {counter} but last acknowledged save was {acked[-1]}'
    # the library itself can open what is left
    m = NotebookManager(tmp, save_delay=3600)
    if m.use_notebook('check', notebook_path='nb.ipynb')['cells'] != len(raw['cells']): return f'{ctx} reopen disagrees'
    m.close_all()
    return None


@pytest.mark.parametrize('mode', ['save', 'auto'])
def test_sigkill_during_saves_leaves_valid_file(tmp_path, mode):
    seeds = random.Random().sample(range(10**6), N_TRIES)
    with ThreadPoolExecutor(4) as ex:
        errors = list(ex.map(lambda s: _one_try(tmp_path / f'try{s}', mode, s), seeds))
    errors = [e for e in errors if e]
    assert not errors, '\n'.join(errors)


# ---------------------------------------------------------------- corrupt files

NB_OK = nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1\nprint(x)')]))
CORRUPT = {
    'empty': b'',
    'bad_json': b'{"cells": [,]}',
    'not_utf8': b'\xff\xfe\x00garbage',
    'truncated': NB_OK[:len(NB_OK) // 2].encode(),
    'list': b'[1, 2, 3]',
    'string': b'"a notebook"',
    'no_cells': b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}}',
    'cells_not_list': b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": "abc"}',
    'nbformat3': b'{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [], "cells": []}',
    'no_nbformat': b'{"metadata": {}, "cells": []}',
    'cell_not_dict': b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [42]}',
    'bad_cell_type': b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "python", "source": "", "metadata": {}}]}',
    'bad_source': b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "source": 3, "metadata": {}}]}',
}


@pytest.mark.parametrize('kind', list(CORRUPT))
def test_corrupt_file_refused_untouched(tmp_path, kind):
    path = tmp_path / f'broken_{kind}.ipynb'
    path.write_bytes(CORRUPT[kind])
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    st = path.stat()
    m = NotebookManager(tmp_path, save_delay=0.01)
    with pytest.raises(CorruptFileError) as ei:
        m.use_notebook('nb', notebook_path=path.name)
    assert path.name in str(ei.value), f'message does not name the file: {ei.value}'
    assert m.list_notebooks() == [] and m.active is None
    with pytest.raises(ConflictError):  # create over it is refused: it never overwrites
        m.use_notebook('nb', notebook_path=path.name, mode='create')
    time.sleep(0.05)  # let any (wrong) background save happen
    m.close_all()
    assert path.read_bytes() == CORRUPT[kind]
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_ino == st.st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name], 'something else was created'


def test_file_corrupted_while_open(tmp_path):
    "Another writer leaves garbage: a clean open notebook reports CorruptFileError, keeps its state, and never overwrites the file"
    m = NotebookManager(tmp_path, save_delay=0.01)
    m.use_notebook('nb', mode='create')
    m.insert_cell(-1, 'code', 'a = 1'); m.save()
    path = tmp_path / 'nb.ipynb'
    garbage = b'{"truncated": tr'
    path.write_bytes(garbage)
    with pytest.raises(CorruptFileError) as ei:
        m.insert_cell(-1, 'code', 'b = 2')
    assert 'nb.ipynb' in str(ei.value)
    time.sleep(0.1)
    assert path.read_bytes() == garbage
    m.close_all()
    assert path.read_bytes() == garbage


# ---------------------------------------------------------------- exit flush

EXITER = textwrap.dedent(r'''
    import json, sys
    from headlesnb.notebook import NotebookManager
    root, style = sys.argv[1], sys.argv[2]
    def work():
        m = NotebookManager(root, save_delay=3600)  # the autosaver would only write in an hour
        m.use_notebook('nb', mode='create')
        for k in range(40): m.insert_cell(-1, 'code' if k % 2 else 'markdown', f'cell {k}\nline two')
        m.delete_cell([0, 5, 7]); m.move_cell(3, 10); m.overwrite_cell_source(0, 'changed')
        m.edit_cell_source(1, 'line two', 'LINE 2')
        cells = m.read_notebook(response_format='detailed', limit=0)['cells']
        on_disk = len(json.load(open(m.item().path))['cells'])
        return m, [[c['id'], c['source']] for c in cells], on_disk
    m, cells, on_disk = work()
    if style == 'dropped': del m  # nobody holds the manager any more
    print(json.dumps(dict(cells=cells, on_disk=on_disk)), flush=True)
    if style == 'sys_exit': sys.exit(0)
''')


@pytest.mark.parametrize('style', ['normal', 'dropped', 'sys_exit'])
def test_exit_flushes_pending_edits(tmp_path, style):
    r = subprocess.run([sys.executable, '-c', EXITER, str(tmp_path), style], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert 'could not save' not in r.stderr, r.stderr
    rep = json.loads(r.stdout)
    assert rep['on_disk'] == 0, 'edits were already on disk before exit: this test would prove nothing'
    assert len(rep['cells']) == 37
    data = (tmp_path / 'nb.ipynb').read_text()
    nbformat.validate(nbformat.reads(data, as_version=nbformat.NO_CONVERT))
    disk = [[c['id'], ''.join(c['source'])] for c in json.loads(data)['cells']]
    assert disk == rep['cells']


def test_opening_removes_stale_temp_files_only(tmp_path):
    "A write killed mid-way leaves `.NAME.*.tmp`; opening removes those over a minute old, never a live writer's"
    m = NotebookManager(tmp_path)
    m.use_notebook('nb', mode='create'); m.unuse_notebook('nb')
    stale, fresh = tmp_path / '.nb.ipynb.dead1234.tmp', tmp_path / '.nb.ipynb.live5678.tmp'
    for t in (stale, fresh): t.write_text('{"partial')
    os.utime(stale, (time.time() - 3600,) * 2)
    m.use_notebook('nb')
    assert not stale.exists() and fresh.exists()
    m.close_all()
