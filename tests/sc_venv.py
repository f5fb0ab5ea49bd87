"""The real solveit-client (0.1.0, from PyPI) in its own cached venv, for tests/test_server.py.

A client must not share the project's environment (it would see headlesnb's packages), so, as tests/dh_venv.py
does for dialoghelper, it gets a venv of its own: ~/.cache/headlesnb/sc-venv-0.1.0 (HEADLESNB_SC_VENV overrides),
built once (a few seconds: httpx and fastcore) and rebuilt only when missing or broken.
Run `python tests/sc_venv.py` to build it ahead of the tests.
"""
import fcntl, os, shutil, subprocess, sys
from pathlib import Path

SC_VERSION = '0.1.0'
VENV = Path(os.environ.get('HEADLESNB_SC_VENV') or Path.home() / '.cache' / 'headlesnb' / f'sc-venv-{SC_VERSION}')


def venv_python() -> Path: return VENV / 'bin' / 'python'


def venv_ok() -> bool:
    "Is the cached venv there, with the right solveit-client importable?"
    py = venv_python()
    if not py.exists(): return False
    code = f'import solveit_client.core, sys; sys.exit(0 if solveit_client.__version__ == {SC_VERSION!r} else 1)'
    try: return subprocess.run([str(py), '-c', code], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired): return False


def ensure_venv(quiet: bool = True) -> Path:
    "The venv's python, building the venv first if it is missing or broken (RuntimeError if it cannot be built)"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f'.{VENV.name}.lock', 'w') as lock:  # one build at a time, across processes
        fcntl.flock(lock, fcntl.LOCK_EX)
        if venv_ok(): return venv_python()
        shutil.rmtree(VENV, ignore_errors=True)
        base = getattr(sys, '_base_executable', None) or sys.executable  # this Python, outside any venv
        for cmd in ([base, '-m', 'venv', str(VENV)], [str(venv_python()), '-m', 'pip', 'install', '-q', f'solveit-client=={SC_VERSION}']):
            r = subprocess.run(cmd, capture_output=quiet, text=True, timeout=900)
            if r.returncode: raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{(r.stderr or '')[-3000:]}")
        if not venv_ok(): raise RuntimeError(f'{VENV}: solveit-client=={SC_VERSION} installed but does not import')
        return venv_python()


if __name__ == '__main__':
    try: print(ensure_venv(quiet=False))
    except (RuntimeError, subprocess.TimeoutExpired) as e: sys.exit(f'sc_venv: {e}')
