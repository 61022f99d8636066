#!/usr/bin/env bash
# Creates .venv with mrtr-proxy (editable), its dev tools, the otel extra (tests/test_tracing.py) and the
# docs extra (mkdocs: `make docs`, tests/docs/test_site.py); idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
if [ ! -x "$root/.venv/bin/python" ]; then
  "$py" -m venv "$root/.venv"
fi
stamp="$root/.venv/.installed"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check -e "$root[dev,otel,docs]" 2>&1 | grep -v "is ignored" || true
  "$root/.venv/bin/python" -c "import proxy.process.app"
  touch "$stamp"
fi
echo "venv ready in $root/.venv"
