"Shared by the test suites: no process a test starts outlives it, and free ports on 127.0.0.1"
import socket
import psutil, pytest

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
