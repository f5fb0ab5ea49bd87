"""Benchmark: the first render of a workspace over a 2,000-file code tree while its code map builds in the background,
against a render of the same workspace with the map off (target: at most 1.2x).

Each repeat starts from nothing: the tree's index removed, this process's map and build forgotten, a new
WorkspaceManager and workspace; the render with the map off is timed after the same steps in each repeat (index
removed, one untimed render with the map off), so both are timed in the same state. Timed: `open_workspace` + `render()` (every section, the status line).
- off: `WorkspaceManager(root, code_map=False)`, STRUCTURAL_VIEW one line;
- first: the default manager: the render that asks for the background build (the section says it is being built);
- during: renders while that build runs (the section shows its progress), one every 20 ms, against renders with the
  map off one every 20 ms with no build (a render after a pause is slower than one right after another);
- the first render ever in this process is printed apart: it also starts the builder thread (once a process);
- after: the first render that shows the map once the build is done (ranked by the builder), and how long the build took;
  the search index made after it (in a thread) is waited for before the next repeat, so no repeat overlaps another's work.
Prints medians over REPEATS and the ratios first/off and during/off. No asserts: `python bench/bench_structure.py`.
"""
import shutil, statistics, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's headlesnb, whatever is installed
from headlesnb.workspace import WorkspaceManager
from headlesnb.workspace import structure as ws_structure

N_FILES, REPEATS = 2_000, 15


def make_tree(root: Path):
    "N_FILES Python files in 40 packages, each with a class, methods and functions calling into other files"
    for i in range(N_FILES):
        pkg = root / f'pkg{i % 40:02d}'
        pkg.mkdir(exist_ok=True)
        (pkg / '__init__.py').touch()
        j = (i * 7 + 3) % N_FILES
        (pkg / f'mod{i:04d}.py').write_text(
            f'from pkg{j % 40:02d}.mod{j:04d} import helper_{j}\n\n'
            f'class Thing{i}:\n    "Thing number {i}."\n    def __init__(self, x): self.x = x\n'
            f'    def value(self): return helper_{j}(self.x) + {i}\n\n'
            f'def helper_{i}(x):\n    "Help with {i}."\n    return x * {i}\n\n'
            f'def run_{i}(n):\n    return [Thing{i}(k).value() for k in range(n)]\n')


def timed(wm: WorkspaceManager, name: str) -> tuple:
    t = time.perf_counter()
    text = dict(wm.open_workspace(name).sections())['STRUCTURAL_VIEW']
    return time.perf_counter() - t, text


def forget(root: Path):
    "This process's map and build of `root` gone, and its index on disk"
    import headlesnb.workspace.codemap as cm
    key = str(root.resolve())
    if (m := cm._OPEN.pop(key, None)) is not None: m.close()
    ws_structure._BUILDS.pop(key, None)
    shutil.rmtree(root / '.headlesnb', ignore_errors=True)
    for p in root.glob('*.workspace.json'): p.unlink()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        make_tree(root)
        off, first, during, after, builds, very_first = [], [], [], [], [], None
        off_paused, by_state = [], {}  # renders while the map builds, by how far the build got
        for r in range(REPEATS):
            wm_off = WorkspaceManager(root, code_map=False)
            for i in range(20):  # the baseline of `during`: renders after the same 20 ms pause, with no build
                time.sleep(0.02)
                off_paused.append(timed(wm_off, f'paused{r}')[0])
            for what in ('off', 'first'):  # the same steps before either: the index removed, then one untimed render (map off)
                forget(root)
                timed(WorkspaceManager(root, code_map=False), f'warm{r}{what}')
                if what == 'off': off.append(timed(WorkspaceManager(root, code_map=False), f'off{r}')[0])
            wm = WorkspaceManager(root)
            t0 = time.perf_counter()
            dt, text = timed(wm, f'first{r}')
            assert text.startswith('(being built'), text
            if very_first is None: very_first = dt
            else: first.append(dt)
            b = ws_structure._BUILDS[str(root)]
            while not b.finished:
                dt, text = timed(wm, f'during{r}')
                if text.startswith('(being built'):
                    during.append(dt)
                    by_state.setdefault('ranking' if 'ranking' in text else 'parsing' if 'parsed' in text else 'listing', []).append(dt)
                time.sleep(0.02)
            builds.append(time.perf_counter() - t0)
            assert b.state == 'ready', b
            dt, text = timed(wm, f'after{r}')
            assert ' files, ' in text and 'symbols' in text, text[:200]
            after.append(dt)
            import headlesnb.workspace.codemap as cm
            m = cm._OPEN[str(root)]
            for t in (m._prep, m._search_thread):  # the ranking and search index made after the build: done before the next repeat
                if t is not None: t.join()
        med = lambda xs: statistics.median(xs) * 1e3
        print(f'{N_FILES} files, {REPEATS} repeats (medians; ms)')
        print(f'off:     {med(off):.3f}  (render with the map off)')
        print(f'first:   {med(first):.3f}  (first render, asks for the background build)  ratio first/off {med(first) / med(off):.2f}x (target <= 1.2x)')
        print(f'during:  {med(during):.3f}  ({len(during)} renders while the map builds)  ratio during/off {med(during) / med(off_paused):.2f}x')
        print(f'         against renders with the map off 20 ms apart (a pause alone makes a render slower): {med(off_paused):.3f}')
        print('during, by state: ' + ', '.join(f'{k} {med(v):.3f} ({len(v)})' for k, v in by_state.items()))
        print('first renders, each (ms): ' + ' '.join(f'{x * 1e3:.3f}' for x in first))
        print('off renders, each (ms):   ' + ' '.join(f'{x * 1e3:.3f}' for x in off[1:]))
        print(f'first render in this process (starts the builder thread): {very_first * 1e3:.3f}')
        print(f'after:   {med(after):.3f}  (first render showing the map)')
        print(f'build:   {statistics.median(builds):.2f} s (background, from the first render to ready)')


if __name__ == '__main__':
    main()
