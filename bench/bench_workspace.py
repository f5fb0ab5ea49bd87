"""Benchmark: rendering a workspace of 50 file windows x 100 lines, against reading those line ranges from disk.

A workspace is rendered before every request of a prompt's tool loop, so rendering must cost about what
reading the same lines from disk would (target: render / baseline <= 3x).

Prints, each as the median of REPEATS runs:
- baseline: for each window, open its file, read it, split it into lines and take the window's 100 lines;
- render: `Workspace.render()` of the whole workspace (a `stat` per window to notice changed files, the
  status line, every section counted against its budget; FILE_WINDOWS' budget is raised so nothing is cut);
- render with the default budgets (FILE_WINDOWS is then cut to 20,000 tokens with a marker);
- a cold render (every window re-read first with `update_window`, so no cached text is reused);
and the ratio render / baseline.

Searches (`grep`, `open_search`) run the model's pattern as a `SafePattern` (the `regex` package, under a time
limit, without holding the GIL), one call per file. Their figure: `grep` over the same 50 files (500 lines each,
one match in every file), against a baseline of the stdlib `re` searching each line of those files; `grep` also keeps
its result (the workspace's state file is written, with an fsync), so the search alone is timed too.
No asserts: run `python bench/bench_workspace.py` from the repo root.
"""
import random, re, statistics, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's headlesnb, whatever is installed
from headlesnb.workspace import WorkspaceManager

N_WINDOWS, LINES, FILE_LINES, REPEATS = 50, 100, 500, 50


def make_files(root: Path) -> list:
    rnd = random.Random(0)
    spans = []
    for i in range(N_WINDOWS):
        p = root / 'src' / f'mod_{i:02d}.py'
        p.parent.mkdir(exist_ok=True)
        p.write_text(''.join(f'    value_{k} = compute(arg_{k}, {rnd.randint(0, 10**6)})  # line {k}\n' for k in range(1, FILE_LINES + 1)))
        start = rnd.randint(1, FILE_LINES - LINES + 1)
        spans.append((p, start, start + LINES - 1))
    return spans


def baseline(spans) -> int:
    n = 0
    for p, s, e in spans:
        with open(p, encoding='utf-8') as f: lines = f.read().split('\n')
        n += len('\n'.join(lines[s - 1:e]))
    return n


def re_scan(root: Path, pattern: str) -> int:
    "The baseline of a search: read every file and search each of its lines with the stdlib `re`"
    pat, n = re.compile(pattern), 0
    for p in sorted((root / 'src').glob('*.py')):
        n += sum(1 for l in p.read_text().split('\n') if pat.search(l))
    return n


def median_time(fn, repeats=REPEATS) -> float:
    ts = []
    for _ in range(repeats):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    root = Path(tempfile.mkdtemp())
    spans = make_files(root)
    ws = WorkspaceManager(root, budgets={'FILE_WINDOWS': 1_000_000}).open_workspace('bench')
    for p, s, e in spans: ws.open_range(p.relative_to(root).as_posix(), s, e)
    text = ws.render()
    assert all(f'---FILE_WINDOW_f{i}' in text for i in range(1, N_WINDOWS + 1))
    ws_default = WorkspaceManager(root).open_workspace('bench_default')
    for p, s, e in spans: ws_default.open_range(p.relative_to(root).as_posix(), s, e)

    base = median_time(lambda: baseline(spans))
    rend = median_time(ws.render)
    rend_default = median_time(ws_default.render)

    def cold():
        for wid in list(ws.files): ws.files[wid].body = None
        ws.render()
    cold_t = median_time(cold)

    def reread_and_render():
        for wid in list(ws.files): ws.update_window(wid)  # re-reads every range (and saves the state each time)
        ws.render()
    reread = median_time(reread_and_render, 10)

    print(f'workspace: {N_WINDOWS} file windows x {LINES} lines ({len(text):,} characters rendered, ~{len(text) // 4:,} tokens)')
    print(f'baseline (read the {N_WINDOWS} ranges from disk): median {base * 1e3:8.3f} ms')
    print(f'render (whole workspace, nothing cut):          median {rend * 1e3:8.3f} ms   ratio render/baseline = {rend / base:.2f}x (target <= 3x)')
    print(f'render with default budgets (FILE_WINDOWS cut): median {rend_default * 1e3:8.3f} ms   ratio {rend_default / base:.2f}x')
    print(f'cold render (window text rebuilt, no file I/O): median {cold_t * 1e3:8.3f} ms   ratio {cold_t / base:.2f}x')
    pattern = r'value_250 = compute\(arg_250'
    assert re_scan(root, pattern) == N_WINDOWS and ws.grep(pattern, 'src')['matches'] == N_WINDOWS
    scan = median_time(lambda: re_scan(root, pattern), 20)
    grep = median_time(lambda: ws.grep(pattern, 'src'), 20)
    search = median_time(lambda: list(ws._scan(pattern, 'src')), 20)
    print(f'baseline (stdlib re, line by line, {N_WINDOWS} files x {FILE_LINES} lines): median {scan * 1e3:8.3f} ms')
    print(f'grep (SafePattern, time-limited, one call per file): median {grep * 1e3:8.3f} ms   ratio grep/baseline = {grep / scan:.2f}x')
    print(f'the search alone (no result kept):                  median {search * 1e3:8.3f} ms   ratio {search / scan:.2f}x')
    print(f'update_window x {N_WINDOWS} + render (re-read all, state saved each time): median {reread * 1e3:8.3f} ms')


if __name__ == '__main__':
    main()
