"""The real dialoghelper client (0.2.41, from PyPI) in its own cached Python 3.12 venv, for tests/test_server.py.

dialoghelper 0.2.41 needs Python 3.12+ (0.2.42 does not install), so it cannot go in the project's environment.
The venv lives in ~/.cache/headlesnb/dh-venv-0.2.41 (HEADLESNB_DH_VENV overrides), is built once (~90 s, ~460 MB)
and rebuilt only when it is missing or broken. Run `python tests/dh_venv.py` to build it ahead of the tests.
"""
import glob, os, shutil, subprocess, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import client_venv  # noqa: E402

DH_VERSION = '0.2.41'
VENV = Path(os.environ.get('HEADLESNB_DH_VENV') or Path.home() / '.cache' / 'headlesnb' / f'dh-venv-{DH_VERSION}')
CHECK = f'import dialoghelper.core, sys; sys.exit(0 if dialoghelper.__version__ == {DH_VERSION!r} else 1)'


def find_python312() -> str | None:
    "A working Python 3.12 interpreter (PATH first, then pyenv's versions)"
    cands = [shutil.which('python3.12')] + sorted(glob.glob(os.path.expanduser('~/.pyenv/versions/3.12*/bin/python3.12')), reverse=True)
    for c in filter(None, cands):
        try:
            r = subprocess.run([c, '-c', 'import sys; print(sys.version_info[:2] == (3, 12))'], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired): continue
        if r.returncode == 0 and r.stdout.strip() == 'True': return c
    return None


def _python312() -> str:
    if (py := find_python312()) is None: raise RuntimeError('no Python 3.12 found (python3.12 on PATH or ~/.pyenv/versions/3.12*)')
    return py


def ensure_venv(quiet: bool = True) -> Path:
    "The venv's python, building the venv first if it is missing or broken (RuntimeError if it cannot be built)"
    return client_venv.ensure_venv(VENV, _python312, f'dialoghelper=={DH_VERSION}', CHECK, quiet)


if __name__ == '__main__':
    try: print(ensure_venv(quiet=False))
    except (RuntimeError, subprocess.TimeoutExpired) as e: sys.exit(f'dh_venv: {e}')
