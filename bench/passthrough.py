"""Sections 1 and 2 of a bench run, per legacy server: pass-through (a plain tool, direct vs mrtr-proxy vs the
aiohttp floor vs FastMCP's proxy, repetitions interleaved) and the round trip (one elicitation answered at
once); and the py-spy profile of the proxy taken between them."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from pathlib import Path
from typing import Any

import hotspots
from machine import cpu_seconds
from pieces import fastmcp_proxy, floor_relay, legacy_server, loadgen, measure, mrtr_proxy
from plan import PY, ROOT, Plan, say

TOOLS = {
    "minimal": {"echo": "echo", "ask": "ask"},
    "fastmcp130": {"echo": "echo", "ask": "ask_name"},
}


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
        floor_relay(up.url, mrtr=True) as flm,
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
            "floor": ("modern", flm.url, {"proxy": flm.pid, "upstream": up.pid}),
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
        cpu0, wall0 = cpu_seconds(pid), time.monotonic()
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
        out[f"{fmt}_proxy_cpu_pct"] = round(100 * (cpu_seconds(pid) - cpu0) / (time.monotonic() - wall0), 1)
        with contextlib.suppress(Exception):
            out[f"{fmt}_load"] = {k: (await load).get(k) for k in ("throughput_rps", "other_cpu_pct")}
        if proc.returncode != 0:
            say(f"  profile ({fmt}): py-spy failed: {err.decode(errors='replace')[-400:]}")
            out[f"{fmt}_error"] = err.decode(errors="replace")[-400:]
    if raw.exists():
        out.update(hotspots.analyse_profile(raw.read_text(), ROOT))
        out["files"] = [str(p.relative_to(ROOT)) for p in (raw, svg) if p.exists()]
        say(f"  profile: {out.get('samples', 0)} samples -> {', '.join(out['files'])}")
    return out
