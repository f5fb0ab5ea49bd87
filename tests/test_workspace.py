"""WorkspaceManager: rendering (golden), editors (round trips with undo, conflicts), hide/show, budgets,
persistence, confinement, augments, and the tool loop of a DialogManager prompt seeing the workspace.

Everything runs on real files under `tmp_path`; only the LLM is scripted (MockLLMClient)."""
import hashlib, json, os, threading
from pathlib import Path

import pytest

from headlesnb.errors import (BadArgumentError, ConflictError, CorruptFileError, HeadlesnbError, NotFoundError,
                              PathOutsideRootError)
from headlesnb.context import estimate_tokens
from headlesnb.workspace import WorkspaceManager, parse_augment, truncate_middle, shift_view, TOOL_NAMES
from headlesnb.workspace.core import _mac

A_PY = 'import os\n\ndef f(x):\n    return x + 1\n'


@pytest.fixture
def root(tmp_path):
    r = tmp_path / 'root'
    r.mkdir()
    (r / 'a.py').write_text(A_PY)
    return r


@pytest.fixture
def ws(root):
    "A workspace with the code map off (test_codemap.py tests it): renders that do not depend on a background build"
    return WorkspaceManager(root, code_map=False).open_workspace('w')


def _tree(d: Path) -> dict:
    res = {}
    for dp, dns, fns in os.walk(d, followlinks=False):
        for n in dns + fns:
            p = Path(dp) / n
            k = p.relative_to(d).as_posix()
            res[k] = 'link:' + os.readlink(p) if p.is_symlink() else 'dir' if p.is_dir() else hashlib.sha1(p.read_bytes()).hexdigest()
    return res


# ---------------------------------------------------------------- rendering

GOLDEN = '''---WORKSPACE_STATUS
tokens: STRUCTURAL_VIEW 22/4000 | AUGMENTS 4/8000 | FILE_WINDOWS 54/20000 | EDITOR_WINDOWS 33/20000 | TOOL_RESULT_WINDOWS 46/10000 | NOTIFICATIONS 19/2000 | TODOS 9/2000 | total 187
---WORKSPACE_STATUS_END

---STRUCTURAL_VIEW
(off: structure(operation='on') or any code-map tool maps the code under the root here)
---STRUCTURAL_VIEW_END

---AUGMENTS
(none loaded)
---AUGMENTS_END

---FILE_WINDOWS
---FILE_WINDOW_f1
**file**: a.py
**lines**: 3-4 of 4
**type**: range
**stale**: the file changed on disk after this snapshot (update the window to re-read it)

3: def f(x):
4:     return x + 1
---FILE_WINDOW_f1_END
---FILE_WINDOWS_END

---EDITOR_WINDOWS
---EDITOR_WINDOW_e2
**file**: a.py
**lines**: 1-2 of 4
**state**: dirty (1 undo, 0 redo)

1: import sys
2:
---EDITOR_WINDOW_e2_END
---EDITOR_WINDOWS_END

---TOOL_RESULT_WINDOWS
---TOOL_RESULT_WINDOW_t3
**tool**: pytest
**args**: {"k": "f"}
**status**: ok
**lines**: 1

3 passed
---TOOL_RESULT_WINDOW_t3_END

t4: shell {"command": "ls"} -> ok, 2 lines (hidden)
---TOOL_RESULT_WINDOWS_END

---NOTIFICATIONS
#1 e2 a.py: replace at line 1 (-1 +1 lines)
  -1: import os
  +1: import sys
---NOTIFICATIONS_END

---TODOS
1. [x] edit a.py
2. [ ] run tests
---TODOS_END'''


def test_render_golden(ws):
    assert ws.open_range('a.py', 3, 4)['id'] == 'f1'
    e = ws.open_editor('a.py', 1, 2)['id']
    ws.replace(e, 'import os', 'import sys')
    ws.add_tool_result('pytest', '3 passed', {'k': 'f'})
    t = ws.add_tool_result('shell', 'x\ny', {'command': 'ls'})
    ws.hide(t['id'])
    ws.add_todo('edit a.py'); ws.mark_done(1); ws.add_todo('run tests')
    assert ws.render() == GOLDEN


def test_render_empty_and_fresh_window(ws):
    secs = dict(ws.sections())
    assert list(secs) == ['WORKSPACE_STATUS', 'STRUCTURAL_VIEW', 'AUGMENTS', 'FILE_WINDOWS', 'EDITOR_WINDOWS', 'TOOL_RESULT_WINDOWS', 'NOTIFICATIONS', 'TODOS']
    assert secs['FILE_WINDOWS'] == '(no file windows open)' and secs['TODOS'] == '(none)'
    ws.open_range('a.py', 2)  # to the end, clamped; an empty line renders without a trailing space
    assert dict(ws.sections())['FILE_WINDOWS'] == ('---FILE_WINDOW_f1\n**file**: a.py\n**lines**: 2-4 of 4\n**type**: range\n\n'
                                                   '2:\n3: def f(x):\n4:     return x + 1\n---FILE_WINDOW_f1_END')


