"""The code map on code nobody here wrote: the running interpreter's standard library, and a small multi-language tree
(tests/fixtures/codemap, see its README), through the index, the workspace, a dialog and the MCP server."""
import ast, inspect, json, os, random, shutil, subprocess, sys, sysconfig, textwrap
from pathlib import Path
import anyio, pytest
from headlesnb.workspace.codemap import CodeMap, lang_of
from headlesnb.errors import BadArgumentError, NotFoundError
from headlesnb.workspace import WorkspaceManager

FIXTURE = Path(__file__).parent / 'fixtures' / 'codemap'
STDLIB = Path(sysconfig.get_paths()['stdlib'])


@pytest.fixture(scope='module')
def stdlib(tmp_path_factory):
    "The standard library indexed once (its index in a temporary folder: the interpreter's folder stays untouched)"
    cm = CodeMap(STDLIB, db=tmp_path_factory.mktemp('stdlib') / 'codemap.sqlite', exclude={'site-packages'})
    res = cm.refresh()
    assert res['files'] > 500 and res['changed'] == res['files']
    yield cm
    cm.close()


@pytest.fixture
def tree(tmp_path):
    "A copy of the fixture tree in a git work tree, with an ignored folder"
    root = tmp_path / 'tree'
    shutil.copytree(FIXTURE, root)
    (root / 'ignored').mkdir()
    (root / 'ignored' / 'hidden.py').write_text('def never_indexed(): pass\n')
    subprocess.run(['git', 'init', '-q', '.'], cwd=root, check=True)
    return root


def _sample(n=40, seed=7):
    "Python files of the standard library, a fixed random sample (tests and site-packages left out)"
    files = sorted(p for p in STDLIB.rglob('*.py') if 'site-packages' not in p.parts and 'test' not in p.parts and 'tests' not in p.parts)
    return random.Random(seed).sample(files, n)


def _module(path: Path) -> str:
    parts = list(path.relative_to(STDLIB).with_suffix('').parts)
    if parts[-1] == '__init__': parts.pop()
    return '.'.join(parts)


def _defs(tree):
    "(qualified name, node) of module-level and class-level functions and classes, as Python's own `ast` sees them"
    def walk(body, prefix):
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield prefix + n.name, n
                if isinstance(n, ast.ClassDef): yield from walk(n.body, prefix + n.name + '.')
    yield from walk(tree.body, '')


def test_stdlib_names_and_lines_match_ast(stdlib):
    checked = 0
    for path in _sample():
        src = path.read_bytes()
        try: tree = ast.parse(src)
        except SyntaxError: continue
        defs = list(_defs(tree))
        counts = {}
        for q, _ in defs: counts[q] = counts.get(q, 0) + 1
        mod = _module(path)
        for q, n in defs:
            if counts[q] > 1: continue  # defined twice (in if/else branches): ambiguous by design
            s = stdlib.find(f'{mod}.{q}')
            assert (s.path, s.start, s.end) == (str(path.relative_to(STDLIB)), n.lineno, n.end_lineno), (mod, q)
            assert s.kind == ('class' if isinstance(n, ast.ClassDef) else 'method' if '.' in q else 'function'), (mod, q, s.kind)
            assert s.top == (n.decorator_list[0].lineno if n.decorator_list else n.lineno), (mod, q)
            if (doc := ast.get_docstring(n, clean=True)) and doc.strip():
                assert s.doc and s.doc.split()[0] in doc, (mod, q, s.doc)
            checked += 1
    assert checked > 300, checked


