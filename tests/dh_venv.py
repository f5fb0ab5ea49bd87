"""The real dialoghelper client (0.2.41, from PyPI) in its own cached Python 3.12 venv, for tests/test_server.py.

dialoghelper 0.2.41 needs Python 3.12+ (0.2.42 does not install), so it cannot go in the project's environment.
The venv lives in ~/.cache/headlesnb/dh-venv-0.2.41 (HEADLESNB_DH_VENV overrides), is built once (~90 s, ~460 MB)
and rebuilt only when it is missing or broken. Run `python tests/dh_venv.py` to build it ahead of the tests.
"""
import fcntl, glob, os, shutil, subprocess, sys
from pathlib import Path

DH_VERSION = '0.2.41'
VENV = Path(os.environ.get('HEADLESNB_DH_VENV') or Path.home() / '.cache' / 'headlesnb' / f'dh-venv-{DH_VERSION}')


def find_python312() -> str | None:
    "A working Python 3.12 interpreter (PATH first, then pyenv's versions)"
    cands = [shutil.which('python3.12')] + sorted(glob.glob(os.path.expanduser('~/.pyenv/versions/3.12*/bin/python3.12')), reverse=True)
    for c in filter(None, cands):
        try:
            r = subprocess.run([c, '-c', 'import sys; print(sys.version_info[:2] == (3, 12))'], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired): continue
        if r.returncode == 0 and r.stdout.strip() == 'True': return c
    return None


def venv_python() -> Path: return VENV / 'bin' / 'python'


def venv_ok() -> bool:
    "Is the cached venv there, with the right dialoghelper importable?"
    py = venv_python()
    if not py.exists(): return False
    code = f'import dialoghelper.core, sys; sys.exit(0 if dialoghelper.__version__ == {DH_VERSION!r} else 1)'
    try: return subprocess.run([str(py), '-c', code], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired): return False


def ensure_venv(quiet: bool = True) -> Path:
    "The venv's python, building the venv first if it is missing or broken (RuntimeError if it cannot be built)"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f'.{VENV.name}.lock', 'w') as lock:  # one build at a time, across processes
        fcntl.flock(lock, fcntl.LOCK_EX)
        if venv_ok(): return venv_python()
        py = find_python312()
        if py is None: raise RuntimeError('no Python 3.12 found (python3.12 on PATH or ~/.pyenv/versions/3.12*)')
        shutil.rmtree(VENV, ignore_errors=True)
        for cmd in ([py, '-m', 'venv', str(VENV)], [str(venv_python()), '-m', 'pip', 'install', '-q', f'dialoghelper=={DH_VERSION}']):
            r = subprocess.run(cmd, capture_output=quiet, text=True, timeout=1800)
            if r.returncode: raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{(r.stderr or '')[-3000:]}")
        if not venv_ok(): raise RuntimeError(f'{VENV}: dialoghelper=={DH_VERSION} installed but does not import')
        return venv_python()


if __name__ == '__main__':
    try: print(ensure_venv(quiet=False))
    except (RuntimeError, subprocess.TimeoutExpired) as e: sys.exit(f'dh_venv: {e}')