def test_search_windows(root, ws):
    (root / 'pkg').mkdir()
    (root / 'pkg' / 'b.py').write_text('\n'.join(f'line {i}' + (' TARGET' if i in (10, 12, 40) else '') for i in range(1, 51)) + '\n')
    (root / '.hidden.py').write_text('TARGET\n')
    (root / 'bin.dat').write_bytes(b'TARGET\x00\x01')
    (root / 'big.txt').write_text('TARGET\n' * 400_000)  # over max_search_bytes
    (root / 'w.workspace.json').write_text('{"TARGET": 1}')
    r = ws.open_search('TARGET', max_windows=5, context_lines=2)
    assert r == dict(ids=['f1', 'f2'], matches=3, files=1, regions=2)
    f1, f2 = ws.files['f1'], ws.files['f2']
    assert (f1.path, f1.start, f1.end, f1.meta['matches']) == ('pkg/b.py', 8, 14, [10, 12])  # 10 and 12 merged
    assert (f2.start, f2.end) == (38, 42)
    text = dict(ws.sections())['FILE_WINDOWS']
    assert '**type**: search\n**query**: "TARGET"\n**matches**: 10, 12\n\n8: line 8\n' in text
    assert ws.open_search('TARGET', max_windows=1)['ids'] == ['f3']
    assert ws.open_search('nothing-here-at-all')['ids'] == []
    with pytest.raises(BadArgumentError, match='bad regex'): ws.open_search('(')
    with pytest.raises(BadArgumentError): ws.open_search('x', max_windows=0)


def test_update_and_close(root, ws):
    w = ws.open_range('a.py', 1, 2)['id']
    (root / 'a.py').write_text('one\ntwo\nthree\nfour\n')
    assert '**stale**' in ws.render()
    assert ws.update_window(w)['end'] == 2 and '1: one\n2: two' in ws.render() and '**stale**' not in ws.render()
    assert (ws.update_window(w, 3)['start'], ws.files[w].end) == (3, 4)  # a new start keeps the size
    with pytest.raises(BadArgumentError, match='past the end'): ws.update_window(w, 9, 10)
    assert (ws.files[w].start, ws.files[w].end) == (3, 4)  # unchanged
    ws.close_window(w)
    with pytest.raises(NotFoundError): ws.close_window(w)
    ws.open_range('a.py'); ws.open_range('a.py')
    assert ws.clear()['closed'] == ['f2', 'f3'] and not ws.files
    with pytest.raises(BadArgumentError): ws.clear('everything')


# ---------------------------------------------------------------- editors

def test_edit_round_trip_with_undo(root, ws):
    p = root / 'm.py'
    p.write_text('a\nb\nc\nd\ne\n')
    e = ws.open_editor('m.py')['id']
    states = [p.read_bytes()]
    ws.insert(e, 1, '# head'); states.append(p.read_bytes())
    assert p.read_text() == '# head\na\nb\nc\nd\ne\n'
    ws.replace_lines(e, 2, 3, 'X\nY\nZ'); states.append(p.read_bytes())
    assert p.read_text() == '# head\nX\nY\nZ\nc\nd\ne\n'
    ws.delete_lines(e, 5, 6); states.append(p.read_bytes())
    assert p.read_text() == '# head\nX\nY\nZ\ne\n'
    r = ws.replace(e, 'Y\nZ\ne', 'yz')  # multi-line, exact
    states.append(p.read_bytes())
    assert p.read_text() == '# head\nX\nyz\n'
    assert r['diff'] == '-3: Y\n-4: Z\n-5: e\n+3: yz' and r['dirty']
    ws.insert(e, 4, 'tail'); states.append(p.read_bytes())  # append
    assert p.read_text() == '# head\nX\nyz\ntail\n'
    for want in reversed(states[:-1]):
        ws.undo(e)
        assert p.read_bytes() == want
        assert ws.editors[e].lines == want.decode().splitlines(True)
    assert not ws.editors[e].dirty
    with pytest.raises(BadArgumentError, match='only 0 available'): ws.undo(e)
    ws.redo(e, len(states) - 1)
    assert p.read_bytes() == states[-1]
    note = ws.notifications[0]['text']
    assert note.startswith(f'{e} m.py: redo') and ws.notifications[0]['n'] == len(ws.notifications)


def test_bad_edits_change_nothing(root, ws):
    p = root / 'm.py'
    p.write_text('x = 1\ny = 1\nx = 1\n')
    e = ws.open_editor('m.py')['id']
    before = p.read_bytes()
    with pytest.raises(BadArgumentError, match='not found'): ws.replace(e, 'z = 1', 'q')
    with pytest.raises(BadArgumentError, match='occurs 2 times.*lines 1, 3'): ws.replace(e, 'x = 1', 'q')
    with pytest.raises(BadArgumentError, match='occurs 3 times'): ws.replace(e, '= 1\n', '')
    with pytest.raises(BadArgumentError): ws.replace(e, '', 'q')
    with pytest.raises(BadArgumentError): ws.delete_lines(e, 0, 1)
    with pytest.raises(BadArgumentError): ws.delete_lines(e, 2, 1)
    with pytest.raises(BadArgumentError): ws.replace_lines(e, 1, 9, 'q')
    with pytest.raises(BadArgumentError): ws.insert(e, 5, 'q')
    with pytest.raises(BadArgumentError): ws.insert(e, 1, '')
    with pytest.raises(BadArgumentError): ws.insert(e, '1', 'q')
    with pytest.raises(NotFoundError): ws.insert('e99', 1, 'q')
    assert p.read_bytes() == before and not ws.editors[e].history.entries()['undo'] and not ws.notifications


def test_overlapping_match_is_ambiguous(root, ws):
    (root / 'o.txt').write_text('aaa\n')
    e = ws.open_editor('o.txt')['id']
    with pytest.raises(BadArgumentError, match='occurs 2 times'): ws.replace(e, 'aa', 'b')


