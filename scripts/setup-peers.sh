#!/usr/bin/env bash
# Installs the third-party MCP peers the tests talk to, into .peers/ (git-ignored):
#   .peers/legacy  python venv with mcp==1.30.0 (FastMCP 1.x legacy servers)
#   .peers/client  python venv with mcp==2.3.0  (2026-07-28 client)
#   .peers/fastmcp2     python venv with fastmcp==2.14.7 (the newest 2.x; on mcp==1.30.0)
#   .peers/fastmcp4     python venv with fastmcp==4.2.3 (speaks both eras: legacy initialize and 2026-07-28)
#   .peers/arcade      python venv with arcade-mcp-server==1.32.1 (a legacy-only server built on its own stack)
#   .peers/servers-sdk1 python venv with mcp-server-git + mcp-server-time 2026.10.10 (the newest on mcp 1.x)
#   .peers/servers-sdk2 python venv with mcp-server-git + mcp-server-time 2026.10.19 (on mcp 2.3.0)
#   .peers/node    npm peers: server-everything, server-filesystem, server-memory, the TS client v2, the
#                  conformance suite, tmcp 1.20.0 (+ @tmcp/transport-http, @tmcp/adapter-zod; a two-era
#                  TS server), @ai-sdk/mcp 2.0.99 (Vercel's client), Node 22, and the Prometheus Operator CRD schemas
#                  (@kubernetes-models/prometheus-operator) and the PromQL grammar (@prometheus-io/lezer-promql)
#                  the chart tests check the observability objects with
# Idempotent: a peer already at the pinned version is left alone.
#   nginx          the round-robin load balancer for the multi-replica tests (Debian's nginx-light)
#   browser        headless Chromium for the real-browser CORS test (Debian's chromium, /usr/bin/chromium) and
#                  .peers/browser, a python venv with playwright==1.65.2 that drives it (its own browser
#                  downloads are never used: `playwright install` is not run)
# Usage: scripts/setup-peers.sh [legacy] [client] [fastmcp2] [fastmcp4] [arcade] [servers] [node] [nginx] [browser]
#        (no argument: all)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peers="$root/.peers"
mkdir -p "$peers"
py="${PYTHON:-python3}"

venv_with() {  # venv_with DIR REQUIREMENT... (each NAME==VERSION; the first one must be importable as MODULE)
  local dir="$1" module="$2"
  shift 2
  local req ok=1
  if [ -x "$dir/bin/python" ]; then
    for req in "$@"; do
      "$dir/bin/python" -m pip show -q "${req%%==*}" 2>/dev/null | grep -q "^Version: ${req##*==}$" || ok=0
    done
    [ "$ok" = 1 ] && return 0
  fi
  "$py" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v "is ignored" || true
  "$dir/bin/python" -c "import $module" # fail loudly if the install did not work
}

wanted=" ${*:-legacy client fastmcp2 fastmcp4 arcade servers node nginx browser} "
case "$wanted" in *" legacy "*) venv_with "$peers/legacy" mcp "mcp==1.30.0" & ;; esac
case "$wanted" in *" client "*) venv_with "$peers/client" mcp "mcp==2.3.0" & ;; esac
case "$wanted" in *" fastmcp2 "*) venv_with "$peers/fastmcp2" fastmcp "fastmcp==2.14.7" "mcp==1.30.0" & ;; esac
case "$wanted" in *" fastmcp4 "*) venv_with "$peers/fastmcp4" fastmcp "fastmcp==4.2.3" & ;; esac
case "$wanted" in *" arcade "*) venv_with "$peers/arcade" arcade_mcp_server "arcade-mcp-server==1.32.1" & ;; esac
case "$wanted" in *" servers "*)
  venv_with "$peers/servers-sdk1" mcp_server_git \
    "mcp-server-git==2026.10.10" "mcp-server-time==2026.10.10" "mcp==1.30.0" &
  venv_with "$peers/servers-sdk2" mcp_server_git \
    "mcp-server-git==2026.10.19" "mcp-server-time==2026.10.19" "mcp==2.3.0" &
  ;; esac
case "$wanted" in *" node "*) (
  mkdir -p "$peers/node"
  cp "$root/tests/fixtures/npm/package.json" "$peers/node/package.json"
  cd "$peers/node"
  if ! cmp -s package.json .installed 2>/dev/null; then
    npm install --no-audit --no-fund --loglevel=error
    cp package.json .installed
  fi
) & ;; esac
apt_packages=()  # the OS packages to install (one apt-get for all: dpkg takes one install at a time)
case "$wanted" in *" nginx "*)
  if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then apt_packages+=(nginx-light); fi ;; esac
case "$wanted" in *" browser "*)
  venv_with "$peers/browser" playwright "playwright==1.65.2" &
  if [ ! -x /usr/bin/chromium ]; then apt_packages+=(chromium); fi ;; esac
if [ "${#apt_packages[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null) &
  else
    echo "setup-peers: ${apt_packages[*]} missing and cannot be installed here (needs root and apt-get);" \
      "the multi-replica tests (nginx) and the real-browser test (chromium; it skips only on an OS" \
      "without a chromium package) fail until they are installed" >&2
  fi
fi
for job in $(jobs -p); do wait "$job"; done
echo "peers ready in $peers"
