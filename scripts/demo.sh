#!/usr/bin/env bash
# Runs mrtr-proxy in front of the bundled demo legacy server and shows one MRTR round trip.
# Sets up what it needs first (.venv for the proxy, .peers/legacy for the FastMCP 1.30 demo server).
# Ports: DEMO_UPSTREAM_PORT (default 8000) and DEMO_PROXY_PORT (default 8080), both on 127.0.0.1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
upstream_port="${DEMO_UPSTREAM_PORT:-8000}"
proxy_port="${DEMO_PROXY_PORT:-8080}"

scripts/setup-venv.sh >/dev/null
scripts/setup-peers.sh legacy >/dev/null

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_port() {  # wait_port PORT WHAT: up to 20 s
  for _ in $(seq 1 200); do
    if (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "demo: $2 did not start on 127.0.0.1:$1" >&2; exit 1
}

.peers/legacy/bin/python demo/legacy_server.py --port "$upstream_port" 2>/tmp/mrtr-demo-upstream.log &
pids+=($!)
wait_port "$upstream_port" "the demo legacy server"
.venv/bin/mrtr-proxy serve --upstream "http://127.0.0.1:$upstream_port/mcp" \
  --listen "127.0.0.1:$proxy_port" --log-format json 2>/tmp/mrtr-demo-proxy.log &
pids+=($!)
wait_port "$proxy_port" "mrtr-proxy"
.venv/bin/python demo/client.py --url "http://127.0.0.1:$proxy_port/mcp"
echo
echo "(proxy log: /tmp/mrtr-demo-proxy.log — one JSON line per request)"