def test_line_endings_bom_and_last_line(root, ws):
    (root / 'crlf.txt').write_bytes(b'one\r\ntwo\r\n')
    e = ws.open_editor('crlf.txt')['id']
    ws.insert(e, 2, 'mid\nmid2')
    ws.replace(e, 'mid\nmid2\ntwo', 'TWO')
    assert (root / 'crlf.txt').read_bytes() == b'one\r\nTWO\r\n'
    (root / 'nonl.txt').write_bytes(b'\xef\xbb\xbfa\nb')  # BOM, no final newline
    e2 = ws.open_editor('nonl.txt')['id']
    ws.replace_lines(e2, 2, 2, 'B')
    assert (root / 'nonl.txt').read_bytes() == b'\xef\xbb\xbfa\nB'
    ws.insert(e2, 3, 'c')
    assert (root / 'nonl.txt').read_bytes() == b'\xef\xbb\xbfa\nB\nc\n'
    ws.undo(e2, 2)
    assert (root / 'nonl.txt').read_bytes() == b'\xef\xbb\xbfa\nb'
    (root / 'ff.txt').write_text('a\x0cb\nc\n')  # a form feed does not end a line
    e3 = ws.open_editor('ff.txt')['id']
    ws.delete_lines(e3, 2, 2)
    assert (root / 'ff.txt').read_text() == 'a\x0cb\n'
    (root / 'bin.dat').write_bytes(b'\x00\x01')
    with pytest.raises(BadArgumentError, match='binary'): ws.open_editor('bin.dat')
    (root / 'latin.txt').write_bytes(b'caf\xe9\n')
    with pytest.raises(BadArgumentError, match='not UTF-8'): ws.open_editor('latin.txt')
    with pytest.raises(NotFoundError): ws.open_editor('nope.txt')
    with pytest.raises(BadArgumentError, match='folder'): ws.open_editor('.')


def test_splits_share_state_and_follow_edits(root, ws):
    (root / 'n.txt').write_text(''.join(f'{i}\n' for i in range(1, 31)))
    e = ws.open_editor('n.txt', 1, 5)['id']
    s = ws.split(e, 20, 25)['id']
    assert ws.open_editor('n.txt')['id'] == e  # one editor per file
    s2 = ws.open_editor('n.txt', 10, 12)
    assert s2['existing'] and s2['id'].startswith('s') and s2['editor'] == e
    ws.insert(s, 1, 'new\nnew')  # edits through a split go to the editor
    sp = ws.splits[s]
    assert (sp.start, sp.end) == (22, 27) and (ws.editors[e].start, ws.editors[e].end) == (1, 7)
    text = dict(ws.sections())['EDITOR_WINDOWS']
    assert f'---EDITOR_WINDOW_{s}\n**file**: n.txt\n**split of**: {e}\n**lines**: 22-27 of 32\n**state**: dirty (1 undo, 0 redo)\n\n22: 20\n' in text
    assert ws.close_window(e)['closed'] == [e, s, s2['id']] and not ws.splits


def test_shift_view():
    assert shift_view(10, 20, 2, 0, 3) == (13, 23)
    assert shift_view(10, 20, 14, 2, 5) == (10, 23)
    assert shift_view(5, 10, 7, 13, 2) == (5, 9)
    assert shift_view(5, 10, 0, 20, 0) == (1, 1)
    assert shift_view(10, 20, 9, 0, 2) == (10, 22)
    assert shift_view(10, 20, 8, 1, 2) == (11, 21)


def test_conflict_on_external_change(root, ws):
    p = root / 'a.py'
    e = ws.open_editor('a.py')['id']
    ws.replace(e, 'x + 1', 'x + 2')  # dirty now
    p.write_text('theirs\n')
    with pytest.raises(ConflictError, match='reload_editor.*overwrite_editor'): ws.insert(e, 1, 'ours')
    assert p.read_text() == 'theirs\n'  # nothing of ours was written
    with pytest.raises(ConflictError): ws.undo(e)
    assert p.read_text() == 'theirs\n'
    text = dict(ws.sections())['EDITOR_WINDOWS']
    assert '**state**: conflict: a.py was changed on disk by someone else while this editor holds edits' in text
    assert '    return x + 2' in text  # the editor still shows our version
    assert ws.notifications[0]['text'].startswith(f'{e}: conflict:')
    ws.overwrite_editor(e)  # ours wins
    assert p.read_text() == A_PY.replace('x + 1', 'x + 2')
    ws.insert(e, 1, '# ok')
    p.write_text('theirs again\n')
    with pytest.raises(ConflictError): ws.delete_lines(e, 1, 1)
    ws.reload_editor(e)  # theirs wins
    assert ws.editors[e].lines == ['theirs again\n'] and not ws.editors[e].dirty
    assert ws.editors[e].history.entries()['undo'] == []
    ws.insert(e, 1, 'fine')
    assert p.read_text() == 'fine\ntheirs again\n'


def test_clean_editor_reloads(root, ws):
    p = root / 'a.py'
    e = ws.open_editor('a.py')['id']
    p.write_text('new\ncontent\n')
    assert '1: new\n2: content' in dict(ws.sections())['EDITOR_WINDOWS']  # a render reloads a clean editor
    assert 'reloaded' in ws.notifications[0]['text']
    p.write_text('newer\n')
    with pytest.raises(ConflictError, match='reloaded it'): ws.delete_lines(e, 1, 1)  # line numbers were for the old text
    assert p.read_text() == 'newer\n'
    ws.delete_lines(e, 1, 1)
    assert p.read_text() == ''
    ws.undo(e)  # back to the baseline: clean again
    assert not ws.editors[e].dirty
    os.utime(p, ns=(1, 1))  # touched, not changed: no reload, no conflict
    ws.insert(e, 2, 'x')
    assert p.read_text() == 'newer\nx\n'


