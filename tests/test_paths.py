"""Paths that leave the root are refused (PathOutsideRootError), and nothing is created outside the root.

Layout used by every test (all real files under `tmp_path`):

    tmp_path/
      outside/secret.ipynb        a real notebook outside the root (its bytes must never change)
      outside/outdir/inner.ipynb
      root/                       the manager's root
        real.ipynb                a notebook inside
        link.ipynb   -> outside/secret.ipynb        (file symlink out, absolute target)
        dangling.ipynb -> outside/new.ipynb         (symlink out to a file that does not exist yet)
        linkdir      -> outside/outdir              (folder symlink out, absolute target)
        rel          -> ../outside                  (folder symlink out, relative target)
        inlink.ipynb -> real.ipynb                  (symlink that stays inside: must be accepted)
"""
import hashlib, json, os
from pathlib import Path

import pytest

from headlesnb.errors import BadArgumentError, HeadlesnbError, PathOutsideRootError
from headlesnb.notebook import NotebookManager

NB = {'cells': [{'cell_type': 'markdown', 'id': 'c0', 'metadata': {}, 'source': ['# secret']}],
      'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}


def _tree(d: Path) -> dict:
    "Every entry under `d` (not following symlinks) -> sha1 of its bytes / link target / 'dir'"
    res = {}
    for dp, dns, fns in os.walk(d, followlinks=False):
        for n in dns + fns:
            p = Path(dp) / n
            k = p.relative_to(d).as_posix()
            if p.is_symlink(): res[k] = 'link:' + os.readlink(p)
            elif p.is_dir(): res[k] = 'dir'
            else: res[k] = hashlib.sha1(p.read_bytes()).hexdigest()
    return res


@pytest.fixture
def env(tmp_path):
    out, root = tmp_path / 'outside', tmp_path / 'root'
    (out / 'outdir').mkdir(parents=True); root.mkdir()
    (out / 'secret.ipynb').write_text(json.dumps(NB))
    (out / 'outdir' / 'inner.ipynb').write_text(json.dumps(NB))
    (root / 'real.ipynb').write_text(json.dumps(NB))
    (root / 'link.ipynb').symlink_to(out / 'secret.ipynb')
    (root / 'dangling.ipynb').symlink_to(out / 'new.ipynb')
    (root / 'linkdir').symlink_to(out / 'outdir', target_is_directory=True)
    (root / 'rel').symlink_to(Path('..') / 'outside', target_is_directory=True)
    (root / 'inlink.ipynb').symlink_to('real.ipynb')
    before = _tree(tmp_path)
    m = NotebookManager(root, save_delay=0.01)
    yield m, tmp_path, root, out
    m.close_all()
    # whatever the test did, nothing outside the root was created, changed or removed
    after = _tree(tmp_path)
    outside = lambda t: {k: v for k, v in t.items() if not k.startswith('root/') and k != 'root'}
    assert outside(after) == outside(before)


def _escapes(tmp_path, out):
    "(notebook_path, what it tries) pairs that all resolve outside the root"
    return [
        ('../escape.ipynb', 'dotdot'),
        ('sub/../../escape.ipynb', 'dotdot via a folder'),
        ('../outside/secret.ipynb', 'dotdot onto an existing file'),
        ('./../root/../outside/fresh.ipynb', 'dotdot round trip'),
        (str(out / 'abs.ipynb'), 'absolute, new file'),
        (str(out / 'secret.ipynb'), 'absolute, existing file'),
        (out / 'secret.ipynb', 'absolute Path object'),
        ('/abs_in_fs_root.ipynb', 'absolute at /'),
        ('link.ipynb', 'file symlink out'),
        ('dangling.ipynb', 'dangling symlink out (create would make the target)'),
        ('linkdir/inner.ipynb', 'folder symlink out, existing file'),
        ('linkdir/new.ipynb', 'folder symlink out, new file'),
        ('linkdir/deeper/new.ipynb', 'folder symlink out, new folder'),
        ('rel/secret.ipynb', 'relative folder symlink out'),
        ('rel/outdir/x.ipynb', 'relative folder symlink out, deeper'),
    ]


def _check_refused(e, path):
    assert type(e) is PathOutsideRootError
    assert isinstance(e, BadArgumentError)  # callers catching bad arguments catch this too
    msg = str(e)
    assert 'outside the root' in msg, msg
    assert str(path) in msg, f'message does not name the path {path!r}: {msg}'


@pytest.mark.parametrize('mode', ['create', 'connect'])
def test_use_notebook_refuses_escapes(env, mode):
    m, tmp_path, root, out = env
    for path, why in _escapes(tmp_path, out):
        with pytest.raises(PathOutsideRootError) as ei:
            m.use_notebook('nb', notebook_path=path, mode=mode)
        _check_refused(ei.value, path)
        assert m.list_notebooks() == [], why
        assert m.active is None, why
    assert not Path('/abs_in_fs_root.ipynb').exists()
    assert not (out / 'new.ipynb').exists() and not (out / 'abs.ipynb').exists()
    assert not (tmp_path / 'escape.ipynb').exists()


@pytest.mark.parametrize('mode', ['create', 'connect'])
def test_name_used_as_path_cannot_escape(env, mode):
    "Without notebook_path the name becomes the path: a name through a symlinked folder is refused too"
    m, tmp_path, root, out = env
    for name in ['linkdir/inner', 'linkdir/new', 'rel/secret', 'rel/outdir/inner', 'link', 'dangling']:
        with pytest.raises(PathOutsideRootError) as ei:
            m.use_notebook(name, mode=mode)
        assert 'outside the root' in str(ei.value)
        assert m.list_notebooks() == []


def test_symlink_inside_root_is_accepted(env):
    "Positive control: refusals are about leaving the root, not about symlinks or folders as such"
    m, tmp_path, root, out = env
    r = m.use_notebook('via_link', notebook_path='inlink.ipynb')
    assert r['path'] == 'real.ipynb' and r['cells'] == 1
    r = m.use_notebook('deep', notebook_path='sub/dir/../new.ipynb', mode='create')
    assert r['path'] == 'sub/new.ipynb' and (root / 'sub' / 'new.ipynb').is_file()
    r = m.use_notebook('abs_inside', notebook_path=str(root / 'abs_in.ipynb'), mode='create')
    assert r['path'] == 'abs_in.ipynb'


def test_list_files_refuses_escapes(env):
    m, tmp_path, root, out = env
    for path in ['..', '../outside', 'sub/../..', str(out), str(tmp_path), '/', 'linkdir', 'rel', 'rel/outdir',
                 'link.ipynb', 'dangling.ipynb']:
        with pytest.raises(PathOutsideRootError) as ei:
            m.list_files(path=path, max_depth=5)
        _check_refused(ei.value, path)


def test_list_files_hides_symlinks_out(env):
    m, tmp_path, root, out = env
    got = {f['path'] for f in m.list_files(max_depth=5, limit=0)['files']}
    assert got == {'real.ipynb', 'inlink.ipynb'}, got  # nothing under linkdir/rel, no link.ipynb/dangling.ipynb
    assert not any('secret' in p or 'inner' in p for p in got)


BAD_NAMES = ['', '   ', '.', '..', '../x', 'a/../../x', 'a/..', '/abs', 'a//b', 'a\x00b', '\x00', 'x' * 256, None, 3, b'nb']


@pytest.mark.parametrize('mode', ['create', 'connect'])
def test_bad_names_refused(env, mode):
    m, tmp_path, root, out = env
    before = _tree(root)
    for name in BAD_NAMES:
        with pytest.raises(BadArgumentError) as ei:
            m.use_notebook(name, mode=mode)
        assert 'name' in str(ei.value), str(ei.value)
        with pytest.raises(BadArgumentError):  # a good path does not rescue a bad name
            m.use_notebook(name, notebook_path='fine.ipynb', mode=mode)
    assert _tree(root) == before
    assert m.list_notebooks() == []


@pytest.mark.parametrize('mode', ['create', 'connect'])
def test_bad_paths_refused(env, mode):
    m, tmp_path, root, out = env
    before = _tree(root)
    for path in ['', '   ', 'a\x00b.ipynb', '\x00', 'sub/\x00/x.ipynb', 5]:
        with pytest.raises(BadArgumentError) as ei:
            m.use_notebook('nb', notebook_path=path, mode=mode)
        assert 'path' in str(ei.value), str(ei.value)
    for path in ['a\x00b', '\x00']:
        with pytest.raises(BadArgumentError):
            m.list_files(path=path)
    assert _tree(root) == before
    assert m.list_notebooks() == []


def test_unusable_paths_give_typed_errors(env):
    """A path inside the root that the OS cannot use (a file where a folder should be, a name too long)
    must give a headlesnb error, not a raw OSError, and leave nothing behind"""
    m, tmp_path, root, out = env
    before, raw = _tree(root), []
    for path in ['real.ipynb/x.ipynb', 'real.ipynb/sub/x.ipynb', 'x' * 300 + '.ipynb', 'newdir/' + 'x' * 300 + '.ipynb']:
        for mode in ['create', 'connect']:
            try: m.use_notebook('nb', notebook_path=path, mode=mode)
            except HeadlesnbError: pass
            except OSError as e: raw.append(f'{mode} {path[:24]!r}...: raw {type(e).__name__}: {e}'[:160])
            else: raw.append(f'{mode} {path[:24]!r}... was accepted')
            assert m.list_notebooks() == []
    left = sorted(set(_tree(root)) - set(before))
    assert not raw and not left, 'untyped errors:\n' + '\n'.join(raw) + f'\nleft behind in the root: {left}'
