"""The real clients the tests drive (dialoghelper, solveit-client), each from PyPI in a cached venv of its own.

A client must not share the project's environment (it would see headlesnb's packages), and dialoghelper needs
another Python. Each venv lives under ~/.cache/headlesnb/, is built once and rebuilt only when it is missing or its
client does not import at the right version."""
import fcntl, shutil, subprocess
from pathlib import Path


def venv_python(venv: Path) -> Path: return venv / 'bin' / 'python'


def venv_ok(venv: Path, check: str) -> bool:
    "Does `check` (Python code that exits 0 when the client is right) pass in `venv`?"
    py = venv_python(venv)
    if not py.exists(): return False
    try: return subprocess.run([str(py), '-c', check], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired): return False


def ensure_venv(venv: Path, python, requirement: str, check: str, quiet: bool = True) -> Path:
    "The venv's python, building it with `python()` and pip-installing `requirement` first if `check` fails (RuntimeError if it cannot be built)"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f'.{venv.name}.lock', 'w') as lock:  # one build at a time, across processes
        fcntl.flock(lock, fcntl.LOCK_EX)
        if venv_ok(venv, check): return venv_python(venv)
        base = python()
        shutil.rmtree(venv, ignore_errors=True)
        for cmd in ([base, '-m', 'venv', str(venv)], [str(venv_python(venv)), '-m', 'pip', 'install', '-q', requirement]):
            r = subprocess.run(cmd, capture_output=quiet, text=True, timeout=1800)
            if r.returncode: raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{(r.stderr or '')[-3000:]}")
        if not venv_ok(venv, check): raise RuntimeError(f'{venv}: {requirement} installed but does not import')
        return venv_python(venv)
