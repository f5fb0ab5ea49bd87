"""Benchmark: headlesnb editing a notebook that is open in JupyterLab (jupyter-collaboration 5, its page in headless Chromium).

Prints, each from one run that measures both routes on the same notebook and the same page:
- an edit (`overwrite_cell_source`), from the call to the page showing it: through the server's shared document, and
  through the file (headlesnb without a Jupyter server: the server's file watcher loads the write into the page);
  medians of N edits and their ratio (target: shared at most 0.5 s);
- `insert_cell` with the notebook open in JupyterLab, against the same call on a file (no server); medians of M calls
  of each, interleaved, and their ratio (target at most 2x): durable (as the MCP server answers: acknowledged by the
  server / fsync'd on disk), then not durable (the Python API's default: the file is written by the autosaver later).
Needs the JupyterLab venv tests/setup.sh builds (HEADLESNB_JLAB_VENV) and /usr/bin/chromium. No asserts: run
`python bench/bench_jupyterlab.py`.
"""
import os, secrets, signal, statistics, subprocess, sys, tempfile, time
from pathlib import Path

import httpx, nbformat
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import sync_playwright
from headlesnb.notebook import NotebookManager

JLAB_VENV = Path(os.environ.get('HEADLESNB_JLAB_VENV', Path.home() / '.cache/headlesnb/jlab-venv-4.6.6'))
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
                 '--disable-component-update', '--disable-sync']
N, M, CELLS = 8, 200, 20

def free_port():
    import socket
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def start_lab(root:Path):
    token, port = secrets.token_hex(12), free_port()
    p = subprocess.Popen([str(JLAB_VENV / 'bin' / 'jupyter-lab'), '--no-browser', '--allow-root', f'--IdentityProvider.token={token}',
                          '--ServerApp.ip=127.0.0.1', f'--ServerApp.port={port}', f'--ServerApp.root_dir={root}',
                          '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate'],
                         cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url, end = f'http://127.0.0.1:{port}', time.monotonic() + 120
    while time.monotonic() < end:
        try:
            if httpx.get(f'{url}/api/status', headers={'Authorization': f'token {token}'}, timeout=5).status_code == 200: return p, url, token
        except httpx.HTTPError: time.sleep(0.2)
    p.kill(); sys.exit('JupyterLab did not start within 120 s')

def shown_after(page, nm, i:int, text:str) -> float:
    "Seconds from the call that overwrites cell `i` with `text` to the page showing it (polled every 5 ms)"
    js = f"""() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')][{i}]?.querySelector('.cm-content')?.innerText === {text!r}"""
    t0 = time.perf_counter()
    nm.overwrite_cell_source(i, text)
    while not page.evaluate(js):
        if time.perf_counter() - t0 > 10: return float('inf')
        time.sleep(0.005)
    return time.perf_counter() - t0

def insert_times(nm, name) -> list:
    out = []
    for k in range(M // 10):
        t = time.perf_counter(); nm.insert_cell(-1, 'code', f'y{k} = {k}', notebook_name=name); out.append(time.perf_counter() - t)
    return out

def main():
    if not (JLAB_VENV / 'bin' / 'jupyter-lab').exists(): sys.exit(f'{JLAB_VENV} has no JupyterLab: run tests/setup.sh')
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for name in ('open.ipynb', 'file.ipynb'):
            nbformat.write(new_notebook(cells=[new_code_cell(f'x{i} = {i}') for i in range(CELLS)],
                                        metadata={'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}}), root / name)
        lab, url, token = start_lab(root)
        try:
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path='/usr/bin/chromium', args=CHROMIUM_ARGS)
                page = b.new_page()
                page.goto(f'{url}/lab/workspaces/bench/tree/open.ipynb?token={token}')
                page.wait_for_selector('.jp-Notebook .jp-CodeCell .cm-content', timeout=120_000)
                time.sleep(2)
                shared = NotebookManager(root, jupyter_url=url, jupyter_token=token, kernel='inprocess', durable=True)
                assert shared.use_notebook('nb', 'open.ipynb').get('shared')
                on_file = NotebookManager(root, kernel='inprocess', durable=True)  # the same notebook, written as a file under the page
                on_file.use_notebook('nb', 'open.ipynb')
                s_times, f_times = [], []
                for k in range(N):
                    s_times.append(shown_after(page, shared, 1, f'x1 = "shared {k}"'))
                    time.sleep(1.5)  # the file route's write is compared with what the page shows: let the server save first
                    on_file.reload()
                    f_times.append(shown_after(page, on_file, 2, f'x2 = "file {k}"'))
                    time.sleep(1.5)
                    shared.reload()
                on_file.close_all()
                s_ms, f_ms = statistics.median(s_times), statistics.median(f_times)
                print(f'edit, call to visible in the page (median of {N}): shared document {s_ms:.3f}s, file {f_ms:.3f}s '
                      f'(file/shared {f_ms / s_ms:.0f}x); shared max {max(s_times):.3f}s (target <= 0.5 s)')
                plain = NotebookManager(root, kernel='inprocess', durable=True)
                plain.use_notebook('f', 'file.ipynb')
                for durable in (True, False):
                    shared.durable = plain.durable = durable
                    si, fi = [], []
                    for _ in range(10):  # interleaved: both see the same machine load
                        si += insert_times(shared, 'nb'); fi += insert_times(plain, 'f')
                    ms, mf = statistics.median(si), statistics.median(fi)
                    print(f'insert_cell, {"durable" if durable else "not durable"} (median of {M}): notebook open in JupyterLab {ms * 1000:.3f} ms, '
                          f'file {mf * 1000:.3f} ms (open/file {ms / mf:.2f}x; target <= 2x)')
                shared.close_all(); plain.close_all()
                b.close()
        finally:
            lab.send_signal(signal.SIGTERM)
            try: lab.wait(20)
            except subprocess.TimeoutExpired: lab.kill()

if __name__ == '__main__': main()
