"""`headlesnb serve`'s index page (`GET /`) over 200 dialogs (40 messages each: notes, code with text outputs, a PNG now and
then; 10 folders), against the walk of the dialog folder that the old index made and all it made (`list_dialogs_` with
depth 5, which listed the names), in the same run.

The index shows each dialog's message count, last message and last change, newest first. Drawn again with no file
changed (warm) it only `stat`s each file; when every file changed (cold: each one touched before the load) it reads each
once. The three are measured in turn, round after round. Prints the median and worst of each, and the ratios to the old walk. Target: warm at most 2x the walk.

Starts `headlesnb serve` on a free port with a temporary root and talks to it with httpx; stops the server by PID.

Run: python bench/bench_index.py [N]      (N dialogs, default 200)
"""
import base64, os, socket, statistics, subprocess, sys, tempfile, time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PNG = base64.b64encode(bytes.fromhex('89504e470d0a1a0a0000000d4948445200000001000000010806000000'
                                     '1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5f5b9a40000000049454e44ae426082')).decode()
ROUNDS = 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def make_dialogs(root: Path, n: int):
    from headlesnb.dialog import DialogManager
    dm = DialogManager(root, save_delay=3600)
    for d in range(n):
        name = f'folder{d % 10}/dialog{d:03d}' if d % 2 else f'dialog{d:03d}'
        dm.use_dialog(name, mode='create')
        for i in range(40):
            if i % 4 == 0: dm.add_message(f'## Step {i}\n\nSome *markdown* and `code`.', 'note', dialog_name=name)
            else:
                outs = [{'output_type': 'stream', 'name': 'stdout', 'text': f'{i} ' * 200}]
                if i % 10 == 3: outs.append({'output_type': 'display_data', 'data': {'image/png': PNG, 'text/plain': '<Figure>'}, 'metadata': {}})
                dm.add_message(f'for j in range({i}): print(j)', 'code', dialog_name=name, output=outs)
        dm.unuse_dialog(name)
    return sum(p.stat().st_size for p in root.rglob('*.ipynb'))


def timed(fn, before=None) -> float:
    if before: before()
    t = time.perf_counter()
    r = fn()
    dt = time.perf_counter() - t
    if r.status_code != 200: raise RuntimeError(f'{r.request.url}: {r.status_code} {r.text[:300]}')
    return dt


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / 'root'
        size = make_dialogs(root, n)
        files = list(root.rglob('*.ipynb'))
        port = free_port()
        env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)}
        proc = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', str(root), '--port', str(port)],
                                cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with httpx.Client(base_url=f'http://127.0.0.1:{port}', timeout=60) as h:
                end = time.monotonic() + 60
                while True:
                    try:
                        if h.get('/health', timeout=1).status_code == 200: break
                    except httpx.TransportError: pass
                    if time.monotonic() > end or proc.poll() is not None: sys.exit('the server did not start')
                    time.sleep(0.05)
                page = h.get('/').text
                assert page.count('<li class="dlg') == n and page.count('40 messages') == n, 'the index does not show every dialog'
                def touch():
                    t = time.time()
                    for p in files: os.utime(p, (t, t))
                walk, warm, cold = [], [], []
                for _ in range(ROUNDS):  # the three in turn: the drift of a shared machine hits each alike
                    walk.append(timed(lambda: h.post('/list_dialogs_', data={'depth': '5'})))
                    warm.append(timed(lambda: h.get('/')))
                    cold.append(timed(lambda: h.get('/'), before=touch))
        finally:
            proc.terminate()
            try: proc.wait(15)
            except subprocess.TimeoutExpired: proc.kill(); proc.wait(5)
    med = lambda xs: statistics.median(xs) * 1000
    print(f'{n} dialogs, {size / 2**20:.1f} MB of dialog files; {ROUNDS} loads each, median (worst) ms')
    print(f'  the old index\'s walk (list_dialogs_ depth 5): {med(walk):7.1f} ({max(walk) * 1000:.1f})')
    print(f'  index, no file changed (stat only):           {med(warm):7.1f} ({max(warm) * 1000:.1f})   {med(warm) / med(walk):.2f}x the walk (target <= 2x)')
    print(f'  index, every file changed (each read once):   {med(cold):7.1f} ({max(cold) * 1000:.1f})   {med(cold) / med(walk):.2f}x the walk')


if __name__ == '__main__':
    main()