def test_deleted_file_is_a_conflict(root, ws):
    e = ws.open_editor('a.py')['id']
    (root / 'a.py').unlink()
    with pytest.raises(ConflictError, match='deleted'): ws.insert(e, 1, 'x')
    with pytest.raises(NotFoundError): ws.reload_editor(e)
    ws.overwrite_editor(e)
    assert (root / 'a.py').read_text() == A_PY


def test_mark_clean(root, ws):
    e = ws.open_editor('a.py')['id']
    ws.insert(e, 1, 'x')
    assert ws.editors[e].dirty
    ws.mark_clean(e)
    assert not ws.editors[e].dirty
    (root / 'a.py').write_text('theirs\n')
    ws.render()  # clean: reloaded, no conflict
    assert ws.editors[e].lines == ['theirs\n'] and ws.editors[e].conflict is None


# ---------------------------------------------------------------- tool windows, todos, notifications

def test_hide_show_collapse(root, ws):
    t1 = ws.add_tool_result('pytest', 'line1\nline2\nline3', {'k': 'x'})['id']
    t2 = ws.grep('def')['id']
    f = ws.open_range('a.py', 1, 1)['id']
    full = dict(ws.sections())['TOOL_RESULT_WINDOWS']
    assert 'line1\nline2\nline3' in full and 'a.py:3: def f(x):' in full
    ws.hide([t1])
    sec = dict(ws.sections())['TOOL_RESULT_WINDOWS']
    assert f'{t1}: pytest {{"k": "x"}} -> ok, 3 lines (hidden)' in sec and 'line2' not in sec and 'a.py:3' in sec
    ws.collapse_all()
    sec = dict(ws.sections())['TOOL_RESULT_WINDOWS']
    assert f'{t2}: grep {{"pattern": "def"}} -> ok, 1 lines (hidden)' in sec and 'a.py:3' not in sec
    with pytest.raises(NotFoundError): ws.show([t1, 'nope'])  # one bad id: nothing changes
    assert ws.tool_windows[t1].hidden
    ws.show(f'{t1},{t2}')
    assert dict(ws.sections())['TOOL_RESULT_WINDOWS'] == full  # nothing was lost
    ws.hide(f)
    assert dict(ws.sections())['FILE_WINDOWS'] == f'{f}: a.py lines 1-1 (range, hidden)'
    with pytest.raises(BadArgumentError): ws.hide([])


def test_wrap_tool_and_shell(root, ws):
    def count_lines(path: str) -> int:
        "Lines in a file"
        return len((root / path).read_text().splitlines())
    tool = ws.wrap_tool(count_lines)
    assert tool(path='a.py') == 't1: count_lines done, 1 lines in TOOL_RESULT_WINDOWS'
    assert ws.tool_windows['t1'].output == '4' and ws.tool_windows['t1'].args == {'path': 'a.py'}
    assert tool(path='nope').startswith('t2: count_lines failed') and ws.tool_windows['t2'].is_error
    r = ws.run_shell('echo hi; echo err >&2; exit 3')
    assert r['exit'] == 3 and ws.tool_windows[r['id']].output == 'hi\nerr\n[exit 3]' and ws.tool_windows[r['id']].is_error


def test_todos(ws):
    ws.add_todo('b'); ws.add_todo('c'); ws.add_todo('a', position=1)
    ws.mark_done('1,3')
    assert dict(ws.sections())['TODOS'] == '1. [x] a\n2. [ ] b\n3. [x] c'
    with pytest.raises(BadArgumentError): ws.mark_done([4])
    with pytest.raises(BadArgumentError): ws.add_todo('  ')
    with pytest.raises(BadArgumentError): ws.add_todo('x', position=9)
    ws.remove_todos([2])
    ws.clear_todos(done_only=True)
    assert ws.todos == []
    with pytest.raises(BadArgumentError, match='no todos'): ws.remove_todos(1)


def test_notifications_bounded(root):
    ws = WorkspaceManager(root, max_notifications=3).open_workspace('w')
    e = ws.open_editor('a.py')['id']
    for i in range(5): ws.insert(e, 1, f'l{i}')
    assert [n['n'] for n in ws.notifications] == [5, 4, 3]
    assert dict(ws.sections())['NOTIFICATIONS'].startswith(f'#5 {e} a.py: insert before line 1 (-0 +1 lines)\n  +1: l4\n#4 ')


# ---------------------------------------------------------------- budgets

def test_budget_truncation(root, ws):
    (root / 'long.txt').write_text(''.join(f'line number {i}\n' for i in range(1, 1001)))
    ws.open_range('long.txt', 1, 1000)
    ws.set_budget('FILE_WINDOWS', 500)
    secs = dict(ws.sections())
    text = secs['FILE_WINDOWS']
    assert estimate_tokens(text) <= 500
    assert text.startswith('---FILE_WINDOW_f1\n**file**: long.txt\n**lines**: 1-1000 of 1000')  # first part kept
    assert text.endswith('1000: line number 1000\n---FILE_WINDOW_f1_END')                  # last part kept
    assert '[… ' in text and 'of FILE_WINDOWS left out here to fit its budget of 500 tokens' in text
    assert 'FILE_WINDOWS ' in secs['WORKSPACE_STATUS'] and "/500 (cut from " in secs['WORKSPACE_STATUS']
    # the cut is never silent: kept + left-out lines add up
    import re
    left = int(re.search(r'\[… (\d+) of (\d+) lines', text).group(1))
    assert left + text.count('\n') == 1006  # 1005 lines in all (header 4 + blank + 1000 + END), marker line counted once
    with pytest.raises(BadArgumentError): ws.set_budget('FILE_WINDOWS', 10)
    with pytest.raises(BadArgumentError): ws.set_budget('NOPE', 1000)
    with pytest.raises(BadArgumentError): WorkspaceManager(root, budgets={'NOPE': 1000})


