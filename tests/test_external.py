"""A notebook file changed on disk by another writer is noticed: reloaded when we hold no unsaved edits,
reported as a ConflictError (file untouched) when we do; save(force=True) overwrites, reload() discards ours.

"Other writers" are a second NotebookManager on the same folder, or plain file writes.
"""
import json, os, time
from pathlib import Path

import nbformat, pytest

from headlesnb.errors import BadArgumentError, ConflictError
from headlesnb.notebook import NotebookManager

LONG = 3600  # a save_delay that keeps our edits unsaved (dirty) for the whole test


def _disk_sources(path): return [''.join(c['source']) for c in json.loads(Path(path).read_text())['cells']]
def _sources(m, name=None): return [c['source'] for c in m.read_notebook(name, response_format='detailed', limit=0)['cells']]


def _plain_write(path, sources, bump=True):
    "Another writer: nbformat writes the file in place; mtime pushed forward so coarse clocks cannot hide it"
    before = os.stat(path).st_mtime_ns
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    with open(path, 'w') as f: nbformat.write(nb, f)
    if bump: os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


@pytest.fixture
def ours(tmp_path):
    "Our manager with a saved, clean notebook of two cells"
    m = NotebookManager(tmp_path, save_delay=LONG)
    m.use_notebook('nb', mode='create')
    m.insert_cell(-1, 'code', 'ours_1'); m.insert_cell(-1, 'code', 'ours_2')
    m.save()
    yield m, tmp_path / 'nb.ipynb'
    if any(n['name'] == 'nb' and n['dirty'] for n in m.list_notebooks()):
        try: m.save()
        except ConflictError: m.reload()  # never overwrite their file on the way out
    m.close_all()


# ------------------------------------------------------------------ clean document: reload

@pytest.mark.parametrize('writer', ['manager', 'plain'])
def test_clean_doc_reloads(ours, writer):
    m, path = ours
    assert m.get_history()['undo'], 'precondition: we have history'
    if writer == 'manager':
        other = NotebookManager(path.parent, save_delay=LONG)
        other.use_notebook('theirs', notebook_path='nb.ipynb')
        other.overwrite_cell_source(0, 'theirs_1\nmore text than before')
        other.insert_cell(-1, 'markdown', 'theirs_3')
        other.save()
    else: _plain_write(path, ['theirs_1', 'theirs_2', 'theirs_3'])
    expected = _disk_sources(path)
    assert expected != ['ours_1', 'ours_2']
    # a read sees their version...
    assert _sources(m) == expected
    # ...our history, which described the old file, is gone: undo cannot resurrect our cells over theirs
    h = m.get_history()
    assert h['undo'] == [] and h['redo'] == []
    with pytest.raises(BadArgumentError): m.undo()
    # editing works on top of theirs and saves without conflict
    m.insert_cell(-1, 'code', 'ours_after')
    m.save()
    assert _disk_sources(path) == expected + ['ours_after']


def test_clean_doc_reloads_on_edit(ours):
    "The first operation after their write is an edit: it applies to their version"
    m, path = ours
    _plain_write(path, ['theirs_1', 'theirs_2', 'theirs_3'])
    r = m.overwrite_cell_source(2, 'ours_on_theirs')  # index 2 only exists in their version
    assert r['index'] == 2
    assert _sources(m) == ['theirs_1', 'theirs_2', 'ours_on_theirs']
    assert len(m.get_history()['undo']) == 1  # only our new edit
    m.save()
    assert _disk_sources(path) == ['theirs_1', 'theirs_2', 'ours_on_theirs']


def test_same_size_rewrite_detected(ours):
    "Same byte count, different content (only the mtime differs): still seen"
    m, path = ours
    data = path.read_text()
    assert 'ours_1' in data
    path.write_text(data.replace('ours_1', 'THEM_1'))
    st = os.stat(path); os.utime(path, ns=(st.st_mtime_ns + 10**9, st.st_mtime_ns + 10**9))
    assert _sources(m) == ['THEM_1', 'ours_2']


def test_touch_without_change_is_not_a_conflict(ours):
    "mtime bumped, bytes identical: not an external change; our unsaved edits stay and save normally"
    m, path = ours
    m.insert_cell(-1, 'code', 'ours_3')  # dirty
    st = os.stat(path); os.utime(path, ns=(st.st_mtime_ns + 5 * 10**9, st.st_mtime_ns + 5 * 10**9))
    m.insert_cell(-1, 'code', 'ours_4')
    assert m.save()['saved'] is True
    assert _disk_sources(path) == ['ours_1', 'ours_2', 'ours_3', 'ours_4']
    assert len(m.get_history()['undo']) == 4


# ------------------------------------------------------------------ dirty document: conflict

def _dirty_then_theirs(m, path, writer):
    m.insert_cell(-1, 'code', 'ours_unsaved')
    assert m.item('nb').doc.dirty
    if writer == 'manager':
        other = NotebookManager(path.parent, save_delay=LONG)
        other.use_notebook('theirs', notebook_path='nb.ipynb')
        other.overwrite_cell_source(0, 'theirs_1 longer')
        other.save(); other.close_all()
    else: _plain_write(path, ['theirs_1', 'theirs_2'])
    return path.read_bytes()


