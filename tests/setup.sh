#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine (idempotent; fast when already done).
set -euo pipefail
cd "$(dirname "$0")/.."
# The project and its dev extras, the newest releases pyproject.toml allows (uv when it is there and this is a venv: seconds, not minutes)
if command -v uv >/dev/null && [ -n "${VIRTUAL_ENV:-}" ]; then uv pip install -q -e '.[dev]'
else python -m pip install -q -e '.[dev]'
fi

# ---- begin: tests/test_server.py (dialoghelper-compatible server) ----
# Headless Chromium for the browser tests (Debian's package; playwright's own browser download is not used).
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ]; then apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null
    else sudo apt-get update -q >/dev/null && sudo apt-get install -y -q chromium >/dev/null
    fi
fi
# The real dialoghelper client (0.2.41, needs Python 3.12) in its own cached venv: built once (~90 s), then only checked.
python tests/dh_venv.py >/dev/null
# The real solveit-client (0.1.0) in its own cached venv (a few seconds: httpx and fastcore).
python tests/sc_venv.py >/dev/null
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

# ---- begin: kernels (tests/test_subkernel.py, tests/test_remote.py) ----
# A kernelspec in another language than Python (bash_kernel, a dev dependency) for the kernel-choice tests.
python -c "import sys; from jupyter_client.kernelspec import find_kernel_specs; sys.exit('bash' not in find_kernel_specs())" \
    || python -m bash_kernel.install --sys-prefix >/dev/null
# Jupyter Enterprise Gateway 3.3 pins jupyter_server 1.24 and jupyter_client 6.1.12: its own cached venv (built once, ~1 min).
EG_VENV="${HEADLESNB_EG_VENV:-$HOME/.cache/headlesnb/eg-venv-3.3.0}"
if [ ! -x "$EG_VENV/bin/jupyter-enterprisegateway" ]; then
    rm -rf "$EG_VENV" && python -m venv "$EG_VENV"
    "$EG_VENV/bin/pip" install -q 'jupyter_enterprise_gateway==3.3.0' 'ipykernel>=6.29,<7' 2>&1 | grep -v '^WARNING: Location' || true
fi
"$EG_VENV/bin/python" -c "import enterprise_gateway, ipykernel"
# ---- end: kernels ----

# ---- begin: tests/test_run_cli.py (headlesnb run, papermill's command line) ----
# papermill 2.7 (a dev dependency, installed above by '.[dev]') is the baseline the tests compare with; it runs
# notebooks on the python3 kernelspec that ipykernel provides. Checked here so a missing piece fails early and clearly.
python -c 'import papermill, yaml; assert papermill.__version__.startswith("2.7"), papermill.__version__'
python -m jupyter kernelspec list 2>/dev/null | grep -q python3 || python -m ipykernel install --sys-prefix --name python3 >/dev/null
# ---- end: tests/test_run_cli.py ----

# ---- begin: tests/test_conformance.py (nbclient conformance suite) ----
# pandas (the pandas probe), papermill (papermill's own notebooks run it), sympy and scipy (the IPython example
# notebooks import them) are dev dependencies, installed above with .[dev].
# nbclient's runs of the notebooks (what the tests compare with) are made by the tests, in this environment, and
# cached in ~/.cache/headlesnb/conformance/ (a few minutes the first time, and after any upgrade).
python -m ipykernel install --sys-prefix >/dev/null 2>&1 || true
# ---- end: tests/test_conformance.py ----

# ---- begin: tests/test_proxy.py (headlesnb proxy; the real Claude Code CLI) ----
# Claude Code, pinned (2.1.332 ships a native binary; Node 20's npm would otherwise pick 2.1.197), cached in its own folder.
CC_DIR="$HOME/.cache/headlesnb/claude-code-2.1.332"
if [ ! -x "$CC_DIR/node_modules/.bin/claude" ]; then
    if ! command -v npm >/dev/null; then
        if [ "$(id -u)" = 0 ]; then apt-get update -q >/dev/null && apt-get install -y -q nodejs npm >/dev/null
        else sudo apt-get update -q >/dev/null && sudo apt-get install -y -q nodejs npm >/dev/null
        fi
    fi
    mkdir -p "$CC_DIR"
    [ -f "$CC_DIR/package.json" ] || echo '{"private": true}' > "$CC_DIR/package.json"
    npm install --prefix "$CC_DIR" --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@2.1.332 >/dev/null
