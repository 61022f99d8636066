# Benchmarks (bench/README.md). The bench venv (.bench/venv, git-ignored) holds the proxy (editable) and the
# bench extras from pyproject.toml: fastmcp 3.4.11 on mcp 1.30 (legacy on both sides), matplotlib, py-spy.
PYTHON ?= python3
BENCH_VENV := .bench/venv
BENCH_PY := $(BENCH_VENV)/bin/python
BENCH_STAMP := $(BENCH_VENV)/.installed
# Wait (at most this long) for other processes to leave the CPU alone before measuring; see bench/README.md.
BENCH_ARGS ?= --wait-quiet 60

.PHONY: bench bench-quick bench-venv

bench: $(BENCH_STAMP)
	$(BENCH_PY) bench/run.py $(BENCH_ARGS)

bench-quick: $(BENCH_STAMP)
	$(BENCH_PY) bench/run.py --quick $(BENCH_ARGS)

bench-venv: $(BENCH_STAMP)

$(BENCH_STAMP): pyproject.toml
	test -x $(BENCH_PY) || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install --quiet --upgrade pip
	$(BENCH_PY) -m pip install --quiet -e '.[bench]'
	touch $@

# Interop matrix (tests/interop/matrix.py, docs/interop.md): the 2026-07-28 clients (mcp 2.3.0, the TS SDK v2
# client, the Inspector CLI) x legacy servers (FastMCP 1.30, server-everything, a TS SDK v1 server, and from the
# wild FastMCP 2.x, server-filesystem, server-memory, mcp-server-git, mcp-server-time) x upstream transports,
# through the proxy: all 336 cells (CI runs the quicker `--slice ci` through tests/interop/test_matrix.py).
# Prints the table; exit 1 unless green. `make interop-docs` also rewrites the table in docs/interop.md.
# Extra arguments: INTEROP_ARGS='--client ts-* --transport stdio -v'.
INTEROP_ARGS ?=

.PHONY: interop interop-docs interop-peers

interop: interop-peers
	.venv/bin/python tests/interop/matrix.py $(INTEROP_ARGS)

interop-docs: interop-peers
	.venv/bin/python tests/interop/matrix.py --write-docs $(INTEROP_ARGS)

interop-peers:
	scripts/setup-venv.sh
	scripts/setup-peers.sh legacy client fastmcp2 servers node

# The era matrix (tests/interop/eras.py, docs/interop.md "Client era x server era"): every client era (mcp 2.3.0
# pinned/auto, TS SDK v2 pinned/auto/legacy, FastMCP 4 2026-07-28/legacy, mcp 1.30) x every server era
# (FastMCP 1.30 and server-everything: legacy; FastMCP 4.2.3: two eras; mcp 2.3.0 server: 2026-07-28 only),
# one line per cell; exit 1 unless green. CI runs its slice through tests/interop/test_eras.py.
# Extra arguments: ERAS_ARGS='--client ts-* --upstream mcp2 --markdown'.
ERAS_ARGS ?=

.PHONY: interop-eras

interop-eras:
	scripts/setup-venv.sh
	scripts/setup-peers.sh legacy client fastmcp4 node
	.venv/bin/python tests/interop/eras.py $(ERAS_ARGS)

# The docs site (mkdocs.yml, docs/): `make docs` serves it on 127.0.0.1:8000 and rebuilds on every change;
# `make docs-build` builds it into site/ in strict mode (a broken link or anchor, or a page missing from the
# nav, fails), as tests/docs/test_site.py does. `make config-docs` regenerates docs/configuration.md from
# proxy/config.schema.json.
.PHONY: docs docs-build config-docs

docs:
	scripts/setup-venv.sh
	.venv/bin/mkdocs serve -a 127.0.0.1:8000

docs-build:
	scripts/setup-venv.sh
	.venv/bin/mkdocs build --strict

config-docs:
	.venv/bin/python scripts/gen_config_docs.py

# The soak (soak/run.py, docs/performance.md "Soak"): a real proxy process in front of FastMCP 1.30 with short
# TTLs, mixed traffic for SOAK_S seconds (an upstream restart midway), then the drain; exit 1 if the proxy's RSS
# grew more than 10 % after warm-up, its open descriptors grew, a parked call or upstream session did not drain,
# or any answer was unexpected. The test suite runs a 60-second one (tests/soak/test_soak.py).
SOAK_S ?= 600

.PHONY: soak

soak:
	scripts/setup-venv.sh
	scripts/setup-peers.sh legacy
	.venv/bin/python -m soak.run --seconds $(SOAK_S)

# The fast lane (docs/getting-started.md "The fast lane"): every test that starts no real peer and no proxy
# process — the conftest marks the others `peers` at collection — in a few minutes on one core. Needs only
# .venv (scripts/setup-venv.sh), not the peers. Extra arguments: FAST_ARGS='tests/calls -x'.
FAST_ARGS ?=

.PHONY: test-fast

test-fast:
	.venv/bin/pytest -q -p no:cacheprovider -n 0 -m "not peers" $(FAST_ARGS)
