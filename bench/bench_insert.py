"""Benchmark: 1000 `insert_cell` appends then `save`, with the default save_delay (coalesced autosaves).

Prints:
- the time of the first 100 inserts and of the last 100, and their ratio (target <= 1.5x: an append must not
  cost more as the notebook grows);
- the whole run (1000 inserts + final save);
- the time of 1000 full `fastcore.nbio.write_nb` calls of the final notebook (baseline measured in the same run),
  and whole run / baseline (target < 10%: a burst of edits must not cost one full write per edit).
Insert figures are medians of REPEATS runs; the baseline is one series of N calls (N x its median call). No asserts: run `python bench/bench_insert.py`.
"""
import statistics, sys, tempfile, time
from pathlib import Path

from fastcore.nbio import read_nb, write_nb
from headlesnb.errors import ConflictError
from headlesnb.notebook import NotebookManager

N, K, REPEATS = 1000, 100, 5


def src(i): return f'# cell {i}\nimport math\nx_{i} = math.sqrt({i})\nprint(f"{{x_{i}:.3f}}")\n'


def one_run(d: Path):
    m = NotebookManager(d)  # default save_delay
    m.use_notebook('nb', mode='create')
    per, conflicts = [], 0
    t0 = time.perf_counter()
    for i in range(N):
        while True:
            t = time.perf_counter()
            try: m.insert_cell(-1, 'code', src(i), notebook_name='nb')
            except ConflictError: conflicts += 1; continue  # spurious conflict with our own autosave (a known bug): retry
            per.append(time.perf_counter() - t); break
    m.save('nb')
    total = time.perf_counter() - t0
    m.close_all()
    return sum(per[:K]), sum(per[-K:]), total, conflicts


def baseline(path: Path, out: Path):
    "Times of N full write_nb calls of the final notebook (the target is removed first, or write_nb would skip an identical write)"
    nb = read_nb(path)
    per = []
    for _ in range(N):
        out.unlink(missing_ok=True)
        t = time.perf_counter(); write_nb(nb, out); per.append(time.perf_counter() - t)
    return per


def main():
    firsts, lasts, totals, conflicts = [], [], [], 0
    for r in range(REPEATS):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            f, l, tot, c = one_run(d)
            firsts.append(f); lasts.append(l); totals.append(tot); conflicts += c
            if r == 0:  # the baseline is slow (~20 ms a call): one series of N calls; its median call gives a robust total
                per = baseline(d / 'nb.ipynb', d / 'copy.ipynb')
                size = (d / 'nb.ipynb').stat().st_size
    med = statistics.median
    base_sum, base_med = sum(per), N * med(per)
    ms = lambda s: f'{s * 1000:9.2f} ms'
    print(f'bench_insert: {N} insert_cell appends + save, median of {REPEATS} runs (python {sys.version.split()[0]})')
    print(f'  first {K} inserts      {ms(med(firsts))}')
    print(f'  last {K} inserts       {ms(med(lasts))}')
    print(f'  last/first ratio       {med(l / f for f, l in zip(firsts, lasts)):9.2f} x   (target <= 1.5x)')
    print(f'  whole run              {ms(med(totals))}   (final notebook {size / 1024:.0f} KiB)')
    print(f'  {N} x write_nb         {ms(base_sum)}   (baseline, same run; {N} x median call = {base_med * 1000:.2f} ms)')
    print(f'  whole run / baseline   {100 * med(totals) / base_med:9.2f} %   (target < 10%)')
    if conflicts: print(f'  note: {conflicts} spurious ConflictError(s) from our own autosave were retried')


if __name__ == '__main__': main()
