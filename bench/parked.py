"""Section 3 of a bench run: calls left parked (the client never answers) at increasing counts, and at each
level the proxy's memory, its open file descriptors and the latency of new plain calls."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

from machine import rss_kb
from pieces import legacy_server, loadgen, measure, mrtr_proxy
from plan import Plan, say


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