def test_stdlib_names_as_python_imports_them(stdlib):
    import json, json.decoder, email.message, collections
    for obj, qname in [(json.dumps, 'json.dumps'), (json.decoder.JSONDecoder.raw_decode, 'json.decoder.JSONDecoder.raw_decode'),
                       (email.message.Message.get_payload, 'email.message.Message.get_payload'),
                       (collections.Counter.most_common, 'collections.Counter.most_common')]:
        s = stdlib.find(qname)
        lines, first = inspect.getsourcelines(obj)
        assert (s.top, s.end) == (first, first + len(lines) - 1), qname
        assert Path(inspect.getsourcefile(obj)).resolve() == (STDLIB / s.path).resolve()
    assert stdlib.find('JSONDecoder.raw_decode').qname == 'json.decoder.JSONDecoder.raw_decode'  # a unique tail
    assert stdlib.find('raw_decode').path == 'json/decoder.py'                                  # a unique bare name
    with pytest.raises(NotFoundError): stdlib.find('json.__init__.dumps')
    with pytest.raises(BadArgumentError, match='ambiguous.*json.dumps'): stdlib.find('dumps')


def test_stdlib_graph_questions(stdlib):
    assert {'json.decoder.JSONDecoder.decode'} <= {c['caller'] for c in stdlib.callers('raw_decode')}
    assert 'raw_decode' in {c['name'] for c in stdlib.callees('json.decoder.JSONDecoder.decode')}
    subs = {s['qname'] for s in stdlib.subclasses('OSError')}
    assert {'gzip.BadGzipFile', 'shutil.Error'} & subs and len(subs) > 10
    imp = stdlib.imports('json')
    assert {'json.decoder', 'json.encoder'} <= {i['module'] for i in imp['imports']}
    assert 'json/tool.py' in {i['path'] for i in imp['imported_by']}


def test_stdlib_search_finds_the_definition_first(stdlib):
    "For names defined once, search for the exact name ranks the defining file first"
    rows = stdlib._rows("SELECT s.name, f.path FROM symbols s JOIN files f ON f.id = s.file WHERE f.path NOT LIKE '%test%' "
                        "GROUP BY s.name HAVING count(*) = 1 AND max(s.kind) IN ('function', 'class') ORDER BY s.name")
    rows = [r for r in rows if len(r[0]) > 6 and not r[0].startswith('_')]
    sample = random.Random(3).sample(rows, 40)
    stdlib.search_index(wait=True)
    misses = [(name, path, stdlib.search(name, 1)[0]['path']) for name, path in sample if stdlib.search(name, 1)[0]['path'] != path]
    assert not misses, misses