@pytest.mark.parametrize('writer', ['manager', 'plain'])
def test_dirty_doc_conflicts(ours, writer):
    m, path = ours
    theirs = _dirty_then_theirs(m, path, writer)
    st = os.stat(path)
    for op in [lambda: m.insert_cell(-1, 'code', 'x'), lambda: m.overwrite_cell_source(0, 'x'),
               lambda: m.edit_cell_source(0, 'ours', 'x'), lambda: m.delete_cell(0), lambda: m.move_cell(0, 1),
               lambda: m.swap_cells(0, 1), lambda: m.undo(), lambda: m.save()]:
        with pytest.raises(ConflictError) as ei: op()
        assert 'nb.ipynb' in str(ei.value) and 'changed on disk' in str(ei.value)
    # nothing changed: not the file, not our memory
    assert path.read_bytes() == theirs and os.stat(path).st_ino == st.st_ino
    assert m.item('nb').doc.dirty
    assert [c['source'] for c in m.item('nb').doc.cells] == ['ours_1', 'ours_2', 'ours_unsaved']
    # reads still answer (with our version) and do not resolve the conflict silently
    assert _sources(m) == ['ours_1', 'ours_2', 'ours_unsaved']
    with pytest.raises(ConflictError): m.save()
    assert path.read_bytes() == theirs


def test_dirty_doc_autosave_does_not_overwrite(tmp_path):
    "With a short save_delay the background saver must not overwrite their file either; the next edit reports it"
    m = NotebookManager(tmp_path, save_delay=0.3)
    m.use_notebook('nb', mode='create')
    m.insert_cell(-1, 'code', 'ours_1'); m.save()
    path = tmp_path / 'nb.ipynb'
    m.insert_cell(-1, 'code', 'ours_unsaved')  # the autosaver will try to write this in 0.3 s
    _plain_write(path, ['theirs_1', 'theirs_2', 'theirs_3'])
    theirs = path.read_bytes()
    time.sleep(0.7)  # the autosaver tried (and must have refused)
    assert path.read_bytes() == theirs
    with pytest.raises(ConflictError) as ei: m.insert_cell(-1, 'code', 'x')
    assert 'nb.ipynb' in str(ei.value)
    assert path.read_bytes() == theirs
    m.reload()
    assert _sources(m) == ['theirs_1', 'theirs_2', 'theirs_3']


@pytest.mark.parametrize('writer', ['manager', 'plain'])
def test_force_save_overwrites(ours, writer):
    m, path = ours
    _dirty_then_theirs(m, path, writer)
    r = m.save(force=True)
    assert r['saved'] is True
    assert _disk_sources(path) == ['ours_1', 'ours_2', 'ours_unsaved']
    nbformat.validate(nbformat.read(path, as_version=nbformat.NO_CONVERT))
    assert not m.item('nb').doc.dirty
    # the conflict is resolved: editing and saving work again, history kept
    m.insert_cell(-1, 'code', 'after')
    assert m.save()['saved'] is True
    assert _disk_sources(path) == ['ours_1', 'ours_2', 'ours_unsaved', 'after']
    assert len(m.get_history()['undo']) == 4


@pytest.mark.parametrize('writer', ['manager', 'plain'])
def test_reload_discards_ours(ours, writer):
    m, path = ours
    theirs = _dirty_then_theirs(m, path, writer)
    expected = _disk_sources(path)
    r = m.reload()
    assert r['cells'] == len(expected)
    assert _sources(m) == expected
    assert 'ours_unsaved' not in _sources(m)
    assert m.get_history() == {'undo': [], 'redo': []}
    assert not m.item('nb').doc.dirty
    assert m.save()['saved'] is False  # nothing of ours left to write
    assert path.read_bytes() == theirs
    m.insert_cell(-1, 'code', 'after')
    m.save()
    assert _disk_sources(path) == expected + ['after']


def test_two_managers_take_turns(tmp_path):
    "Two writers alternating edit+save on the same file never conflict and never lose each other's cells"
    a, b = NotebookManager(tmp_path, save_delay=LONG), NotebookManager(tmp_path, save_delay=LONG)
    a.use_notebook('nb', mode='create')
    b.use_notebook('nb', mode='connect')
    for k in range(30):
        w = a if k % 2 == 0 else b
        w.insert_cell(-1, 'code', f'cell {k}')
        w.save()
    want = [f'cell {k}' for k in range(30)]
    assert _disk_sources(tmp_path / 'nb.ipynb') == want
    assert _sources(a) == want and _sources(b) == want


def test_close_with_conflict_keeps_notebook(ours):
    """unuse_notebook on a conflicted notebook raises ConflictError; the notebook must stay in use
    (its unsaved edits reachable) so that the advice in the message (reload / save(force=True)) can be followed"""
    m, path = ours
    theirs = _dirty_then_theirs(m, path, 'plain')
    with pytest.raises(ConflictError): m.unuse_notebook('nb')
    assert path.read_bytes() == theirs
    assert [n['name'] for n in m.list_notebooks()] == ['nb'], 'the notebook was closed although its save failed: our edits are unreachable'
    assert m.save('nb', force=True)['saved'] is True
    assert _disk_sources(path) == ['ours_1', 'ours_2', 'ours_unsaved']