def test_truncate_middle_huge_line():
    s = 'x' * 10_000
    out = truncate_middle(s, 200)
    assert estimate_tokens(out) <= 200 and out.startswith('xxx') and out.endswith('xxx') and 'left out' in out


# ---------------------------------------------------------------- persistence

def test_restore_after_reopen(root):
    (root / 'augments' / 'g').mkdir(parents=True)
    (root / 'augments' / 'g' / 'one.md').write_text('One.\n')
    wm = WorkspaceManager(root)
    ws = wm.open_workspace('w')
    f = ws.open_range('a.py', 3, 4)['id']
    ws.open_search('return', context_lines=0)
    (root / 'b.txt').write_text('1\n2\n3\n')
    gone = ws.open_range('b.txt', 1, 2)['id']
    e = ws.open_editor('a.py', 1, 2)['id']
    s = ws.split(e, 3, 4)['id']
    ws.replace(e, 'import os', 'import sys')
    t = ws.add_tool_result('pytest', 'all good', {'k': 'f'})['id']
    ws.hide([t])
    ws.add_todo('x'); ws.mark_done(1)
    ws.load_augments('g/*')
    ws.set_budget('TODOS', 300)
    wm.close_workspace('w')
    (root / 'b.txt').unlink()
    # a file window re-reads its range on reopen
    (root / 'a.py').write_text((root / 'a.py').read_text().replace('x + 1', 'x + 100'))
    ws2 = WorkspaceManager(root).open_workspace('w')
    assert list(ws2.files) == [f, 'f2', gone] and list(ws2.editors) == [e] and list(ws2.splits) == [s]
    assert ws2.files[f].lines == ['def f(x):', '    return x + 100']
    assert 'does not exist' in ws2.files[gone].missing and '**missing**' in ws2.render()
    assert ws2.tool_windows[t].hidden and ws2.tool_windows[t].output == 'all good'
    assert ws2.todos == [dict(text='x', done=True)] and ws2.augments == ['g/one'] and ws2.budgets['TODOS'] == 300
    assert [n['n'] for n in ws2.notifications][-1] == 1
    # the editor file changed while closed: reloaded, and notified
    assert ws2.editors[e].lines[3] == '    return x + 100\n' and 'while the workspace was closed' in ws2.notifications[0]['text']
    assert ws2.open_range('a.py')['id'] == 'f7'  # ids go on where they stopped


def test_restore_keeps_undo_history_and_render(root):
    wm = WorkspaceManager(root, code_map=False)  # (a render with the map on changes as its background build goes on)
    ws = wm.open_workspace('w')
    e = ws.open_editor('a.py')['id']
    ws.insert(e, 1, 'x'); ws.insert(e, 1, 'y'); ws.undo(e)
    before = ws.render()
    wm.close_workspace('w')
    ws2 = WorkspaceManager(root, code_map=False).open_workspace('w')
    assert ws2.render() == before
    ws2.undo(e)
    assert (root / 'a.py').read_text() == A_PY and not ws2.editors[e].dirty
    ws2.redo(e, 2)
    assert (root / 'a.py').read_text() == 'y\nx\n' + A_PY


def test_conflict_survives_reopen(root):
    wm = WorkspaceManager(root)
    ws = wm.open_workspace('w')
    e = ws.open_editor('a.py')['id']
    ws.insert(e, 1, 'ours')
    (root / 'a.py').write_text('theirs\n')
    ws.render()
    assert ws.editors[e].conflict
    wm.close_workspace('w')
    ws2 = WorkspaceManager(root).open_workspace('w')
    assert ws2.editors[e].conflict and ws2.editors[e].lines[0] == 'ours\n'
    with pytest.raises(ConflictError): ws2.insert(e, 1, 'more')
    ws2.overwrite_editor(e)
    assert (root / 'a.py').read_text() == 'ours\n' + A_PY


def marked(d:dict) -> str:
    "State `d` as headlesnb writes it for this user (with its mark)"
    return json.dumps(d | dict(mac=_mac(d)))


def test_corrupt_state(root):
    wm = WorkspaceManager(root)
    for bad in ('{not json', '[1, 2]'):  # not a state headlesnb wrote: not restored, left as it is (audit attacker A9)
        (root / 'w.workspace.json').write_text(bad)
        ws = wm.open_workspace('w')
        assert 'was not written by headlesnb for you here' in ws.notifications[0]['text'] and ws.save() is False
        assert (root / 'w.workspace.json').read_text() == bad
        wm.close_workspace('w')
    (root / 'w.workspace.json').write_text(marked({"version": 1, "next_id": 1, "files": [{"id": "f1"}]}))
    with pytest.raises(CorruptFileError, match='bad workspace state'): wm.open_workspace('w')
    assert wm.list_workspaces() == []
    (root / 'w.workspace.json').write_text(marked(dict(version=1, next_id=3, editors=[dict(
        id='e1', path='a.py', start=5, end=2, hidden=False, baseline='', sha='', conflict=None, splits=[])])))
    with pytest.raises(CorruptFileError, match='bad viewport'): wm.open_workspace('w')
    (root / 'w.workspace.json').write_text(marked(dict(version=2)))
    with pytest.raises(CorruptFileError, match='not a workspace state'): wm.open_workspace('w')


