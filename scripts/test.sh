#!/usr/bin/env bash
# The whole test suite: install what it needs, check lint, types and import contracts, run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=${PYTHON:-python3}
$PY -m ruff check pai tests bench
$PY -m mypy
lint-imports
# pytest exits 5 when it collected no test: that is a failure here too.
$PY -m pytest -q "$@"