fi
"$CC_DIR/node_modules/.bin/claude" --version >/dev/null
# openssl makes the self-signed certificate of test_tls_upstream (an https upstream; skipped without it)
command -v openssl >/dev/null || { if [ "$(id -u)" = 0 ]; then apt-get update -q >/dev/null && apt-get install -y -q openssl >/dev/null
                                  else sudo apt-get update -q >/dev/null && sudo apt-get install -y -q openssl >/dev/null; fi; }
# ---- end: tests/test_proxy.py ----

# ---- begin: tests/test_codemap.py (code map: tree-sitter, bm25s, networkx come from pyproject) ----
# git decides which files count in a work tree (the fixture's .gitignore); the tree-sitter grammars are in the
# tree-sitter-language-pack wheel (before 1.0: no download). Checked here so a missing piece fails early and clearly.
command -v git >/dev/null || { if [ "$(id -u)" = 0 ]; then apt-get update -q >/dev/null && apt-get install -y -q git >/dev/null
                              else sudo apt-get update -q >/dev/null && sudo apt-get install -y -q git >/dev/null; fi; }
python -c 'import tree_sitter_language_pack as p; p.get_parser("python"); import bm25s, networkx, scipy'
# bench/bench_codemap.py only (not the tests): aider-chat, the baseline, in its own cached venv (~1 min once)
if [ -n "${HEADLESNB_BENCH:-}" ] && [ ! -x "$HOME/.cache/headlesnb/aider-venv/bin/python" ]; then
    uv venv -q "$HOME/.cache/headlesnb/aider-venv" && VIRTUAL_ENV="$HOME/.cache/headlesnb/aider-venv" uv pip install -q aider-chat
fi
# ---- end: tests/test_codemap.py ----

# ---- begin: tests/test_run_pipeline*.py (headlesnb run: S3, http, Dask, scrapbook) ----
# fsspec, s3fs, obstore, aiohttp, moto[server] (its moto_server command is the S3 server the tests start), dask[distributed] (the
# dask scheduler/worker commands), scrapbook and pyarrow are dev dependencies, installed above with .[dev].
python -c 'import fsspec, s3fs, obstore, aiohttp, moto.server, distributed, scrapbook, pyarrow' && command -v moto_server >/dev/null && command -v dask >/dev/null
# ---- end: tests/test_run_pipeline*.py ----

# ---- begin: tests/test_jupyterlab.py, bench/bench_jupyterlab.py (headlesnb editing the notebook open in JupyterLab) ----
# JupyterLab 4.6 with jupyter-collaboration 5.0 (and ipykernel, for the page's own kernels) in a cached venv of its own:
# installed here, its server extensions (jupyter_server_ydoc, fileid, lsp) would load into every `jupyter server` the other
# tests start, and change what they test. Built once (~1 min).
JLAB_VENV="${HEADLESNB_JLAB_VENV:-$HOME/.cache/headlesnb/jlab-venv-4.6.6}"
if [ ! -x "$JLAB_VENV/bin/jupyter-lab" ]; then
    rm -rf "$JLAB_VENV" && python -m venv "$JLAB_VENV"
    "$JLAB_VENV/bin/pip" install -q 'jupyterlab==4.6.6' 'jupyter-collaboration==5.0.4' 'ipykernel>=6.29' 2>&1 | grep -v '^WARNING: Location' || true
fi
"$JLAB_VENV/bin/python" -c "import jupyterlab, jupyter_collaboration, jupyter_server_ydoc, ipykernel"
# ---- end: tests/test_jupyterlab.py ----