def test_empty_file_window_and_editor(root, ws):
    (root / 'empty.txt').write_text('')
    assert ws.open_range('empty.txt') == dict(id='f1', kind='range', path='empty.txt', start=1, end=0, total=0)
    assert dict(ws.sections())['FILE_WINDOWS'] == '---FILE_WINDOW_f1\n**file**: empty.txt\n**lines**: none (empty)\n**type**: range\n---FILE_WINDOW_f1_END'
    with pytest.raises(BadArgumentError, match='past the end'): ws.open_range('empty.txt', 2)
    e = ws.open_editor('empty.txt')['id']
    with pytest.raises(BadArgumentError, match='empty'): ws.delete_lines(e, 1, 1)
    ws.insert(e, 1, 'first')
    assert (root / 'empty.txt').read_text() == 'first\n'


def test_state_is_valid_json_under_threads(root, ws):
    def work(k):
        for i in range(25): ws.add_todo(f'{k}-{i}')
    th = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in th: t.start()
    for t in th: t.join()
    assert len(json.loads(ws.path.read_text())['todos']) == 100


# ---------------------------------------------------------------- confinement

@pytest.fixture
def outside(tmp_path, root):
    out = tmp_path / 'outside'
    (out / 'dir').mkdir(parents=True)
    (out / 'secret.txt').write_text('secret\n')
    (out / 'dir' / 'x.md').write_text('x\n')
    (root / 'link.txt').symlink_to(out / 'secret.txt')
    (root / 'linkdir').symlink_to(out / 'dir', target_is_directory=True)
    return out


def test_paths_confined(root, ws, outside):
    before = _tree(outside)
    bad = ['../outside/secret.txt', str(outside / 'secret.txt'), 'link.txt', 'linkdir/x.md', 'linkdir/../../outside/secret.txt']
    for p in bad:
        with pytest.raises(PathOutsideRootError): ws.open_range(p)
        with pytest.raises(PathOutsideRootError): ws.open_editor(p)
    with pytest.raises(PathOutsideRootError): ws.open_search('secret', path='linkdir')
    assert ws.open_search('secret')['ids'] == []  # a symlink out is not searched
    for p in ('', None, 'a\x00b', 5):
        with pytest.raises(BadArgumentError): ws.open_range(p)
    with pytest.raises(BadArgumentError): ws.store_augment('../../outside/evil', 'x')
    with pytest.raises(BadArgumentError): ws.store_augment('/abs/evil', 'x')
    wm = WorkspaceManager(root, augments_dir='linkdir')
    with pytest.raises(PathOutsideRootError): wm.open_workspace('w2').store_augment('g/evil', 'x')
    with pytest.raises(PathOutsideRootError): wm.open_workspace('w3', '../outside/w3.workspace.json')
    with pytest.raises(BadArgumentError): wm.open_workspace('../w4')
    with pytest.raises(PathOutsideRootError): wm.open_workspace('w5').load_augments('dir/*')  # the augments folder is a symlink out
    assert _tree(outside) == before and not ws.files and not ws.editors


def test_restored_paths_are_confined_again(root, outside):
    wm = WorkspaceManager(root)
    ws = wm.open_workspace('w')
    ws.open_range('a.py')
    wm.close_workspace('w')
    d = json.loads((root / 'w.workspace.json').read_text())
    d['files'][0]['path'] = '../outside/secret.txt'  # the state file edited (and marked as this user's: confinement holds even then)
    (root / 'w.workspace.json').write_text(marked(d))  # (marked: the user's own headlesnb could have written it)
    ws2 = WorkspaceManager(root).open_workspace('w')
    assert not ws2.files and 'dropped on reopen' in ws2.notifications[0]['text'] and '1: secret' not in ws2.render()


# ---------------------------------------------------------------- augments

def _aug(root, name, text):
    p = root / 'augments' / f'{name}.md'
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_augments(root, ws):
    _aug(root, 'base/core', 'Core.\n')
    _aug(root, 'base/paradigm', '---\nrequires: base/core\ndescription: the paradigm\n---\nParadigm.\n')
    _aug(root, 'tools/edit', '---\nrequires:\n  - base/paradigm\n  - tools/cycle\n---\nEdit.\n')
    _aug(root, 'tools/cycle', '---\nrequires: tools/edit\n---\nCycle.\n')
    _aug(root, 'tools/broken', '---\nrequires: base/missing\n---\nBroken.\n')
    assert ws.available_augments() == ['base/core', 'base/paradigm', 'tools/broken', 'tools/cycle', 'tools/edit']
    r = ws.load_augments('tools/edit')
    assert r['loaded'] == ['tools/edit'] and r['with_requirements'] == ['base/core', 'base/paradigm', 'tools/cycle']
    text = dict(ws.sections())['AUGMENTS']
    order = [l for l in text.split('\n') if l.startswith('---AUGMENT_') and not l.endswith('_END')]
    assert order == ['---AUGMENT_base/core', '---AUGMENT_base/paradigm', '---AUGMENT_tools/cycle', '---AUGMENT_tools/edit']
    assert '---AUGMENT_base/paradigm\nParadigm.\n---AUGMENT_base/paradigm_END' in text  # front matter stripped
    with pytest.raises(NotFoundError, match="'tools/broken' requires 'base/missing'"): ws.load_augments('tools/broken')
    with pytest.raises(NotFoundError): ws.load_augments('nope/*')
    assert ws.augments == ['tools/edit']
    with pytest.raises(BadArgumentError, match='only as a requirement'): ws.unload_augments('base/core')
    ws.load_augments('base/*')
    assert ws.augments == ['tools/edit', 'base/core', 'base/paradigm']
    ws.unload_augments('tools/*')
    assert ws.augments == ['base/core', 'base/paradigm']
    _aug(root, 'base/core', 'Core, edited.\n')  # read afresh when the file changes
    assert 'Core, edited.' in dict(ws.sections())['AUGMENTS']
    r = ws.store_augment('learned/tip', 'Use the editor.', requires='base/core', description='a tip')
    assert (root / 'augments/learned/tip.md').read_text() == '---\nrequires: base/core\ndescription: a tip\n---\nUse the editor.\n'
    with pytest.raises(ConflictError): ws.store_augment('learned/tip', 'again')
    with pytest.raises(NotFoundError): ws.store_augment('learned/tip2', 'x', requires='base/none')
    assert [a for a in ws.list_augments('learned/*')] == [dict(name='learned/tip', description='a tip', requires=['base/core'], loaded=False)]
    assert parse_augment('---\nrequires: [a/b, c/d]\n---\nbody') == ({'requires': ['a/b', 'c/d']}, 'body')
    assert parse_augment('no front matter\n---\n') == ({'requires': []}, 'no front matter\n---')


