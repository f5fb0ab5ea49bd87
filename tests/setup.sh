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

# ---- begin: tests/test_run_cli.py (headlesnb run, papermill's command line) ----
# papermill 2.7 (a dev dependency, installed above by '.[dev]') is the baseline the tests compare with; it runs
# notebooks on the python3 kernelspec that ipykernel provides. Checked here so a missing piece fails early and clearly.
python -c 'import papermill, yaml; assert papermill.__version__.startswith("2.7"), papermill.__version__'
python -m jupyter kernelspec list 2>/dev/null | grep -q python3 || python -m ipykernel install --sys-prefix --name python3 >/dev/null
# ---- end: tests/test_run_cli.py ----
