"""The processes a bench run starts, each its own process on 127.0.0.1, started and always stopped by
``tests/peers.py``'s ``run_peer``: the legacy servers, the minimal 2026-07-28 server, mrtr-proxy as operators
run it, FastMCP's proxy, the aiohttp floor relay; and the load generator (``bench/loadgen.py``) that measures
them, one process per measurement."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plan import BENCH, PY, ROOT, say

sys.path.insert(0, str(ROOT / "tests"))

import peers  # tests/peers.py: free ports, start/stop processes, bounded

LOOPBACK = "127.0.0.1"
STOP_S = 1.0  # SIGTERM, then SIGKILL after this long: nothing here needs a graceful shutdown


@dataclass
class Piece:
    url: str
    pid: int


@contextlib.asynccontextmanager
async def legacy_server(kind: str, *, get_stream: bool = True) -> AsyncIterator[Piece]:
    if kind == "minimal":
        argv = [PY, str(BENCH / "minimal_server.py"), *([] if get_stream else ["--no-get-stream"])]
    else:
        fixture = ROOT / "tests" / "fixtures" / "legacy_fastmcp_server.py"
        argv = [PY, str(fixture), "--transport", "streamable-http", "--host", LOOPBACK]

    def command(port: int) -> list[str]:
        return [*argv, "--port", str(port)]

    async with peers.run_peer(kind, command, env={"PYTHONUNBUFFERED": "1"}, stop_timeout=STOP_S) as peer:
        yield Piece(f"http://{LOOPBACK}:{peer.port}/mcp", peer.pid)


@contextlib.asynccontextmanager
async def modern_server() -> AsyncIterator[Piece]:
    """The minimal 2026-07-28 server (bench/minimal_modern.py): what the native relay is measured against."""

    def command(port: int) -> list[str]:
        return [PY, str(BENCH / "minimal_modern.py"), "--port", str(port)]

    env = {"PYTHONUNBUFFERED": "1"}
    async with peers.run_peer("minimal-modern", command, env=env, stop_timeout=STOP_S) as peer:
        yield Piece(f"http://{LOOPBACK}:{peer.port}/mcp", peer.pid)


@contextlib.asynccontextmanager
async def fastmcp4_server() -> AsyncIterator[Piece]:
    """FastMCP 4.2.3 (tests/fixtures/fastmcp4_server.py, two eras): the native relay before a real server."""
    async with peers.start_fastmcp4() as url:
        yield Piece(str(url), url.peer.pid)


@contextlib.asynccontextmanager
async def mrtr_proxy(
    upstream: str,
    tmp: Path,
    *,
    gather_window_ms: int = 50,
    big: bool = False,
    more: dict[str, Any] | None = None,
) -> AsyncIterator[Piece]:
    """mrtr-proxy as operators run it (`mrtr-proxy serve --config`), at its default log level (info: one JSON
    line per request, to a file). `big` raises the limits for the parked-calls section; `more`: top-level
    settings over these (e.g. `upstreams` and `routes`)."""
    key = tmp / f"key-{secrets.token_hex(4)}"
    key.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    key.chmod(0o600)
    calls = {"gather_window_ms": gather_window_ms}
    pool: dict[str, Any] = {}
    if big:
        calls.update(max_parked=30000, max_parked_per_principal=30000, max_calls_per_address=0)
        pool = {"max_sessions": 30000}

    def config(port: int) -> list[str]:
        cfg = tmp / f"mrtr-{port}.json"  # YAML is a superset of JSON
        cfg.write_text(
            json.dumps(
                {
                    "listen": {"host": LOOPBACK, "port": port},
                    "keys": {"files": [str(key)]},
                    "logging": {"level": "info", "format": "json"},
                    "calls": calls,
                    "upstreams": [{"name": "bench", "url": upstream, **({"pool": pool} if pool else {})}],
                    **(more or {}),
                }
            )
        )
        return [PY, "-m", "proxy", "serve", "--config", str(cfg)]

    async with peers.run_peer("mrtr-proxy", config, stop_timeout=STOP_S) as peer:
        yield Piece(f"http://{LOOPBACK}:{peer.port}/mcp", peer.pid)


@contextlib.asynccontextmanager
async def fastmcp_proxy(upstream: str, *, shared: bool = False) -> AsyncIterator[Piece]:
    argv = [
        PY,
        str(BENCH / "fastmcp_proxy.py"),
        "--upstream",
        upstream,
        *(["--shared-session"] if shared else []),
    ]

    def command(port: int) -> list[str]:
        return [*argv, "--port", str(port)]

    env = {"PYTHONUNBUFFERED": "1"}
    async with peers.run_peer("fastmcp-proxy", command, env=env, stop_timeout=STOP_S) as peer:
        yield Piece(f"http://{LOOPBACK}:{peer.port}/mcp", peer.pid)


@contextlib.asynccontextmanager
async def floor_relay(
    upstream: str,
    *,
    modern: bool = False,
    mrtr: bool = False,
    wrap: Sequence[str] = (),
    ready_timeout: float = peers.DEFAULT_READY_TIMEOUT,
) -> AsyncIterator[Piece]:
    """The aiohttp floor (bench/floor_relay.py): one server request + one pooled client request per call;
    `modern`: its 2026-07-28 mode (no session, body and MCP headers forwarded as they came); `mrtr`: a call
    that asks for input held open and answered by the client's retry (section 2's floor). Its command after
    `wrap` (valgrind, for bench/hotpath_ir.py)."""

    def command(port: int) -> list[str]:
        argv = [*wrap, PY, str(BENCH / "floor_relay.py"), "--upstream", upstream, "--port", str(port)]
        return [*argv, *(["--modern"] if modern else []), *(["--mrtr"] if mrtr else [])]

    env = {"PYTHONUNBUFFERED": "1"}
    async with peers.run_peer(
        "floor-relay", command, env=env, stop_timeout=STOP_S, ready_timeout=ready_timeout
    ) as peer:
        yield Piece(f"http://{LOOPBACK}:{peer.port}/mcp", peer.pid)


async def loadgen(spec: dict[str, Any]) -> dict[str, Any]:
    """Run bench/loadgen.py in its own process; bounded by the spec's own limit plus a margin."""
    limit = float(spec.get("limit_s", 120)) + 60
    proc = await asyncio.create_subprocess_exec(
        PY,
        str(BENCH / "loadgen.py"),
        json.dumps(spec),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), limit)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"loadgen did not finish within {limit:g}s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"loadgen failed ({proc.returncode}): {err.decode(errors='replace')[-800:]}")
    result: dict[str, Any] = json.loads(out)
    return result