def test_stdlib_structure_keeps_the_most_referenced_within_budget(stdlib, tmp_path):
    rank = stdlib.ranking()
    budget = 4_000
    text = stdlib.tree(budget=budget)
    assert len(text) <= budget
    mem = stdlib.all_symbols()
    top = [mem[f][j] for f, j, _ in rank.order[:8]]
    for r in top: assert f'{r[6]}  L{r[3]}' in text, (r, text[:500])
    # the ranked first are referenced far more than the index's typical definition
    def uses(name): return sum(l.count(',') + 1 for (l,) in stdlib._rows('SELECT lines FROM refs WHERE name=? AND kind < 2', (name,)))
    ranked = sorted(uses(r[1]) for r in top)
    everyone = sorted(uses(r[1]) for rows in random.Random(1).sample(list(mem.values()), 200) for r in rows[:1])
    assert ranked[len(ranked) // 2] > 5 * everyone[len(everyone) // 2], (ranked, everyone)
    # and the workspace section stays within its budget
    wm = WorkspaceManager(tmp_path, budgets=dict(STRUCTURAL_VIEW=1_000))
    ws = wm.open_workspace('w')
    ws.code_map['on'] = True
    import headlesnb.workspace.codemap as cmod
    cmod._OPEN[str(tmp_path.resolve())] = stdlib  # this workspace's root maps to the standard library's index
    try:
        sec = dict(ws.sections())
        assert 'STRUCTURAL_VIEW' in sec['WORKSPACE_STATUS'] and 'cut from' not in sec['WORKSPACE_STATUS'].split('|')[0], sec['WORKSPACE_STATUS']
        assert wm.count(sec['STRUCTURAL_VIEW']) <= 1_000
        assert f'{top[0][6]}  L{top[0][3]}' in sec['STRUCTURAL_VIEW']
    finally: del cmod._OPEN[str(tmp_path.resolve())]


EXPECTED = {  # qualified name: (kind, file, first line) in the fixture tree
    'shapes.base.Shape': ('class', 'py/shapes/base.py', 4),
    'shapes.base.total_area': ('function', 'py/shapes/base.py', 16),
    'shapes.round.Ring.area': ('method', 'py/shapes/round.py', 23),
    'web/util.clamp': ('function', 'web/util.js', 4),
    'web/util.Counter.bump': ('method', 'web/util.js', 11),
    'web/util.double': ('function', 'web/util.js', 14),
    'web/router.Router.handle': ('method', 'web/router.ts', 16),
    'web/router.Handler': ('interface', 'web/router.ts', 4),
    'go/server.Server.Start': ('method', 'go/server/server.go', 14),
    'go/server.New': ('function', 'go/server/server.go', 20),
    'rust/src/lib.Stack.push': ('method', 'rust/src/lib.rs', 15),
    'rust/src/lib.Area': ('trait', 'rust/src/lib.rs', 21),
    'com.example.Greeter.greet': ('method', 'java/com/example/Greeter.java', 14),
    'c/list.list_len': ('function', 'c/list.c', 5),
    'c/list.node': ('struct', 'c/list.h', 4),
    'cpp/shapes.geo.Square.area': ('method', 'cpp/shapes.cpp', 15),
    'cpp/shapes.total': ('function', 'cpp/shapes.cpp', 21),
    'broken.StillFound.method': ('method', 'py/broken.py', 8),
}


def test_fixture_languages(tree):
    cm = CodeMap(tree)
    res = cm.refresh()
    paths = set(cm.known)
    assert 'ignored/hidden.py' not in paths and lang_of('ignored/hidden.py') == 'python'  # git ignores it
    assert res['files'] == len(paths) == 14
    for q, (kind, path, line) in EXPECTED.items():
        s = cm.find(q)
        assert (s.kind, s.path, s.start) == (kind, path, line), q
    assert cm.find('Greeter.greet').doc == 'Greet one person.' and cm.find('list_len').doc == 'Number of nodes from n on.'
    assert cm.find('Stack.push').doc == 'Push one item.' and cm.find('Server.Start').sig == 'func (s *Server) Start() error'
    assert cm.find('Circle.diameter').top == 9  # its decorator
    nb = cm.find('unit_circle')
    assert (nb.path, nb.cell, nb.start, nb.end, nb.doc) == ('nb/demo.ipynb', 'helpers', 1, 3, 'A circle of radius 1.')
    notes = dict(cm._rows('SELECT path, note FROM files'))
    assert notes['py/blob.py'] == 'binary' and 'syntax' in notes['py/broken.py'] and not notes['web/util.js']
    with pytest.raises(NotFoundError): cm.find('never_indexed')
    # graph questions across languages
    assert {c['caller'] for c in cm.callers('clamp')} == {'web/router.Router.handle', 'web/util.Counter.bump'}
    assert {s['qname'] for s in cm.subclasses('Shape')} == {'shapes.round.Circle', 'shapes.round.Ring', 'cpp/shapes.geo.Square'}
    assert {s['qname'] for s in cm.subclasses('Display')} == {'rust/src/lib.Stack'}
    assert {i['path'] for i in cm.imports('shapes.base')['imported_by']} == {'py/shapes/__init__.py', 'py/shapes/round.py'}
    assert [i['path'] for i in cm.imports('web/util.js')['imported_by']] == ['web/router.ts']
    assert [i['path'] for i in cm.imports('c/list.h')['imported_by']] == ['c/list.c']
    assert {'Circle', 'area', 'super'} <= {c['name'] for c in cm.callees('Ring.area')}
    assert {r['loc'] for r in cm.references('Circle') if r['kind'] == 'call'} == {'py/shapes/round.py:24', 'nb/demo.ipynb cell helpers:3'}
    cm.close()


def test_edit_reindexes_one_file_and_restart_is_warm(tree):
    cm = CodeMap(tree)
    cm.refresh()
    parsed = []
    orig = cm._parse_all
    cm._parse_all = lambda jobs, progress=None: (parsed.extend(j[1] for j in jobs), orig(jobs, progress))[1]
    wm = WorkspaceManager(tree)
    ws = wm.open_workspace('w')
    import headlesnb.workspace.codemap as cmod
    cmod._OPEN[str(tree.resolve())] = cm
    try:
        p = tree / 'py/shapes/round.py'
        p.write_text(p.read_text().replace('def rings_area(rings):\n    return total_area(rings)',
                                           '\n\ndef rings_area(rings):\n    "Total area of rings."\n    return total_area(rings) + total_area([])'))
        r = ws.open_frame('rings_area')
        assert parsed == ['py/shapes/round.py']  # the rest was not parsed again
        w = ws.files[r['id']]
        assert (w.start, w.end, w.lines[1].strip()) == (29, 31, '"Total area of rings."')
        calls = [x['loc'] for x in cm.references('total_area') if x['kind'] == 'call']
        assert calls == ['py/shapes/round.py:31'], calls
        ws.references('total_area')
        listing = list(ws.tool_windows.values())[-1].output
        assert 'py/shapes/round.py:31 [call] in shapes.round.rings_area: return total_area(rings) + total_area([])' in listing, listing
    finally: del cmod._OPEN[str(tree.resolve())]
    cm.close()
    # a restart reads the index back: nothing parsed again
    again = CodeMap(tree)
    parsed.clear()
    orig2 = again._parse_all
    again._parse_all = lambda jobs, progress=None: (parsed.extend(j[1] for j in jobs), orig2(jobs, progress))[1]
    assert again.refresh()['changed'] == 0 and parsed == []
    assert again.find('rings_area').start == 29
    again.close()


def test_fresh_workspace_maps_code_without_a_call(tree):
    "A fresh process: a workspace over a code folder says its map is being built, then shows it, with no code-map tool called"
    code = textwrap.dedent(f"""
        import time
        from headlesnb.workspace import WorkspaceManager
        ws = WorkspaceManager({str(tree)!r}).open_workspace('w')
        first = dict(ws.sections())['STRUCTURAL_VIEW']
        assert first.startswith('(being built in the background'), first
        for _ in range(600):
            text = dict(ws.sections())['STRUCTURAL_VIEW']
            if not text.startswith('(being built'): break
            time.sleep(0.2)
        print(text)
        """)
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    assert ' files, ' in out.stdout and 'class Ring(Circle)  L17-24' in out.stdout and 'func (s *Server) Start() error' in out.stdout, out.stdout
    assert not (tree / 'w.workspace.json').exists()  # rendering changed no state
    assert CodeMap(tree).counts()['files'] > 5  # the index is on disk: a restart catches up, it does not rebuild


def test_workspace_off_costs_nothing(tree):
    "A workspace with the code map off renders one line and imports no parser, scorer or graph library"
    code = textwrap.dedent(f"""
        import sys, headlesnb
        from headlesnb.workspace import WorkspaceManager
        from headlesnb.workspace.structure import OFF
        ws = WorkspaceManager({str(tree)!r}, code_map=False).open_workspace('w')
        text = dict(ws.sections())['STRUCTURAL_VIEW']
        assert text == OFF, text
        print(sorted(m for m in sys.modules if m.split('.')[0] in ('tree_sitter', 'tree_sitter_language_pack', 'bm25s', 'networkx', 'scipy')))
        """)
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '[]'
    assert not (tree / '.headlesnb').exists()


def _built(ws, timeout=120):
    from headlesnb.workspace import structure as ws_structure
    b = ws_structure._BUILDS.get(str(ws.root))
    if b is not None: assert b.wait(timeout)
    return dict(ws.sections())['STRUCTURAL_VIEW']


def test_views_off_on_and_above_the_size_limit(tree, monkeypatch):
    from headlesnb.workspace import structure as ws_structure
    monkeypatch.setattr(ws_structure, 'MAX_FILES', 3)
    ws = WorkspaceManager(tree).open_workspace('w')
    dict(ws.sections())
    assert _built(ws) == "(off: more than 3 code files under the root; structure(operation='on') maps them anyway)"
    assert not (tree / '.headlesnb').exists()  # nothing indexed
    assert ws.tools()['structure']('on') == 'STRUCTURAL_VIEW on (the map shows there once built)'
    dict(ws.sections())  # asks for the build again, without the limit
    assert 'class Ring(Circle)' in _built(ws)
    assert ws.tools()['structure']('off') == 'STRUCTURAL_VIEW off'
    assert dict(ws.sections())['STRUCTURAL_VIEW'] == ws_structure.OFF
    with pytest.raises(BadArgumentError, match='operation must be'): ws.structure('hide')
    ws.mgr.close_workspace('w')  # (one manager at a time may change a workspace)
    ws2 = WorkspaceManager(tree).open_workspace('w')  # the view is kept with the workspace
    assert ws2.code_map['view'] == 'off' and ws2.info()['code_map'] == 'off'
    with pytest.raises(BadArgumentError, match='code_map must be'): WorkspaceManager(tree, code_map='yes')


def _nbdev_tree(root: Path):
    "An nbdev project as nbdev 3 writes it: a notebook and the module exported from it"
    cells = [dict(cell_type='markdown', id='m0', metadata={}, source='# Core'),
             dict(cell_type='code', id='c1', metadata={}, outputs=[], execution_count=None, source='#| default_exp core'),
             dict(cell_type='code', id='c2', metadata={}, outputs=[], execution_count=None,
                  source='#| export\ndef hello(n):\n    "Say hello."\n    return f"hello {n}"'),
             dict(cell_type='code', id='c3', metadata={}, outputs=[], execution_count=None,
                  source='#| export\n#| hide\nclass Greeter:\n    def greet(self, n): return hello(n)'),
             dict(cell_type='code', id='c4', metadata={}, outputs=[], execution_count=None, source='assert hello(1) == "hello 1"')]
    (root / 'nbs').mkdir(); (root / 'lib').mkdir()
    (root / 'nbs' / '00_core.ipynb').write_text(json.dumps(dict(cells=cells, metadata={}, nbformat=4, nbformat_minor=5)))
    (root / 'lib' / '__init__.py').write_text('')
    (root / 'lib' / 'core.py').write_text(
        '"""Core."""\n\n# AUTOGENERATED! DO NOT EDIT! File to edit: ../nbs/00_core.ipynb.\n\n'
        "# %% auto #0\n__all__ = ['hello', 'Greeter']\n\n"
        '# %% ../nbs/00_core.ipynb #c2\ndef hello(n):\n    "Say hello."\n    return f"hello {n}"\n\n'
        '# %% ../nbs/00_core.ipynb #c3\nclass Greeter:\n    def greet(self, n): return hello(n)\n')
    (root / 'app.py').write_text('from lib.core import hello\n\nprint(hello(2))\n')


def test_nbdev_symbols_once_at_the_notebook_cell(tmp_path):
    _nbdev_tree(tmp_path)
    cm = CodeMap(tmp_path)
    cm.refresh()
    lines = (tmp_path / 'lib' / 'core.py').read_text().splitlines()
    s = cm.find('hello')  # one symbol, not two: the notebook's cell, with the module's line
    assert (s.qname, s.path, s.cell, s.start, s.module) == ('lib.core.hello', 'nbs/00_core.ipynb', 'c2', 2, 'lib/core.py:9')
    assert lines[8] == 'def hello(n):'
    g = cm.find('lib.core.Greeter.greet')
    assert (g.path, g.cell, g.module) == ('nbs/00_core.ipynb', 'c3', 'lib/core.py:15') and lines[14].strip().startswith('def greet')
    text = cm.tree(budget=5000)
    assert text.count('def hello(n)') == 1 and 'def hello(n)  cell c2 L2-4 → core.py:9' in text, text
    assert '00_core.ipynb  [lib.core: edit here, not lib/core.py]' in text, text
    hits = [h for h in cm.search('hello', 10) if h['kind'] == 'symbol' and h['qual'] == 'hello']
    assert [(h['qname'], h['path'], h['module']) for h in hits] == [('lib.core.hello', 'nbs/00_core.ipynb', 'lib/core.py:9')], hits
    refs = cm.references('hello')
    assert [(r['loc'], r['module']) for r in refs if r['kind'] == 'call'] == [
        ('app.py:3', None), ('nbs/00_core.ipynb cell c3:4', 'lib/core.py:15'), ('nbs/00_core.ipynb cell c4:1', None)], refs
    assert not [r for r in refs if r['path'] == 'lib/core.py']
    assert sorted((c['caller'], c['path']) for c in cm.callers('hello')) == [
        ('app', 'app.py'), ('lib.core', 'nbs/00_core.ipynb'), ('lib.core.Greeter.greet', 'nbs/00_core.ipynb')], cm.callers('hello')
    assert [i['path'] for i in cm.imports('lib.core')['imported_by']] == ['app.py']
    assert [x.name for x in cm.outline('lib.core')] == ['hello', 'Greeter', 'greet']  # the module name is the notebook's
    # a workspace's frame opens the notebook cell
    wm = WorkspaceManager(tmp_path)
    import headlesnb.workspace.codemap as cmod
    cmod._OPEN[str(tmp_path.resolve())] = cm
    try:
        line = wm.open_workspace('w').tools()['open_frame']('hello')
        assert line == 'opened f1: lib.core.hello (function), nbs/00_core.ipynb lines 2-4; exported to lib/core.py:9', line
    finally: del cmod._OPEN[str(tmp_path.resolve())]
    # the module edited away from its notebook: a symbol only the module has stays shown there
    p = tmp_path / 'lib' / 'core.py'
    p.write_text(p.read_text() + '\ndef only_here(): pass\n')
    cm.refresh()
    assert cm.find('only_here').path == 'lib/core.py'
    assert [r[0] for r in cm.all_symbols()[cm.known['lib/core.py'][0]]] == ['__all__', 'only_here']  # (the tree's rows)
    cm.close()


def test_workspace_tools_state_and_dialog(tree):
    from headlesnb.dialog import DialogManager
    wm = WorkspaceManager(tree)
    ws = wm.open_workspace('w')
    t = ws.tools()
    assert t['structure']('expand', path='py/shapes/round.py') == 'expanded py/shapes/round.py in STRUCTURAL_VIEW'
    assert t['structure']('collapse', path='Circle') == 'collapsed py/shapes/round.py::Circle in STRUCTURAL_VIEW'
    assert t['open_frame']('Greeter.greet').startswith('opened f')
    with pytest.raises(BadArgumentError, match='ambiguous'): t['open_frame']('area')
    assert t['open_frame']('unit_circle') == 'opened f2: nb/demo.unit_circle (function), nb/demo.ipynb lines 1-3'
    w = ws.files['f2']  # a symbol in a notebook: a window on its cell
    assert (w.kind, w.meta['id'], w.lines[2].strip()) == ('cell', 'helpers', 'return Circle(1)')
    with pytest.raises(Exception, match='outside|escapes|root'): t['structure']('expand', path='../..')
    for name, arg in [('references', 'clamp'), ('callers', 'clamp'), ('callees', 'Ring.area'), ('subclasses', 'Shape'),
                      ('imports', 'shapes.base'), ('search', 'stack push'), ('show_structure', 'py/shapes/base.py')]:
        line = t[name](arg)
        assert '\n' not in line and ' t' in line, (name, line)
    assert 'def total_area(shapes) -> float  L16-18  # Sum of the areas of `shapes`.' in list(ws.tool_windows.values())[-1].output
    wm.close_workspace('w')
    ws = WorkspaceManager(tree).open_workspace('w')
    assert ws.code_map['expanded'] == ['py/shapes/round.py'] and ws.code_map['collapsed'] == ['py/shapes/round.py::Circle']
    text = dict(ws.sections())['STRUCTURAL_VIEW']
    assert 'class Ring(Circle)  L17-24' in text and 'def diameter(self)' not in text, text
    # a dialog's prompt gets the section like the others
    dm = DialogManager(tree)
    wm2 = WorkspaceManager(tree)
    wm2.attach(dm)
    dm.use_dialog('d', 'd.ipynb', mode='create')
    secs = dict(s for p in dm.section_providers for s in p('d'))
    assert 'STRUCTURAL_VIEW' in secs and 'structure' in wm2.for_dialog('d', dm).tools()


def test_mcp_tools(tree):
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    async def main():
        params = StdioServerParameters(command=sys.executable, args=['-m', 'headlesnb.fronts.mcp', '--root', str(tree)], env=dict(os.environ))
        with open(os.devnull, 'w') as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                names = {t.name for t in (await s.list_tools()).tools}
                assert {'structure', 'open_frame', 'references', 'callers', 'callees', 'subclasses', 'imports', 'search', 'show_structure'} <= names
                res = await s.call_tool('open_frame', dict(name='Server.Start'))
                assert not res.is_error and res.content[0].text.startswith('opened f'), res
                res = await s.call_tool('open_frame', dict(name='area'))
                assert res.is_error and 'ambiguous' in res.content[0].text and '\n' not in res.content[0].text
                res = await s.call_tool('search', dict(query='clamp', k=3))
                assert not res.is_error and 'best web/util.clamp' in res.content[0].text, res
                view = (await s.call_tool('workspace_view', {})).content[0].text
                assert '---STRUCTURAL_VIEW' in view and 'func (s *Server) Start() error' in view
    anyio.run(main)


SCRIPT = '''
import os, sys
from headlesnb.workspace.codemap import CodeMap
print('body', os.getpid(), flush=True)
cm = CodeMap(sys.argv[1] if len(sys.argv) > 1 else os.environ['SRC'], db=os.environ['DB'], workers=2)
print(cm.refresh()['changed'], cm.find('f249').path, flush=True)
'''

@pytest.mark.parametrize('how', ['file', 'stdin'])
def test_worker_processes_never_run_the_callers_script(tmp_path, how):
    "A cold build in worker processes from a script with no `__main__` guard, or read from stdin: the body runs once"
    src, cwd, scripts = tmp_path / 'src', tmp_path / 'cwd', tmp_path / 'scripts'
    for d in (src, cwd, scripts): d.mkdir()
    for i in range(250): (src / f'm{i}.py').write_text(f'def f{i}(x):\n    return x + {i}\n')
    (scripts / 's.py').write_text(SCRIPT)
    if how == 'file':  # the workers run in this folder, which is not on the script's path: nothing in it is imported
        for m in ('json', 'pickle'): (cwd / f'{m}.py').write_text('raise SystemExit("a module in the current folder was imported")\n')
    env = {**os.environ, 'SRC': str(src), 'DB': str(tmp_path / 'cm.sqlite')}
    # -X dev: the pipes to the workers are closed, not left to the collector (a ResourceWarning each)
    args, inp = ([sys.executable, '-X', 'dev', str(scripts / 's.py'), str(src)], None) if how == 'file' else ([sys.executable, '-'], SCRIPT)
    r = subprocess.run(args, input=inp, capture_output=True, text=True, cwd=cwd, env=env, timeout=240)
    assert r.returncode == 0 and 'ResourceWarning' not in r.stderr, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert len([l for l in lines if l.startswith('body')]) == 1 and lines[-1] == '250 m249.py', r.stdout
