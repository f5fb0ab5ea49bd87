#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine (idempotent; fast when already done).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[dev]'
