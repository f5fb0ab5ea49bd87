"""Property: for any sequence of edits, undoing them one at a time restores every earlier state exactly
(in reverse), and redoing them replays every later state exactly."""
import tempfile
from pathlib import Path

import nbformat
from hypothesis import HealthCheck, given, settings, strategies as st

from headlesnb.notebook import NotebookManager


def _initial_nb(path: Path):
    "A notebook with code cells that have outputs (so clear_cell_output has something to undo)"
    out = lambda k: [nbformat.v4.new_output('stream', name='stdout', text=f'out {k}\n'),
                     nbformat.v4.new_output('execute_result', data={'text/plain': f'{k}'}, execution_count=k)]
    cells = []
    for k in range(6):
        if k % 3 == 2: cells.append(nbformat.v4.new_markdown_cell(f'# heading {k}\ntext'))
        else: cells.append(nbformat.v4.new_code_cell(f'x{k} = {k}\nx{k}', outputs=out(k), execution_count=k + 1))
    cells.append(nbformat.v4.new_raw_cell('raw'))
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def _snap(m):
    "Everything an edit may touch, in order"
    cells = m.read_notebook(response_format='detailed', limit=0)['cells']
    return [(c['id'], c['cell_type'], c['source'], repr(c.get('outputs')), c.get('execution_count')) for c in cells]


ix = st.integers(min_value=0, max_value=10**6)  # reduced modulo the current number of cells
ops = st.one_of(
    st.tuples(st.just('insert'), ix, st.sampled_from(['code', 'markdown', 'raw']), st.text(max_size=20)),
    st.tuples(st.just('move'), ix, ix),
    st.tuples(st.just('delete'), st.lists(ix, min_size=1, max_size=3)),
    st.tuples(st.just('overwrite'), ix, st.text(max_size=20)),
    st.tuples(st.just('edit'), ix, st.text(max_size=5)),
    st.tuples(st.just('swap'), ix, ix),
    st.tuples(st.just('reorder'), st.randoms(use_true_random=False)),
    st.tuples(st.just('clear'), st.one_of(st.none(), ix)),
)


def _apply(m, op):
    "Apply `op`; returns False when it was not applicable (nothing must change then)"
    n = m.list_notebooks()[0]['cells']
    kind, *a = op
    if kind == 'insert': m.insert_cell(a[0] % (n + 1), a[1], a[2]); return True
    if n == 0: return False
    if kind == 'move': m.move_cell(a[0] % n, a[1] % n)
    elif kind == 'delete': m.delete_cell([i % n for i in a[0]])
    elif kind == 'overwrite': m.overwrite_cell_source(a[0] % n, a[1])
    elif kind == 'edit':
        i = a[0] % n; src = m.read_cell(i)['source']
        if not src: return False
        old = src[:max(1, len(src) // 2)]  # replace the first half (all its occurrences)
        m.edit_cell_source(i, old, a[1], replace_all=True)
    elif kind == 'swap': m.swap_cells(a[0] % n, a[1] % n)
    elif kind == 'reorder':
        order = list(range(n)); a[0].shuffle(order)
        m.reorder_cells(order)
    elif kind == 'clear':
        if a[0] is None: m.clear_cell_output()
        else:
            i = a[0] % n
            if m.read_cell(i)['cell_type'] != 'code': return False
            m.clear_cell_output(i)
    return True


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=25))
def test_undo_redo_restore_every_state(seq):
    with tempfile.TemporaryDirectory() as d:
        _initial_nb(Path(d) / 'nb.ipynb')
        with NotebookManager(d, save_delay=3600) as m:  # no background writes: this is about history alone
            m.use_notebook('nb')
            snaps = [_snap(m)]
            for op in seq:
                before = len(m.get_history()['undo'])
                applied = _apply(m, op)
                steps = len(m.get_history()['undo']) - before
                if steps == 0:  # a no-op (e.g. clearing outputs that are already clear) records nothing...
                    assert _snap(m) == snaps[-1], f'{op} changed the notebook without recording a step'
                    continue
                assert applied and steps == 1, f'{op} recorded {steps} steps'
                snaps.append(_snap(m))
            k = len(snaps) - 1
            h = m.get_history()
            assert len(h['undo']) == k and h['redo'] == []
            for j in range(k - 1, -1, -1):  # undo one at a time: every earlier state, in reverse
                m.undo()
                assert _snap(m) == snaps[j], f'after undoing to step {j}'
            assert len(m.get_history()['redo']) == k
            for j in range(1, k + 1):  # redo one at a time: every later state
                m.redo()
                assert _snap(m) == snaps[j], f'after redoing step {j}'
            assert m.get_history()['redo'] == []
            # ids stay unique throughout, and the saved file equals memory
            assert len({s[0] for s in snaps[-1]}) == len(snaps[-1])
            m.save()
            nb = nbformat.read(Path(d) / 'nb.ipynb', as_version=nbformat.NO_CONVERT)
            nbformat.validate(nb)
            assert [(c['id'], c['source']) for c in nb.cells] == [(s[0], s[2]) for s in snaps[-1]]
