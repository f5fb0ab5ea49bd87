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

# ---- begin: tests/test_agents*.py (agents: tmux, git; textual and watchfiles come from pyproject) ----
# tmux runs command agents and the terminal UI in the tests; git makes the agents' worktrees.
for pkg in tmux git; do
    if ! command -v "$pkg" >/dev/null; then
        if [ "$(id -u)" = 0 ]; then apt-get update -q >/dev/null && apt-get install -y -q "$pkg" >/dev/null
        else sudo apt-get update -q >/dev/null && sudo apt-get install -y -q "$pkg" >/dev/null
        fi
    fi
done
# ---- end: tests/test_agents*.py ----
