"""The real solveit-client (0.1.0, from PyPI) in its own cached venv, for tests/test_server.py.

As tests/dh_venv.py does for dialoghelper: ~/.cache/headlesnb/sc-venv-0.1.0 (HEADLESNB_SC_VENV overrides), built once
(a few seconds: httpx and fastcore) and rebuilt only when missing or broken. Run `python tests/sc_venv.py` to build
it ahead of the tests.
"""
import os, subprocess, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import client_venv  # noqa: E402

SC_VERSION = '0.1.0'
VENV = Path(os.environ.get('HEADLESNB_SC_VENV') or Path.home() / '.cache' / 'headlesnb' / f'sc-venv-{SC_VERSION}')
CHECK = f'import solveit_client.core, sys; sys.exit(0 if solveit_client.__version__ == {SC_VERSION!r} else 1)'


def ensure_venv(quiet: bool = True) -> Path:
    "The venv's python, building the venv first if it is missing or broken (RuntimeError if it cannot be built)"
    base = lambda: getattr(sys, '_base_executable', None) or sys.executable  # this Python, outside any venv
    return client_venv.ensure_venv(VENV, base, f'solveit-client=={SC_VERSION}', CHECK, quiet)


if __name__ == '__main__':
    try: print(ensure_venv(quiet=False))
    except (RuntimeError, subprocess.TimeoutExpired) as e: sys.exit(f'sc_venv: {e}')
