"""The dialog page in a browser: how long headless Chromium takes to load the page of a dialog of 200 messages (notes
with markdown, code with text outputs, HTML tables in sandboxed output frames, PNG images) until it is live (its event
stream connected), against the page of an empty dialog in the same run. Target: under 1 s.

Starts `headlesnb serve` on a free port with a temporary root and Debian's Chromium through playwright (as the tests
do); every load is a fresh page (no cache). Prints the median and worst of 7 loads each, and the ratio.
Stops the server and the browser at the end.

Run: python bench/bench_page.py
"""
import base64, os, socket, statistics, subprocess, sys, tempfile, time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CHROMIUM = '/usr/bin/chromium'
PNG = base64.b64encode(bytes.fromhex('89504e470d0a1a0a0000000d4948445200000001000000010806000000'
                                     '1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5f5b9a40000000049454e44ae426082')).decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def make_dialogs(root: Path):
    from headlesnb.dialog import DialogManager
    out = lambda mime, v: {'output_type': 'display_data', 'data': {mime: v}, 'metadata': {}}
    dm = DialogManager(root, save_delay=3600)
    dm.use_dialog('empty', mode='create')
    dm.use_dialog('big', mode='create')
    table = '<table><tr><th>a</th><th>b</th></tr>' + ''.join(f'<tr><td>{i}</td><td>{i * i}</td></tr>' for i in range(20)) + '</table>'
    for i in range(200):
        k = i % 20
        if k < 10: dm.add_message(f'## Section {i}\n\nSome *markdown* with `code`, a [link](https://example.com) and a list:\n\n- one\n- two\n\n'
                                  f'```python\nx = {i}\n```', 'note', dialog_name='big')
        elif k < 18: dm.add_message(f'for j in range(5): print({i}, j)', 'code', dialog_name='big',
                                    output=[{'output_type': 'stream', 'name': 'stdout', 'text': ''.join(f'{i} {j}\n' for j in range(5))}])
        elif k == 18: dm.add_message('df', 'code', dialog_name='big', output=[out('text/html', table), out('text/plain', 'a table')])
        else: dm.add_message('plot()', 'code', dialog_name='big', output=[out('image/png', PNG)])
    dm.close_all()


def main():
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory() as root:
        make_dialogs(Path(root))
        port = free_port()
        env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)}
        srv = subprocess.Popen([sys.executable, '-m', 'headlesnb.fronts.cli', 'serve', '--root', root, '--port', str(port)],
                               cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f'http://127.0.0.1:{port}'
        try:
            with httpx.Client(base_url=url, timeout=30) as h:
                for _ in range(600):
                    try: h.get('/health'); break
                    except httpx.TransportError: time.sleep(0.05)
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=CHROMIUM, args=['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'])
                def load(name):
                    page = b.new_page()
                    t = time.perf_counter()
                    page.goto(f'{url}/dialog_?name={name}', wait_until='load')
                    page.wait_for_function('window.hnb && hnb.ready', timeout=30_000, polling=10)
                    took = time.perf_counter() - t
                    n = page.evaluate("document.querySelectorAll('section.msg').length")
                    page.close()
                    return took, n
                load('big'); load('empty')  # warm up (the dialogs are opened by the first visit)
                big, empty = [], []
                for _ in range(7):  # alternate, so drift on a shared machine hits both alike
                    t, n = load('big'); big.append(t)
                    assert n == 200, n
                    empty.append(load('empty')[0])
                b.close()
        finally:
            srv.terminate()
            try: srv.wait(15)
            except subprocess.TimeoutExpired: srv.kill(); srv.wait()
    print('headlesnb page load benchmark (headless Chromium, until the page is live)')
    print(f'empty dialog                 median {statistics.median(empty) * 1000:7.1f} ms  worst {max(empty) * 1000:7.1f} ms')
    print(f'200 messages                 median {statistics.median(big) * 1000:7.1f} ms  worst {max(big) * 1000:7.1f} ms  (target: under 1000 ms)')
    print(f'ratio 200 messages / empty: {statistics.median(big) / statistics.median(empty):.2f}x')


if __name__ == '__main__':
    main()
