"""What each kernel backend costs: start (to the first cell's result) and a `1+1` cell, in-process vs subprocess vs
remote (a `jupyter server` on 127.0.0.1 started here), as ratios to the in-process kernel measured in the same run.
These are the figures of the "When to use which backend" table in nbs/07_kernels.subkernel.ipynb. Medians; 2 shared cores."""
import secrets, socket, statistics, subprocess, sys, tempfile, time
import requests
from headlesnb.kernels.inprocess import InProcessKernel
from headlesnb.kernels.subkernel import SubprocessKernel
from headlesnb.kernels.remote import RemoteKernel

def server():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    token = secrets.token_hex(8)
    p = subprocess.Popen([sys.executable, '-m', 'jupyter_server', '--no-browser', '--allow-root', '--ip=127.0.0.1', f'--port={port}',
                          f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={tempfile.mkdtemp()}'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f'http://127.0.0.1:{port}'
    for _ in range(600):
        try:
            if requests.get(url + '/api/status', headers={'Authorization': f'token {token}'}, timeout=1).ok: return p, url, token
        except requests.RequestException: pass
        time.sleep(0.1)
    raise RuntimeError('jupyter server did not start')

def measure(make, starts=5, cells=200):
    st, per = [], []
    for _ in range(starts):
        t = time.perf_counter(); k = make(); k.run('1'); st.append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(cells): k.run('1+1')
        per.append((time.perf_counter() - t) / cells)
        k.close()
    return statistics.median(st), statistics.median(per)

if __name__ == '__main__':
    p, url, token = server()
    try:
        rows = [('in-process', measure(lambda: InProcessKernel())),
                ('subprocess', measure(lambda: SubprocessKernel('python3'))),
                ('remote (jupyter server, 127.0.0.1)', measure(lambda: RemoteKernel(url, token)))]
    finally: p.terminate(); p.wait(15)
    (_, (s0, c0)) = rows[0]
    for name, (s, c) in rows:
        print(f'{name:36s} start + first cell {s*1e3:8.1f} ms ({s/s0:6.0f}x in-process)   1+1 {c*1e3:6.2f} ms ({c/c0:5.0f}x in-process)')
