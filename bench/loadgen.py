"""The load generator: a raw aiohttp client speaking JSON-RPC over HTTP, run as its own process.

It measures the server or proxy in front of it, not a client SDK (its clients are in ``clients.py``): a
"legacy client" is a raw legacy Streamable HTTP session (``initialize`` + ``notifications/initialized``, then
``Mcp-Session-Id`` on every POST); a "modern client" sends raw 2026-07-28 POSTs (``_meta`` protocol version /
client info / capabilities, and the ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers), no
session.

Invoked by ``bench/run.py`` as ``python bench/loadgen.py '<json spec>'``; prints one JSON object (the result)
on stdout. Every loop is bounded in count and in time. Modes:

- ``pass``: ``concurrency`` workers, each with its own session (legacy), call a plain tool back to back for
  ``warmup`` + ``duration`` seconds (at most ``max_requests``); latencies and throughput of the requests that
  complete inside the window only. A slow target gets a longer window (up to ``max_window``, 4 s) until at
  least two requests per client completed in it, so a 2-second request still yields a throughput.
- ``roundtrip``: ``concurrency`` workers run one elicitation answered at once, back to back: legacy inline
  (answer POSTed while the call's SSE stream waits) or MRTR (``input_required``, then the retry).
- ``park``: start ``count`` MRTR calls that elicit and leave them parked (``input_required`` received).
- ``list``: as ``pass``, with ``tools/list`` (modern clients) instead of a call; ``expect_tools``: how many
  tools the page must hold.

With ``watch_pids``, the CPU time (utime+stime from /proc/<pid>/stat) of those processes over the window is
reported too, next to this process's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from clients import BenchError, Legacy, Modern, result_text

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15)


def _machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICKS  # less idle and iowait


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


def summarize(latencies: list[float]) -> dict[str, Any]:
    values = sorted(latencies)
    ms = 1000.0
    return {
        "n": len(values),
        "p50_ms": _percentile(values, 0.50) * ms,
        "p90_ms": _percentile(values, 0.90) * ms,
        "p99_ms": _percentile(values, 0.99) * ms,
        "mean_ms": (sum(values) / len(values) * ms) if values else float("nan"),
        "max_ms": values[-1] * ms if values else float("nan"),
    }


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    mode = spec["mode"]
    concurrency = int(spec.get("concurrency", 1))
    timeout = aiohttp.ClientTimeout(total=float(spec.get("request_timeout", 60)))
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        if mode == "park":
            return await _park(http, spec)
        clients: list[Legacy | Modern] = []
        for _ in range(concurrency):
            clients.append(
                Legacy(http, spec["url"]) if spec["kind"] == "legacy" else Modern(http, spec["url"])
            )
        try:
            await asyncio.gather(*(c.open() for c in clients if isinstance(c, Legacy)))
            return await _timed(clients, spec)
        finally:
            await asyncio.gather(*(c.close() for c in clients if isinstance(c, Legacy)))


async def _timed(clients: list[Legacy | Modern], spec: dict[str, Any]) -> dict[str, Any]:
    mode = spec["mode"]
    tool = spec.get("tool", "")
    args = spec.get("args", {})
    expect = spec.get("expect")
    warmup, duration = float(spec.get("warmup", 0.5)), float(spec["duration"])
    max_requests = int(spec.get("max_requests", 1_000_000))
    watch = [int(p) for p in spec.get("watch_pids", [])]
    # The window is `duration` long, or longer for slow targets: until it holds at least `min_completions`
    # (default 2 per client), never past `max_window` seconds.
    min_completions = int(spec.get("min_completions", 2 * len(clients)))
    max_window = float(spec.get("max_window", max(duration, 4.0)))
    # The warm-up lasts `warmup` seconds and, bounded by `warm_limit`, until every client has completed a
    # call: a cell at a concurrency the target has not seen yet first grows its pools (through mrtr-proxy,
    # one upstream session per call in flight, each with its own GET stream and initialize POSTs); that is
    # the warm-up of that concurrency, not what the window measures. Against FastMCP 1.30 the growth from 16
    # to 64 sessions outlasted a fixed 0.5 s and put dozens of new upstream connections in the first
    # 64-client window (issue 31).
    warm_limit = float(spec.get("warm_limit", 10.0))
    loop = asyncio.get_running_loop()
    start = loop.time()
    window_start = float("inf")  # once warm (marks)
    warm_clients: set[int] = set()
    warm = asyncio.Event()  # set once every client has completed a call
    latencies: list[float] = []
    errors: list[str] = []
    done = 0
    stopped = False
    enough = asyncio.Event()  # set once the window holds min_completions
    cpu_marks: dict[str, float] = {}
    count_port = spec.get("count_port")  # count new TCP connections to this port over the window
    ports: dict[int, set[int]] = {}

    async def marks() -> None:
        nonlocal stopped, window_start
        await asyncio.sleep(warmup)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(warm.wait(), max(0.0, start + warm_limit - loop.time()))
        window_start = loop.time()
        cpu_marks["self0"] = time.process_time()
        cpu_marks["machine0"] = _machine_busy_seconds()
        for pid in watch:
            cpu_marks[f"{pid}:0"] = _cpu_seconds(pid)
        if count_port is not None:
            ports[0] = client_ports(count_port)
        cpu_marks["t0"] = time.perf_counter()
        await asyncio.sleep(max(0.0, window_start + duration - loop.time()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(enough.wait(), max(0.0, window_start + max_window - loop.time()))
        stopped = True
        cpu_marks["self1"] = time.process_time()
        cpu_marks["machine1"] = _machine_busy_seconds()
        for pid in watch:
            cpu_marks[f"{pid}:1"] = _cpu_seconds(pid)
        if count_port is not None:
            ports[1] = client_ports(count_port)
        cpu_marks["t1"] = time.perf_counter()

    async def worker(client: Legacy | Modern) -> None:
        nonlocal done
        while done < max_requests and not stopped:
            t0 = loop.time()
            try:
                result: dict[str, Any] | None = None
                if mode == "list" and isinstance(client, Modern):
                    count = len((await client.list_tools()).get("tools", []))
                    if count != spec.get("expect_tools", count):
                        raise BenchError(f"{count} tools listed, wanted {spec['expect_tools']}")
                elif mode == "pass":
                    result = await client.call(tool, args)
                elif isinstance(client, Legacy):
                    result = await client.ask_inline(tool)
                else:
                    result = await client.ask_mrtr(tool)
                if expect is not None and result is not None and result_text(result) != expect:
                    raise BenchError(f"unexpected result {result_text(result)!r}, wanted {expect!r}")
            except (BenchError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
                if len(errors) > 50:
                    raise BenchError(f"too many errors, first: {errors[0]}") from None
                await asyncio.sleep(0.01)
                continue
            t1 = loop.time()
            if not warm.is_set():
                warm_clients.add(id(client))
                if len(warm_clients) == len(clients):
                    warm.set()
            if window_start <= t1 and not stopped:  # completions inside the window (closed loop)
                latencies.append(t1 - t0)
                if len(latencies) >= min_completions:
                    enough.set()
            done += 1

    await asyncio.gather(marks(), *(worker(c) for c in clients))
    elapsed = cpu_marks["t1"] - cpu_marks["t0"]
    out: dict[str, Any] = {
        "mode": mode,
        "kind": spec["kind"],
        "concurrency": len(clients),
        "window_s": elapsed,
        "warmup_s": window_start - start,
        "completed": len(latencies),
        "throughput_rps": len(latencies) / elapsed if elapsed > 0 else 0.0,
        "errors": len(errors),
        "first_errors": errors[:3],
        "latency": summarize(latencies),
        "cpu_pct": {"loadgen": 100.0 * (cpu_marks["self1"] - cpu_marks["self0"]) / elapsed},
    }
    for pid in watch:
        out["cpu_pct"][str(pid)] = 100.0 * (cpu_marks[f"{pid}:1"] - cpu_marks[f"{pid}:0"]) / elapsed
    if len(ports) == 2:  # a connection reused keeps its port; every new one adds a port
        out["new_conns"] = len(ports[1] - ports[0])
    # CPU % of one core: the whole machine, and what neither this process nor the watched ones used
    machine = 100.0 * (cpu_marks["machine1"] - cpu_marks["machine0"]) / elapsed
    out["machine_cpu_pct"] = machine
    out["other_cpu_pct"] = max(0.0, machine - sum(out["cpu_pct"].values()))
    # CPU time each process spent per completed request: steadier than throughput on a shared machine
    out["cpu_us_per_req"] = {
        k: (v / 100.0 * elapsed / len(latencies) * 1e6 if latencies else None)
        for k, v in out["cpu_pct"].items()
    }
    return out


def client_ports(port: int) -> set[int]:
    """Ephemeral ports of every IPv4 socket to or from `port` (open or in TIME_WAIT, which lasts a minute on
    Linux), from the kernel's table."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(addr.rsplit(":", 1)[1], 16) for addr in fields[1:3])
        if remote == port and local != port:
            found.add(local)
        elif local == port and remote not in (0, port):
            found.add(remote)
    return found


async def _park(http: aiohttp.ClientSession, spec: dict[str, Any]) -> dict[str, Any]:
    """Leave `count` calls parked (bounded: `limit_s` in all, `concurrency` in flight)."""
    count, concurrency = int(spec["count"]), int(spec.get("concurrency", 64))
    deadline = time.monotonic() + float(spec.get("limit_s", 300))
    client = Modern(http, spec["url"])
    todo = iter(range(count))
    parked = 0
    errors: list[str] = []
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal parked
        for _ in todo:
            if time.monotonic() > deadline or len(errors) > 50:
                return
            try:
                await client.park(spec["tool"])
                parked += 1
            except (BenchError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}"[:300])

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "mode": "park",
        "requested": count,
        "parked": parked,
        "elapsed_s": elapsed,
        "rate_per_s": parked / elapsed if elapsed > 0 else 0.0,
        "errors": len(errors),
        "first_errors": errors[:3],
    }


def main() -> None:
    spec = json.loads(sys.argv[1])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    result = asyncio.run(asyncio.wait_for(run(spec), timeout=float(spec.get("limit_s", 120)) + 30))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
