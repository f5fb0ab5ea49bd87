"""Many threads editing one notebook through one NotebookManager leave it consistent, fully undoable, and saved as held."""
import json, random, sys, threading, time
from collections import Counter

import nbformat, pytest

from headlesnb.errors import BadArgumentError, ConflictError, NotFoundError
from headlesnb.notebook import NotebookManager

N_THREADS, N_OPS = 8, 200
EXPECTED = (BadArgumentError, NotFoundError)  # a target index/id that another thread removed or moved meanwhile


def _state(m):
    return [(c['id'], c['cell_type'], c['source']) for c in m.read_notebook(response_format='detailed', limit=0)['cells']]


def _disk(path):
    return [(c['id'], c['cell_type'], ''.join(c['source'])) for c in json.loads(path.read_text())['cells']]


@pytest.mark.parametrize('save_delay', [0.2, 0.001], ids=['default_delay', 'tiny_delay'])
def test_threads_mixed_edits(tmp_path, save_delay):
    "With the tiny delay the autosaver writes all the time, concurrently with the editing threads"
    m = NotebookManager(tmp_path, history_size=5000, save_delay=save_delay)
    m.use_notebook('nb', mode='create')
    written = set()  # every source value any thread wrote (an edit writes the 'SRC' variant of one of them)
    tally = Counter()
    unexpected, lock = [], threading.Lock()
    start = threading.Barrier(N_THREADS)

    def worker(t):
        rnd = random.Random(t)
        mine, ok, ins, dels = set(), 0, 0, 0
        start.wait()
        for k in range(N_OPS):
            v = f'src t{t} k{k}\nsecond line of {t}/{k}'
            mine.add(v); mine.add(v.replace('src', 'SRC'))
            n = m.list_notebooks()[0]['cells']
            ref = rnd.randrange(n) if n else 0
            if rnd.random() < 0.5 and n:  # address by id half of the time
                try: ref = m.read_cell(ref, include_outputs=False, notebook_name='nb')['id']
                except EXPECTED: pass
            r = rnd.random()
            try:
                if r < 0.30 or n == 0: op = 'insert'; m.insert_cell(rnd.randint(-1, n), rnd.choice(['code', 'markdown']), v, notebook_name='nb')
                elif r < 0.45: op = 'overwrite'; m.overwrite_cell_source(ref, v, notebook_name='nb')
                elif r < 0.58: op = 'edit'; m.edit_cell_source(ref, 'src', 'SRC', notebook_name='nb')
                elif r < 0.72: op = 'move'; m.move_cell(ref, rnd.randrange(max(n, 1)), notebook_name='nb')
                elif r < 0.85:
                    op = 'delete'
                    refs = [ref] if rnd.random() < 0.7 or n < 2 else [ref, rnd.randrange(n)]
                    nd = len(m.delete_cell(refs, notebook_name='nb')['deleted'])
                else: op = 'swap'; m.swap_cells(ref, rnd.randrange(max(n, 1)), notebook_name='nb')
            except EXPECTED: continue
            except Exception as e:
                with lock: unexpected.append(f'thread {t} op {k} {op}: {type(e).__name__}: {e}')
                continue
            ok += 1; ins += op == 'insert'; dels += nd if op == 'delete' else 0
        with lock:
            written.update(mine); tally.update(ok=ok, ins=ins, dels=dels)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(N_THREADS)]
    old_switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so that unguarded sections really interleave
    try:
        for th in threads: th.start()
        for th in threads: th.join(60)
    finally: sys.setswitchinterval(old_switch)
    assert not any(th.is_alive() for th in threads), 'a worker is stuck (deadlock?)'

    state = _state(m)
    ids = [s[0] for s in state]
    problems = []
    if unexpected: problems.append(f'{len(unexpected)} unexpected errors, e.g.\n  ' + '\n  '.join(unexpected[:5]))
    if len(set(ids)) != len(ids): problems.append('duplicate ids')
    bad = [s for s in state if s[2] not in written]
    if bad: problems.append(f'{len(bad)} cells with a source nobody wrote, e.g. {bad[0]!r}')
    if len(state) != tally['ins'] - tally['dels']:
        problems.append(f"{len(state)} cells but {tally['ins']} inserts - {tally['dels']} deletes")
    n_undo = len(m.get_history()['undo'])
    if n_undo != tally['ok']: problems.append(f"{n_undo} undo entries but {tally['ok']} successful operations")
    print(dict(tally), len(state), 'cells')
    assert not problems, '\n'.join(problems)
    assert tally['ins'] > 200 and tally['dels'] > 50 and tally['ok'] > 1000, f'too few successful operations to mean much: {tally}'

    # saved file == memory
    m.save()
    path = tmp_path / 'nb.ipynb'
    nbformat.validate(nbformat.read(path, as_version=nbformat.NO_CONVERT))
    assert _disk(path) == state

    # undo everything: back to the empty notebook; redo everything: back to the final state
    m.undo(steps=n_undo)
    assert _state(m) == []
    assert len(m.get_history()['redo']) == n_undo
    m.save()
    assert _disk(path) == []
    m.redo(steps=n_undo)
    assert _state(m) == state
    m.save()
    assert _disk(path) == state
    m.close_all()


def test_own_autosave_is_not_an_external_change(tmp_path):
    """Edits made while the background saver is writing the file must not be mistaken for a conflict
    with "someone else": nobody but us writes this file, so no ConflictError may ever appear."""
    m = NotebookManager(tmp_path, save_delay=0)  # the autosaver writes after (nearly) every edit
    m.use_notebook('nb', mode='create')
    ok, conflicts, first = 0, 0, None
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.5:
        try: m.insert_cell(-1, 'code', 'x = 1\n' * 5, notebook_name='nb'); ok += 1
        except ConflictError as e: conflicts += 1; first = first or str(e)
    m.save()
    assert conflicts == 0, f'{conflicts} spurious ConflictErrors in {ok + conflicts} edits while only our autosaver wrote the file: {first}'
    assert len(_disk(tmp_path / 'nb.ipynb')) == ok
    m.close_all()


def test_save_under_the_document_lock_does_not_deadlock_with_the_autosaver(tmp_path):
    "Closing saves while holding the document's lock; the autosaver must never wait on that lock while it holds the write lock"
    m = NotebookManager(tmp_path, save_delay=0)
    m.use_notebook('nb', mode='create')
    done, added = threading.Event(), []
    def edit():
        while not done.is_set(): added.append(m.insert_cell(-1, 'code', 'x = 1\n' * 50)['id'])
    th = threading.Thread(target=edit, daemon=True)
    th.start()
    doc = m.item('nb').doc
    for _ in range(300):
        with doc.lock: doc.save()
    done.set(); th.join(10)
    assert not th.is_alive(), 'deadlock between a save under the lock and the autosaver'
    m.close_all()
    assert [c['id'] for c in json.loads((tmp_path / 'nb.ipynb').read_text())['cells']] == added
