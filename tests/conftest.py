"Shared by the test suites: no process a test starts outlives it, free ports on 127.0.0.1, headless Chromium, and kernel helpers"
import os, random, socket, threading, time
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

def _port_share() -> range:
    """The ports this test process draws from: below the kernel's ephemeral range (a client's connection takes its local port
    there, so a port drawn from it can be taken before the server that was to listen on it starts), one share per xdist worker
    (two workers never draw the same port)"""
    try: low = int(Path('/proc/sys/net/ipv4/ip_local_port_range').read_text().split()[0])
    except (OSError, ValueError, IndexError): low = 32768
    first = 10000 if low > 12000 else 1024
    n = max(1, int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')))
    w = int(os.environ.get('PYTEST_XDIST_WORKER', 'gw0').removeprefix('gw') or 0) % n
    size = (low - first) // n
    return range(first + w * size, first + (w + 1) * size)

def free_port() -> int:
    "A port on 127.0.0.1 that nothing listens on now, and that no other test process nor a client's connection takes meanwhile"
    share = _port_share()
    for _ in range(100):
        port = random.choice(share)
        with socket.socket() as s:
            try: s.bind(('127.0.0.1', port))
            except OSError: continue
            return port
    raise RuntimeError(f'no free port on 127.0.0.1 among {share}')


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
