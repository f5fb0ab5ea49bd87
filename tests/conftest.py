"Shared by the test suites: no process a test starts outlives it, free ports on 127.0.0.1, headless Chromium, and kernel helpers"
import socket, threading, time
from pathlib import Path
import psutil, pytest

CHROMIUM = '/usr/bin/chromium'  # Debian's package (tests/setup.sh installs it); playwright's own browser download is not used
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                 '--disable-background-networking', '--disable-component-update', '--disable-sync']

@pytest.fixture(autouse=True)
def reap_children():
    "Stop (by PID) any process a test started that is still alive when it ends (servers, browsers, client scripts)"
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    for p in left:
        try: p.terminate()
        except psutil.NoSuchProcess: pass
    _, alive = psutil.wait_procs(left, timeout=5)
    for p in alive:
        try: p.kill()
        except psutil.NoSuchProcess: pass

def free_port() -> int:
    "A port on 127.0.0.1 that nothing listens on now"
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture
def browser():
    "Headless Chromium driven by playwright, closed at the end of the test"
    assert Path(CHROMIUM).exists(), f'{CHROMIUM} is not installed (tests/setup.sh installs it)'
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try: yield b
        finally: b.close()

def interrupt_soon(k, after:float=0.5):
    "Interrupt kernel `k` from another thread once its cell is executing (interrupt() is False before that)"
    def go():
        time.sleep(after)
        end = time.monotonic() + 30
        while not k.interrupt() and time.monotonic() < end: time.sleep(0.05)
    threading.Thread(target=go, daemon=True).start()

def run_text(r) -> str:
    "The text of a kernel run's last output"
    o = r.outputs[-1]
    return ''.join(o['data']['text/plain']) if 'data' in o else ''.join(o.get('text', o.get('evalue', '')))

def joined_streams(outputs) -> list:
    "Outputs with each run of stream outputs of one name as one: ipykernel cuts a stream into messages by time (under load a print comes in two)"
    res = []
    for o in outputs:
        if o.get('output_type') == 'stream' and res and res[-1].get('output_type') == 'stream' and res[-1]['name'] == o['name']:
            res[-1] = {**res[-1], 'text': ''.join(res[-1]['text']) + ''.join(o['text'])}
        else: res.append(o if o.get('output_type') != 'stream' else {**o, 'text': ''.join(o['text'])})
    return res