async def measure(spec: dict[str, Any], label: str, pids: dict[str, int] | None = None) -> dict[str, Any]:
    try:
        result = await loadgen(spec)
    except Exception as exc:  # one failed cell must not sink the run; it is reported as such
        say(f"  {label}: FAILED {exc}")
        return {"failed": str(exc)[:500]}
    if pids:
        result = _roles(result, pids)
    lat = result.get("latency", {})
    say(
        f"  {label}: {result.get('throughput_rps', 0):8.0f} req/s"
        f"  p50 {lat.get('p50_ms', float('nan')):7.2f} ms"
        f"  p99 {lat.get('p99_ms', float('nan')):7.2f} ms  errors {result.get('errors', 0)}"
        f"  cpu {', '.join(f'{k} {v:.0f}%' for k, v in result.get('cpu_pct', {}).items())}"
        f", other {result.get('other_cpu_pct', float('nan')):.0f}%"
    )
    return result


def _roles(result: dict[str, Any], pids: dict[str, int]) -> dict[str, Any]:
    """Name the CPU figures by role instead of pid."""
    by_pid = {str(pid): role for role, pid in pids.items()}
    for field in ("cpu_pct", "cpu_us_per_req"):
        if result.get(field):
            result[field] = {by_pid.get(k, k): v for k, v in result[field].items()}
    return result
