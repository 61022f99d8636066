#!/usr/bin/env bash
# Runs mrtr-proxy in front of the bundled demo legacy server and shows one MRTR round trip.
# Sets up what it needs first (.venv for the proxy, .peers/legacy for the FastMCP 1.30 demo server).
# Ports: DEMO_UPSTREAM_PORT (default 8000) and DEMO_PROXY_PORT (default 8080), both on 127.0.0.1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
upstream_port="${DEMO_UPSTREAM_PORT:-8000}"
proxy_port="${DEMO_PROXY_PORT:-8080}"

say() { echo "demo: $*" >&2; }

# The ports first, before a minute of set-up: a port another process holds would otherwise be found
# "open" by the wait below, and the client would talk to whatever listens there.
port_free() {  # port_free PORT: can a server bind 127.0.0.1:PORT (as the servers do, SO_REUSEADDR)
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
PY
}
check_port() {  # check_port PORT VARIABLE WHAT
  if ! [[ "$1" =~ ^[0-9]+$ ]] || (( $1 < 1 || $1 > 65535 )); then
    say "$2=$1 is not a port number"; exit 1
  fi
  if ! port_free "$1"; then
    say "port $1 on 127.0.0.1 (for $3) is taken by another process; set $2 to another port," \
      "e.g. $2=$(( $1 + 1 )) scripts/demo.sh"
    exit 1
  fi
}
if [[ "$upstream_port" == "$proxy_port" ]]; then
  say "DEMO_UPSTREAM_PORT and DEMO_PROXY_PORT are both $proxy_port; give them different ports"; exit 1
fi
check_port "$upstream_port" DEMO_UPSTREAM_PORT "the demo legacy server"
check_port "$proxy_port" DEMO_PROXY_PORT "mrtr-proxy"

say "setting up .venv and .peers/legacy (FastMCP 1.30) — about a minute the first time, seconds after"
scripts/setup-venv.sh >/dev/null
scripts/setup-peers.sh legacy >/dev/null

logs="$(mktemp -d "${TMPDIR:-/tmp}/mrtr-demo.XXXXXX")"  # this run's logs, kept after it
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_port() {  # wait_port PORT PID WHAT LOG: up to 20 s, while PID lives
  for _ in $(seq 1 200); do
    if ! kill -0 "$2" 2>/dev/null; then
      say "$3 exited before it listened on 127.0.0.1:$1; the end of its log ($4):"
      tail -n 5 "$4" >&2; exit 1
    fi
    # connect and close, sending nothing: a stray newline is an "Invalid HTTP request" in the server's log
    if (: >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  say "$3 did not start on 127.0.0.1:$1 within 20 s (log: $4)"; exit 1
}

say "starting the demo legacy server on 127.0.0.1:$upstream_port and mrtr-proxy on 127.0.0.1:$proxy_port"
.peers/legacy/bin/python demo/legacy_server.py --port "$upstream_port" 2>"$logs/upstream.log" &
pids+=($!)
wait_port "$upstream_port" "$!" "the demo legacy server" "$logs/upstream.log"
.venv/bin/mrtr-proxy serve --upstream "http://127.0.0.1:$upstream_port/mcp" \
  --listen "127.0.0.1:$proxy_port" --log-format json 2>"$logs/proxy.log" &
pids+=($!)
wait_port "$proxy_port" "$!" "mrtr-proxy" "$logs/proxy.log"
.venv/bin/python demo/client.py --url "http://127.0.0.1:$proxy_port/mcp"
echo
echo "(this run's logs: $logs/proxy.log — one JSON line per request — and $logs/upstream.log)"