# ---------------------------------------------------------------- cells and messages

def test_cell_and_message_windows(root):
    from headlesnb.notebook import NotebookManager
    from headlesnb.dialog import DialogManager
    nm, dm = NotebookManager(root, save_delay=60), DialogManager(root, save_delay=60)
    nm.use_notebook('nb', mode='create')
    nm.insert_cell(-1, 'markdown', '# Title')
    c = nm.insert_cell(-1, 'code', 'x = 1\ny = 2\nprint(x + y)')
    dm.use_dialog('d', mode='create')
    m = dm.add_message('What is\nx?', 'prompt')
    wm = WorkspaceManager(root, dialogs=dm)
    ws = wm.for_dialog('d')
    assert ws.path == root / 'd.workspace.json'
    with pytest.raises(BadArgumentError, match='no NotebookManager'): ws.open_cell('nb', 1)
    w = ws.open_cell('nb', 1, 2, manager=nm)  # the manager is kept for re-reads
    assert (w['cell'], w['start'], w['end'], w['total']) == (c['id'], 2, 3, 3)
    assert ws.open_cell('nb', c['id'])['id'] == 'f2'
    wm2 = ws.open_message(m['id'])
    assert wm2['message'] == m['id']
    text = dict(ws.sections())['FILE_WINDOWS']
    assert (f"---FILE_WINDOW_f1\n**notebook**: nb (nb.ipynb)\n**cell**: {c['id']} (index 1, code)\n**lines**: 2-3 of 3\n"
            f"**type**: cell\n\n2: y = 2\n3: print(x + y)\n---FILE_WINDOW_f1_END") in text
    assert f"**dialog**: d (d.ipynb)\n**message**: {m['id']} (index 0, prompt)\n**lines**: 1-2 of 2\n**type**: message\n\n1: What is\n2: x?" in text
    nm.overwrite_cell_source(c['id'], 'z = 3')
    assert ws.update_window('f2')['total'] == 1 and ws.files['f2'].lines == ['z = 3']
    with pytest.raises(NotFoundError): ws.open_cell('nb', 'nope')
    with pytest.raises(NotFoundError): ws.open_message('nope')
    nm.save('nb'); nm.close_all(); dm.close_all()
    wm.close_workspace('d')
    ws2 = WorkspaceManager(root).open_workspace('d')  # no managers: cells re-read from the files
    assert ws2.files['f2'].lines == ['z = 3'] and ws2.files['f3'].lines == ['What is', 'x?']


# ---------------------------------------------------------------- the dialog tool loop

def test_execute_prompt_tool_loop_sees_workspace(root):
    from headlesnb.dialog import DialogManager
    from headlesnb.llm import MockLLMClient
    mock = MockLLMClient([
        {'tool_calls': [('file_windows', {'operation': 'open_range', 'file_path': 'a.py', 'start': 3, 'end': 4}),
                        ('editor', {'operation': 'open', 'file_path': 'a.py'}),
                        ('todos', {'operation': 'add', 'text': 'bump the increment'})]},
        {'tool_calls': [('editor', {'operation': 'replace', 'editor_id': 'e2', 'old': 'x + 1', 'new': 'x + 2'}),
                        ('editor', {'operation': 'replace', 'editor_id': 'e2', 'old': 'not there', 'new': 'y'}),
                        ('todos', {'operation': 'done', 'numbers': '1'})]},
        'Done: f now returns x + 2.'])
    dm = DialogManager(root, llm=mock, save_delay=60)
    wm = WorkspaceManager(root)
    assert wm.attach(dm)['tools'] == list(TOOL_NAMES)
    with pytest.raises(ConflictError): wm.attach(dm)
    dm.use_dialog('chat', mode='create')
    dm.add_message('Some context', 'note')
    p = dm.add_message('Make f return x + 2', 'prompt')
    r = dm.execute_prompt(p['id'])
    assert [t['result'] for t in r['tool_calls'][:3]] == ['opened f1: a.py lines 3-4 of 4', 'e2: a.py open for editing', 'todo 1 added (1 in all)']
    assert r['tool_calls'][3]['result'] == 'e2: replace at line 4 in a.py (-1 +1 lines), now 4 lines, dirty'
    assert r['tool_calls'][4]['is_error'] and 'not found' in r['tool_calls'][4]['result']
    assert all('\n' not in t['result'] for t in r['tool_calls'])  # one line each
    assert (root / 'a.py').read_text() == A_PY.replace('x + 1', 'x + 2')
    assert {t['name'] for t in mock.requests[0]['tools']} >= set(TOOL_NAMES)

    def tail(req): return req['messages'][-1]['content'][-1]['text']
    t0, t1, t2 = (tail(q) for q in mock.requests)
    assert t0.startswith('---WORKSPACE_STATUS') and '(no file windows open)' in t0
    assert 'Make f return x + 2' in str(mock.requests[0]['messages'][-1])  # the workspace follows the prompt
    # the window opened in round 1 is in the very next request's context
    assert '---FILE_WINDOW_f1\n**file**: a.py\n**lines**: 3-4 of 4\n**type**: range\n\n3: def f(x):\n4:     return x + 1\n---FILE_WINDOW_f1_END' in t1
    assert '---EDITOR_WINDOW_e2' in t1 and '1. [ ] bump the increment' in t1
    assert mock.requests[1]['messages'][-1]['content'][0]['type'] == 'tool_result'  # after the tool results
    # and the edit of round 2 in the next one
    assert '4:     return x + 2' in t2 and '**state**: dirty (1 undo, 0 redo)' in t2 and '1. [x] bump the increment' in t2
    assert '  -4:     return x + 1\n  +4:     return x + 2' in t2 and '**stale**' in t2
    assert (root / 'chat.workspace.json').exists() and wm.workspace('chat').dialog == 'chat'
    # workspace sections are counted in the prompt's budget: a tiny budget refuses the prompt
    wm.workspace('chat').open_range('a.py')
    small = MockLLMClient(['x'], context_window=4196, max_tokens=4096)  # 100 tokens for everything
    dm._llm = small
    p2 = dm.add_message('again', 'prompt')
    with pytest.raises(BadArgumentError, match='context added after it'): dm.execute_prompt(p2['id'])
    wm.detach(dm)
    assert dm.section_providers == [] and dm.tool_providers == []
    dm.close_all()


