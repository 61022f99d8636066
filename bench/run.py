"""`make bench`: what putting mrtr-proxy in front of a legacy MCP server costs, measured side by side.

Starts the real pieces on 127.0.0.1 (each its own process), drives them with ``bench/loadgen.py`` (another
process), prints a table, writes ``bench/results/latest.json`` and ``latest.png``, a py-spy profile of the
proxy, and appends a dated section to ``bench/RESULTS.md``. Run it with the bench venv's Python (see the
Makefile)::

    python bench/run.py            # the full run (~6-10 minutes on 2 cores)
    python bench/run.py --quick    # smaller counts (~2-3 minutes)

Sections:
1. pass-through: a plain tool, 1/16/64 concurrent clients: direct (legacy client) vs mrtr-proxy (modern
   client) vs FastMCP's ``create_proxy`` (legacy client), in front of a minimal aiohttp legacy server and
   of FastMCP 1.30; repetitions interleaved (direct, mrtr, fastmcp, direct, …), medians reported.
2. round trip: one elicitation answered at once: legacy inline direct vs MRTR through the proxy (with the
   default 50 ms gather window and with 0), and inline through FastMCP's proxy.
3. parked calls: proxy RSS and latency of new plain calls while N calls are parked waiting for input.
4. handle: seal and unseal per handle (µs), handle size (bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(BENCH))

import peers  # noqa: E402  (tests/peers.py: free ports, start/stop processes, bounded)

import report  # noqa: E402

PY = sys.executable
LOOPBACK = "127.0.0.1"
STOP_S = 1.0  # SIGTERM, then SIGKILL after this long: nothing here needs a graceful shutdown
NOFILE = 65536  # 10,000 parked calls hold ~20,000 upstream connections in the proxy and as many in the server
UPSTREAMS = ("minimal", "fastmcp130")
PATHS = ("direct", "mrtr", "floor", "fastmcp", "fastmcp_shared")


@dataclass(frozen=True)
class Plan:
    name: str
    reps: int
    duration: float
    warmup: float
    concurrencies: tuple[int, ...]
    rt_duration: float
    parked_levels: tuple[int, ...]
    park_concurrency: int
    profile_s: float


FULL = Plan("full", 3, 2.0, 0.4, (1, 16, 64), 1.5, (1000, 5000, 10000), 128, 5.0)
QUICK = Plan("quick", 2, 1.0, 0.3, (1, 16), 1.0, (100, 1000), 64, 3.0)


_T0 = time.monotonic()


def say(*args: Any) -> None:
    print(f"{time.monotonic() - _T0:6.1f}s", *args, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# machine facts


def machine() -> dict[str, Any]:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem_kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "mem_gb": round(mem_kb / 1024 / 1024, 1),
        "loadavg": os.getloadavg(),
        **_background_fields(),
        "versions": versions(),
        "git": git_state(),
    }


def _cpu_totals() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle


def _proc_cpu() -> dict[int, tuple[int, str]]:
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            out[int(entry.name)] = (
                int(fields[11]) + int(fields[12]),
                stat.split("(", 1)[1].rsplit(")", 1)[0],
            )
    return out


def background_cpu(seconds: float = 1.0) -> float:
    """Busy % of the whole machine (all cores = 100) while the bench itself is idle."""
    return background(seconds)["busy_pct"]


def background(seconds: float = 1.0) -> dict[str, Any]:
    """Busy % of the whole machine (all cores = 100) while the bench itself is idle, and the busiest processes
    (other sessions on a shared machine make the figures noisy: say so)."""
    procs0 = _proc_cpu()
    total0, idle0 = _cpu_totals()
    time.sleep(seconds)
    total1, idle1 = _cpu_totals()
    procs1 = _proc_cpu()
    ticks = os.sysconf("SC_CLK_TCK")
    busy = [
        {"pid": pid, "comm": comm, "cpu_pct": round(100.0 * (t - procs0[pid][0]) / ticks / seconds, 1)}
        for pid, (t, comm) in procs1.items()
        if pid in procs0 and pid != os.getpid() and t > procs0[pid][0]
    ]
    busy.sort(key=lambda x: -x["cpu_pct"])
    return {
        "busy_pct": round(100.0 * (1 - (idle1 - idle0) / max(1, total1 - total0)), 1),
        "top": busy[:3],
    }


def wait_quiet(limit_s: float, threshold_pct: float = 10.0) -> None:
    """Wait (bounded) until other processes leave the machine alone; say what keeps it busy."""
    deadline = time.monotonic() + limit_s
    while True:
        bg = background(2.0)
        if bg["busy_pct"] < threshold_pct:
            return
        if time.monotonic() >= deadline:
            say(f"machine still busy ({bg['busy_pct']}%: {bg['top']}); measuring anyway")
            return
        say(
            f"waiting for a quiet machine: {bg['busy_pct']}% busy ({', '.join(t['comm'] for t in bg['top'])})"
        )
        time.sleep(5.0)


def _background_fields() -> dict[str, Any]:
    bg = background()
    return {"background_cpu_pct": bg["busy_pct"], "background_top": bg["top"]}


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("aiohttp", "fastmcp", "mcp", "cryptography", "structlog", "mrtr-proxy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def git_state() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "proxy"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return f"{head}{' (proxy/ has uncommitted changes)' if dirty else ''}"


def raise_nofile() -> int:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(hard, NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


# --------------------------------------------------------------------------------------------------
# the pieces


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
async def mrtr_proxy(
    upstream: str, tmp: Path, *, gather_window_ms: int = 50, big: bool = False
) -> AsyncIterator[Piece]:
    """mrtr-proxy as operators run it (`mrtr-proxy serve --config`), at its default log level (info: one JSON
    line per request, to a file). `big` raises the limits for the parked-calls section."""
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
async def floor_relay(upstream: str) -> AsyncIterator[Piece]:
    """The aiohttp floor (bench/floor_relay.py): one server request + one pooled client request per call."""

    def command(port: int) -> list[str]:
        return [PY, str(BENCH / "floor_relay.py"), "--upstream", upstream, "--port", str(port)]

    env = {"PYTHONUNBUFFERED": "1"}
    async with peers.run_peer("floor-relay", command, env=env, stop_timeout=STOP_S) as peer:
        yield Piece(f"http://{LOOPBACK}:{peer.port}/mcp", peer.pid)


TOOLS = {
    "minimal": {"echo": "echo", "ask": "ask"},
    "fastmcp130": {"echo": "echo", "ask": "ask_name"},
}


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


# --------------------------------------------------------------------------------------------------
# 1 + 2: pass-through and round trip, per legacy server


def _roles(result: dict[str, Any], pids: dict[str, int]) -> dict[str, Any]:
    """Name the CPU figures by role instead of pid."""
    by_pid = {str(pid): role for role, pid in pids.items()}
    for field in ("cpu_pct", "cpu_us_per_req"):
        if result.get(field):
            result[field] = {by_pid.get(k, k): v for k, v in result[field].items()}
    return result


async def pass_and_roundtrip(
    kind: str, plan: Plan, tmp: Path, profile_dir: Path | None, *, shared: bool
) -> dict[str, Any]:
    tools = TOOLS[kind]
    out: dict[str, Any] = {"pass": {}, "roundtrip": {}}
    async with (
        legacy_server(kind) as up,
        mrtr_proxy(up.url, tmp) as mp,
        mrtr_proxy(up.url, tmp, gather_window_ms=0) as mp0,
        floor_relay(up.url) as fl,
        fastmcp_proxy(up.url) as fp,
        fastmcp_proxy(up.url, shared=True) if shared else contextlib.nullcontext() as fps,
    ):
        say(
            f"[{kind}] legacy server {up.url}, mrtr-proxy {mp.url} (and {mp0.url} with gather 0), "
            f"fastmcp proxy {fp.url}"
        )
        targets = {
            "direct": ("legacy", up.url, {"upstream": up.pid}),
            "mrtr": ("modern", mp.url, {"proxy": mp.pid, "upstream": up.pid}),
            "floor": ("modern", fl.url, {"proxy": fl.pid, "upstream": up.pid}),
            "fastmcp": ("legacy", fp.url, {"proxy": fp.pid, "upstream": up.pid}),
        }
        if fps is not None:
            targets["fastmcp_shared"] = ("legacy", fps.url, {"proxy": fps.pid, "upstream": up.pid})
        echo = {"tool": tools["echo"], "args": {"text": "hello"}, "expect": "hello"}
        say(f"[{kind}] warm-up")
        for path, (client, url, _) in targets.items():
            await measure(
                {
                    "mode": "pass",
                    "kind": client,
                    "url": url,
                    "concurrency": 8,
                    "duration": 0.5,
                    "warmup": 0.2,
                    "limit_s": 60,
                    **echo,
                },
                f"warm {path}",
            )
        cells: dict[int, dict[str, list[dict[str, Any]]]] = {
            c: {p: [] for p in targets} for c in plan.concurrencies
        }
        for rep in range(plan.reps):
            for c in plan.concurrencies:
                for path, (client, url, pids) in targets.items():
                    spec = {
                        "mode": "pass",
                        "kind": client,
                        "url": url,
                        "concurrency": c,
                        "duration": plan.duration,
                        "warmup": plan.warmup,
                        "limit_s": 90,
                        "max_requests": 2_000_000,
                        "watch_pids": list(pids.values()),
                        **echo,
                    }
                    if path == "mrtr":  # new TCP connections to the legacy server in the window
                        spec["count_port"] = int(up.url.split(":")[2].split("/", maxsplit=1)[0])
                    result = await measure(
                        spec, f"[{kind}] pass rep {rep + 1}/{plan.reps} c={c:<3} {path:<14}", pids
                    )
                    cells[c][path].append(result)
        out["pass"] = {str(c): v for c, v in cells.items()}

        if profile_dir is not None:
            out["profile"] = await profile_proxy(mp.pid, mp.url, echo, plan, profile_dir)

        rt_targets = {
            "direct": ("legacy", up.url, {"upstream": up.pid}),
            "mrtr": ("modern", mp.url, {"proxy": mp.pid, "upstream": up.pid}),
            "mrtr_gather0": ("modern", mp0.url, {"proxy": mp0.pid, "upstream": up.pid}),
            "fastmcp": ("legacy", fp.url, {"proxy": fp.pid, "upstream": up.pid}),
        }
        ask = {"tool": tools["ask"], "expect": "accept:Alice"}
        rt: dict[str, list[dict[str, Any]]] = {p: [] for p in rt_targets}
        for rep in range(plan.reps):
            for path, (client, url, pids) in rt_targets.items():
                spec = {
                    "mode": "roundtrip",
                    "kind": client,
                    "url": url,
                    "concurrency": 1,
                    "duration": plan.rt_duration,
                    "warmup": 0.3,
                    "limit_s": 90,
                    "max_requests": 100_000,
                    "watch_pids": list(pids.values()),
                    **ask,
                }
                result = await measure(spec, f"[{kind}] roundtrip rep {rep + 1}/{plan.reps} {path:<13}", pids)
                rt[path].append(result)
        out["roundtrip"] = rt
    return out


# --------------------------------------------------------------------------------------------------
# profile


async def profile_proxy(
    pid: int, url: str, echo: dict[str, Any], plan: Plan, profile_dir: Path
) -> dict[str, Any]:
    """py-spy on the proxy during a pass-through run (modern client, 16 concurrent, minimal upstream)."""
    pyspy = shutil.which("py-spy", path=str(Path(PY).parent)) or shutil.which("py-spy")
    if pyspy is None:
        say("  profile: py-spy not found, skipped")
        return {"skipped": "py-spy not installed"}
    await asyncio.to_thread(profile_dir.mkdir, parents=True, exist_ok=True)
    raw = profile_dir / "profile-proxy.txt"
    svg = profile_dir / "profile-proxy.svg"
    out: dict[str, Any] = {
        "workload": "pass-through, modern client, 16 concurrent, minimal legacy server",
        "seconds": plan.profile_s,
    }
    for fmt, path in (("raw", raw), ("flamegraph", svg)):
        spec = {
            "mode": "pass",
            "kind": "modern",
            "url": url,
            "concurrency": 16,
            "duration": plan.profile_s + 1.0,
            "warmup": 0.2,
            "limit_s": 60,
            **echo,
        }
        load = asyncio.create_task(loadgen(spec))
        await asyncio.sleep(0.5)
        cpu0, wall0 = _cpu_seconds(pid), time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            pyspy,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(plan.profile_s)),
            "--rate",
            "250",
            "--format",
            fmt,
            "--output",
            str(path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _, err = await asyncio.wait_for(proc.communicate(), plan.profile_s + 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            err = b"py-spy timed out"
        out[f"{fmt}_proxy_cpu_pct"] = round(100 * (_cpu_seconds(pid) - cpu0) / (time.monotonic() - wall0), 1)
        with contextlib.suppress(Exception):
            out[f"{fmt}_load"] = {k: (await load).get(k) for k in ("throughput_rps", "other_cpu_pct")}
        if proc.returncode != 0:
            say(f"  profile ({fmt}): py-spy failed: {err.decode(errors='replace')[-400:]}")
            out[f"{fmt}_error"] = err.decode(errors="replace")[-400:]
    if raw.exists():
        out.update(report.analyse_profile(raw.read_text(), ROOT))
        out["files"] = [str(p.relative_to(ROOT)) for p in (raw, svg) if p.exists()]
        say(f"  profile: {out.get('samples', 0)} samples -> {', '.join(out['files'])}")
    return out


# --------------------------------------------------------------------------------------------------
# 3: parked calls


async def parked(plan: Plan, tmp: Path, nofile: int) -> dict[str, Any]:
    """Each parked call holds a live upstream session: its POST stream and its GET stream, i.e. two sockets in
    the proxy and two in the legacy server. The file-descriptor limit caps how many fit; when the last level
    does not, it is measured once more with a legacy server that offers no GET stream (one socket a call)."""
    cap = (nofile - 1000) // 2
    levels = sorted({min(n, cap) for n in plan.parked_levels})
    out: dict[str, Any] = {"fd_limit": nofile, "cap_with_get_stream": cap, "runs": []}
    if levels[-1] < plan.parked_levels[-1]:
        say(
            f"[parked] RLIMIT_NOFILE is {nofile} and cannot be raised here: at most {cap} calls can be "
            "parked with a GET stream each"
        )
    out["runs"].append(await parked_run(plan, tmp, levels, get_stream=True))
    if levels[-1] < plan.parked_levels[-1]:
        out["runs"].append(await parked_run(plan, tmp, [plan.parked_levels[-1]], get_stream=False))
    return out


async def parked_run(plan: Plan, tmp: Path, levels: list[int], *, get_stream: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"get_stream": get_stream, "levels": []}
    async with legacy_server("minimal", get_stream=get_stream) as up, mrtr_proxy(up.url, tmp, big=True) as mp:
        tag = "parked" if get_stream else "parked, no GET"
        say(
            f"[{tag}] minimal legacy server {up.url}{'' if get_stream else ' (no GET stream)'}, "
            f"mrtr-proxy {mp.url} (limits raised to 30,000)"
        )
        echo = {"tool": "echo", "args": {"text": "hello"}, "expect": "hello"}
        base = {
            "mode": "pass",
            "kind": "modern",
            "url": mp.url,
            "limit_s": 90,
            "watch_pids": [mp.pid, up.pid],
            **echo,
        }
        pids = {"proxy": mp.pid, "upstream": up.pid}
        await measure({**base, "concurrency": 16, "duration": 1.0, "warmup": 0.3}, f"[{tag}] warm-up", pids)

        async def level(n: int, park: dict[str, Any] | None) -> None:
            await asyncio.sleep(1.0)  # let the proxy settle (gather windows, GC)
            entry: dict[str, Any] = {
                "parked": await parked_count(mp.url),
                "target": n,
                "proxy_rss_kb": rss_kb(mp.pid),
                "upstream_rss_kb": rss_kb(up.pid),
                "proxy_fds": len(os.listdir(f"/proc/{mp.pid}/fd")),
                "park": park,
            }
            for c in (1, 16):
                entry[f"c{c}"] = await measure(
                    {**base, "concurrency": c, "duration": plan.duration, "warmup": plan.warmup},
                    f"[{tag} {entry['parked']:>6}] new calls c={c:<3}",
                    pids,
                )
            say(
                f"[{tag} {entry['parked']:>6}] proxy RSS {entry['proxy_rss_kb'] / 1024:.1f} MB, "
                f"{entry['proxy_fds']} fds; legacy server RSS {entry['upstream_rss_kb'] / 1024:.1f} MB"
            )
            out["levels"].append(entry)

        await level(0, None)
        done = 0
        for target in levels:
            requested = target - done
            say(f"[{tag}] parking {requested} more calls ({plan.park_concurrency} in flight)…")
            park = await loadgen(
                {
                    "mode": "park",
                    "url": mp.url,
                    "tool": "ask",
                    "count": requested,
                    "concurrency": plan.park_concurrency,
                    "limit_s": 240,
                }
            )
            say(
                f"[{tag}] parked {park['parked']} in {park['elapsed_s']:.1f}s ({park['rate_per_s']:.0f}/s), "
                f"errors {park['errors']} {park['first_errors'][:1]}"
            )
            done += park["parked"]
            await level(target, park)
            if park["parked"] < requested:
                out["stopped"] = f"could not park more than {done}: {park['first_errors'][:1]}"
                break
    return out


async def parked_count(url: str) -> int | None:
    import aiohttp

    with contextlib.suppress(Exception):
        async with (
            aiohttp.ClientSession() as http,
            http.get(url.replace("/mcp", "/readyz"), timeout=aiohttp.ClientTimeout(total=10)) as resp,
        ):
            data = await resp.json()
            return int(data["parked_calls"])
    return None


# --------------------------------------------------------------------------------------------------
# 4: handles


def handles(number: int = 20000, repeat: int = 7) -> dict[str, Any]:
    """Seal (build the claims + seal, as a parked round does) and unseal (open + verify, as a retry does)."""
    from proxy.handle import HandleCodec, KeyRing, principal_digest, target_digest

    codec = HandleCodec(KeyRing.ephemeral())
    now = int(time.time())
    cases = {
        "typical": dict(
            upstream="default",
            session=uuid.uuid4().hex,
            call=secrets.token_urlsafe(12),
            round=1,
            pending={"elicit-1": 0},
            owner="127.0.0.1:8080",
            principal=principal_digest("Bearer " + "t" * 40),
            target=target_digest("tools/call", {"name": "ask_name", "arguments": {}}),
            issued_at=now,
            expires_at=now + 600,
            last_event=None,
        ),
        "large": dict(  # three requests in one round, a resumable upstream's event id, a long owner name
            upstream="search-backend",
            session=str(uuid.uuid4()),
            call=secrets.token_urlsafe(12),
            round=7,
            pending={"elicit-3": 12, "sample-4": 13, "roots-5": 14},
            owner="mrtr-proxy-7d9f8c6b5-x2x4z.mrtr-proxy.svc.cluster.local:8080",
            principal=principal_digest("Bearer " + "t" * 400),
            target=target_digest("tools/call", {"name": "all_at_once", "arguments": {"prompt": "x" * 200}}),
            issued_at=now,
            expires_at=now + 600,
            last_event="_GET_stream:123456",
        ),
    }
    return {name: _handle_case(codec, fields, number, repeat) for name, fields in cases.items()}


def _handle_case(codec: Any, fields: dict[str, Any], number: int, repeat: int) -> dict[str, Any]:
    from proxy.handle import FORMAT_VERSION, Claims, decode_claims, encode_claims, target_digest

    claims = Claims(**fields)
    token = codec.seal(claims)
    plaintext = encode_claims(claims)
    ring = codec.ring
    verify = {"upstream": claims.upstream, "principal": claims.principal, "target": claims.target}

    def per_op(fn: Any) -> float:
        # CPU time of this process (not wall time): time spent preempted by other processes does not count.
        timer = timeit.Timer(fn, timer=time.process_time)
        return float(statistics.median(timer.repeat(number=number, repeat=repeat)) / number * 1e6)

    steps = {  # where the time goes, step by step
        "claims_build": lambda: Claims(**fields),
        "encode_claims": lambda: encode_claims(claims),
        "aead_seal_b64": lambda: ring.seal(plaintext, version=FORMAT_VERSION),
        "b64_aead_unseal": lambda: ring.unseal(token, versions=(FORMAT_VERSION,)),
        "decode_claims": lambda: decode_claims(plaintext),
        "verify": lambda: codec.verify(claims, **verify),
    }
    out: dict[str, Any] = {
        "seal_us": per_op(lambda: codec.seal(Claims(**fields))),
        "unseal_us": per_op(lambda: codec.verify(codec.open(token), **verify)),
        "target_digest_us": per_op(
            lambda: target_digest("tools/call", {"name": "ask_name", "arguments": {}})
        ),
        "handle_bytes": len(token.encode()),
        "claims_bytes": len(plaintext),
        "steps_us": {step: round(per_op(fn), 2) for step, fn in steps.items()},
    }
    out["seal_unseal_us"] = out["seal_us"] + out["unseal_us"]
    return out


# --------------------------------------------------------------------------------------------------


async def main_async(plan: Plan, args: argparse.Namespace, nofile: int) -> dict[str, Any]:
    started = time.time()
    data: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "plan": asdict(plan),
        "machine": {**machine(), "nofile": nofile},
        "notes": [
            "Every piece runs in its own process on 127.0.0.1; the load generator (raw aiohttp JSON-RPC "
            "client) is a separate process too, so all of them share the machine's cores under the OS "
            "scheduler.",
            "mrtr-proxy runs at its default log level (info: one JSON line per request, written to a file); "
            "FastMCP's proxy runs at log level warning without uvicorn's access log.",
            "FastMCP proxy = create_proxy(url), which opens a fresh upstream session per request (its "
            "default); 'FastMCP shared' = create_proxy(connected Client), one upstream session reused by "
            "every request "
            "(its best case for plain calls; FastMCP warns it may mix request contexts).",
            "Figures are medians over interleaved repetitions (direct, mrtr, fastmcp, direct, …).",
        ],
    }
    say(
        f"bench ({plan.name}): {data['machine']['nproc']} cores, {data['machine']['cpu_model']}, "
        f"Python {data['machine']['python']}, background CPU {data['machine']['background_cpu_pct']}%, "
        f"RLIMIT_NOFILE {data['machine']['nofile']}"
    )
    if data["machine"]["background_cpu_pct"] > 10:
        say("WARNING: other processes are using the CPU; the figures will be noisy")
    say("[handles] seal/unseal micro-benchmark")
    data["handles"] = handles(number=2000 if plan.name == "quick" else 5000, repeat=5)
    typical = data["handles"]["typical"]
    say(
        f"  typical handle: seal {typical['seal_us']:.1f} µs, unseal {typical['unseal_us']:.1f} µs, "
        f"{typical['handle_bytes']} bytes"
    )
    with tempfile.TemporaryDirectory(prefix="mrtr-bench-") as tmp_name:
        tmp = Path(tmp_name)
        data["upstreams"] = {}
        for kind in args.upstreams:
            data["upstreams"][kind] = await pass_and_roundtrip(
                kind,
                plan,
                tmp,
                RESULTS if (kind == "minimal" and not args.no_profile) else None,
                shared=not args.no_fastmcp_shared,
            )
        if not args.no_parked:
            data["parked"] = await parked(plan, tmp, nofile)
    data["elapsed_s"] = round(time.time() - started, 1)
    data["machine"]["background_cpu_pct_after"] = background_cpu()
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description="mrtr-proxy benchmarks (see bench/README.md)")
    parser.add_argument("--quick", action="store_true", help="smaller counts (~2-3 minutes)")
    parser.add_argument("--upstreams", nargs="+", choices=UPSTREAMS, default=list(UPSTREAMS))
    parser.add_argument(
        "--parked-levels",
        nargs="+",
        type=int,
        help="parked-call counts to measure (default: the plan's: 100 1000 quick, 1000 5000 10000 full)",
    )
    parser.add_argument("--no-parked", action="store_true", help="skip the parked-calls section")
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy profile")
    parser.add_argument(
        "--no-fastmcp-shared",
        action="store_true",
        help="skip FastMCP's proxy with one shared upstream session (its best case)",
    )
    parser.add_argument("--no-record", action="store_true", help="do not append to bench/RESULTS.md")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="first wait up to SECONDS for the machine to be quiet (other processes < 10%% CPU)",
    )
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    if args.parked_levels:
        plan = dataclasses.replace(plan, parked_levels=tuple(sorted(args.parked_levels)))
    nofile = raise_nofile()
    if args.wait_quiet > 0:
        wait_quiet(args.wait_quiet)
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = asyncio.run(main_async(plan, args, nofile))
    report.finish(data, RESULTS, BENCH / "RESULTS.md", record=not args.no_record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
