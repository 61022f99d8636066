"""The machine a bench run measures on: its facts for the report (CPU, memory, versions, git), how busy other
processes keep it (a shared machine makes the figures noisy: say so, or wait for quiet), the file limit
parked calls need, and a process's CPU time and memory read from /proc."""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

from plan import ROOT, say

NOFILE = 65536  # 10,000 parked calls hold ~20,000 upstream connections in the proxy and as many in the server


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


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")