def test_tools_directly(root, ws):
    tools = ws.tools(shell=True, extra={'double': lambda n: 2 * n})
    assert set(tools) == set(TOOL_NAMES) | {'shell', 'double'}
    assert tools['file_windows']('open_search', query='return', context_lines=0) == 'opened 1 window(s) f1: 1 match(es) in 1 file(s), 1 region(s)'
    assert tools['file_windows']('update', window_id='f1', start='1', end='2') == 'updated f1: lines 1-2 of 4'
    assert tools['tool_windows']('hide', ids='f1') == 'hidden: f1'
    assert tools['grep']('def', glob='*.py').startswith('t2: 1 match(es) in 1 file(s)')
    assert tools['shell']('echo hi').startswith('t3: exit 0')
    assert tools['double'](n=4) == 't4: double done, 1 lines in TOOL_RESULT_WINDOWS'
    assert tools['todos']('add', text='a') == 'todo 1 added (1 in all)'
    assert tools['augments']('list') == 'no augments'
    assert tools['editor']('open', file_path='a.py', start=1, end=2) == 'e5: a.py open for editing'
    assert tools['editor']('insert', editor_id='e5', before_line=1, text='# top').startswith('e5: insert before line 1 in a.py (-0 +1 lines)')
    assert tools['editor']('undo', editor_id='e5').startswith('e5: undo insert before line 1')
    with pytest.raises(HeadlesnbError): tools['editor']('delete', editor_id='e5')


# ---------------------------------------------------------------- searches under a time limit, the manager as a BaseManager

def test_catastrophic_pattern_is_an_error_not_a_hang(root, ws):
    import time
    (root / 'x.txt').write_text('x' * 5000 + '\n')
    for search in (lambda: ws.grep('(x+x+)+y'), lambda: ws.open_search('(x+x+)+y'),
                   lambda: ws.tools()['grep']('(x+x+)+y')):
        t0 = time.monotonic()
        with pytest.raises(BadArgumentError, match='took longer than'): search()
        assert time.monotonic() - t0 < 60  # 2 s of search; generous for a loaded machine, but no hang
    assert not ws.tool_windows and not ws.files  # nothing changed


def test_search_matches_within_lines(root, ws):
    (root / 'm.txt').write_text('a\nno\nb\na then b\nA B\n')
    r = ws.grep('a.*b')  # `.` may match a newline in the pattern's flags: still one line at a time
    assert ws.tool_windows[r['id']].output == 'm.txt:4: a then b'
    r = ws.grep('^a', ignore_case=True)
    assert ws.tool_windows[r['id']].output == 'm.txt:1: a\nm.txt:4: a then b\nm.txt:5: A B'
    assert ws.open_search('then', context_lines=0)['ids'] == ['f3'] and ws.files['f3'].lines == ['a then b']


def test_manager_is_a_base_manager(root):
    from headlesnb.base import BaseManager
    with WorkspaceManager(root) as wm:
        assert isinstance(wm, BaseManager) and wm.kind == 'workspace'
        ws = wm.open_workspace('w')
        assert wm.open_workspace('w') is ws and wm.item('w').history is None and wm.item('w').doc is ws
        with pytest.raises(ConflictError, match="already open as workspace 'w'"): wm.open_workspace('v', 'w.workspace.json')
        with pytest.raises(ConflictError, match='already used for'): wm.open_workspace('w', 'other.workspace.json')
        (root / 'dir.workspace.json').mkdir()
        with pytest.raises(BadArgumentError, match='is a folder'): wm.open_workspace('dir')
        assert not (root / 'w.workspace.json').exists()  # nothing to save yet
        ws.add_todo('x')
        with wm.edit('w') as it: assert it.doc is ws and not ws.sync()
    assert wm.list_workspaces() == [] and json.loads((root / 'w.workspace.json').read_text())['todos'] == [dict(text='x', done=False)]
