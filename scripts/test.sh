#!/usr/bin/env bash
# Sets up everything the tests need from nothing (.venv, the MCP peers in .peers/) and runs every check:
# ruff, mypy (strict), and the pytest suite, which starts and stops the real legacy servers and clients.
# Extra arguments go to pytest, e.g. `scripts/test.sh tests/e2e -x`. The suite runs on TEST_WORKERS pytest-xdist
# workers (default 2: CI's cores; a test file stays on one worker, so module fixtures are started once).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/setup-venv.sh
scripts/setup-peers.sh
scripts/setup-helm.sh   # helm 4 and 3 + hadolint, for tests/helm
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== layers (import-linter: pyproject.toml [tool.importlinter])"
.venv/bin/lint-imports --no-cache
echo "== module size (proxy/, bench/ and soak/: at most 400 lines each)"
.venv/bin/python scripts/check_module_size.py proxy bench soak 400
echo "== mypy (strict)"
.venv/bin/mypy
echo "== pytest"
.venv/bin/pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-2}" --dist loadfile "$@"
