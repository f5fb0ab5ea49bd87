#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine (idempotent; fast when already done).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[dev]'

# ---- begin: tests/test_server.py (dialoghelper-compatible server) ----
# Headless Chromium for the browser tests (Debian's package; playwright's own browser download is not used).
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ]; then apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null
    else sudo apt-get update -q >/dev/null && sudo apt-get install -y -q chromium >/dev/null
    fi
fi
# The real dialoghelper client (0.2.41, needs Python 3.12) in its own cached venv: built once (~90 s), then only checked.
python tests/dh_venv.py >/dev/null
# ---- end: tests/test_server.py ----

# ---- begin: tests/test_conformance.py (nbclient conformance suite) ----
# pandas (the pandas probe) and papermill (papermill's own notebooks run it) are dev dependencies, installed above with
# .[dev]; sympy and scipy are what the IPython example notebooks import. The references in tests/conformance/refs were
# made with these installed: regenerate them (make_refs.py --all) after upgrading any of them, or IPython/ipykernel.
python -m pip install -q 'pandas>=2.0' 'papermill>=2.6' 'sympy>=1.12' 'scipy>=1.11'
python -m ipykernel install --sys-prefix >/dev/null 2>&1 || true
# ---- end: tests/test_conformance.py ----
