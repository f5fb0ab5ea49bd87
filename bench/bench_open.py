"""Benchmark: open a 5000-cell notebook (`use_notebook` connect with a fresh NotebookManager each time) and read
one cell, vs plain `json.load` of the same file. Prints medians and the ratio (target < 3x). No asserts.
Run `python bench/bench_open.py`.
"""
import json, statistics, sys, tempfile, time
from pathlib import Path

import nbformat
from headlesnb.notebook import NotebookManager

N_CELLS, REPEATS = 5000, 9


def make_nb(path: Path):
    cells = []
    for i in range(N_CELLS):
        if i % 4 == 3: cells.append(nbformat.v4.new_markdown_cell(f'## Section {i}\nSome *text* about step {i}.\n- a\n- b'))
        else:
            outs = [nbformat.v4.new_output('stream', name='stdout', text=f'{i}\n{i * 2}\n')] if i % 2 else []
            cells.append(nbformat.v4.new_code_cell(f'x_{i} = {i}\nfor k in range(3):\n    print(x_{i} * k)', outputs=outs, execution_count=i))
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def main():
    with tempfile.TemporaryDirectory() as d:
        d = Path(d); path = d / 'big.ipynb'
        make_nb(path)
        opens, loads = [], []
        for _ in range(REPEATS):
            t = time.perf_counter()
            with open(path) as f: nb = json.load(f)
            _ = nb['cells'][N_CELLS // 2]['source']
            loads.append(time.perf_counter() - t)

            t = time.perf_counter()
            m = NotebookManager(d, save_delay=3600)
            m.use_notebook('big', mode='connect')
            c = m.read_cell(N_CELLS // 2, notebook_name='big')
            opens.append(time.perf_counter() - t)
            assert c['source'].startswith(f'x_{N_CELLS // 2} ='), c  # the right cell was read
            m.close_all()
        med = statistics.median
        ms = lambda s: f'{s * 1000:8.2f} ms'
        print(f'bench_open: {N_CELLS}-cell notebook ({path.stat().st_size / 2**20:.1f} MiB), median of {REPEATS} (python {sys.version.split()[0]})')
        print(f'  json.load                         {ms(med(loads))}')
        print(f'  use_notebook(connect) + read_cell {ms(med(opens))}')
        print(f'  ratio                             {med(opens) / med(loads):8.2f} x   (target < 3x)')


if __name__ == '__main__': main()
