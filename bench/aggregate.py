"""Aggregated routes (issue 30): what listing and calling through an aggregate of 4 upstreams costs beside a
single-upstream route, in one proxy process, cells interleaved.

Four minimal legacy servers (bench/minimal_server.py) are the upstreams `u0` … `u3` of one mrtr-proxy; the
route `fleet` aggregates all four (conditional prefixes: `u0__echo` …), and `u0` keeps its own route
(`/servers/u0/mcp`). Each repetition runs, at each concurrency, `tools/list` and then `tools/call echo`
through the single route and through the aggregate, back to back (modern clients). The aggregate's lists
are served from its list-page cache (`list_cache_ms`, default 5 s: one client asks the same list again and
again); the same list through `fleet0`, the same four upstreams with `list_cache_ms: 0`, shows what a list
costs when every upstream is asked. `goals.aggregate_rows`
judges the ratios (proxy CPU per request, from /proc over each cell's window) against the issue's 1.2 times.

Run alone (a few seconds a cell; prints the rows, writes nothing): ``python bench/aggregate.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import goals
from pieces import legacy_server, measure, mrtr_proxy
from plan import FULL, QUICK, Plan, say

MEMBERS = 4
OPS = {  # what each cell does, through the single route and through the aggregate
    "tools/list": ({"mode": "list", "expect_tools": 2}, {"mode": "list", "expect_tools": 2 * MEMBERS}),
    "tools/list, list_cache_ms 0": (
        {"mode": "list", "expect_tools": 2},
        {"mode": "list", "expect_tools": 2 * MEMBERS, "route": "fleet0"},
    ),
    "tools/call": (
        {"mode": "pass", "tool": "echo", "args": {"text": "hello"}, "expect": "hello"},
        {"mode": "pass", "tool": "u0__echo", "args": {"text": "hello"}, "expect": "hello"},
    ),
}


async def aggregate(plan: Plan, tmp: Path) -> dict[str, Any]:
    async with contextlib.AsyncExitStack() as stack:
        ups = [await stack.enter_async_context(legacy_server("minimal")) for _ in range(MEMBERS)]
        names = [f"u{i}" for i in range(MEMBERS)]
        more = {
            "upstreams": [{"name": n, "url": up.url} for n, up in zip(names, ups, strict=True)],
            "routes": [
                {"name": "fleet", "upstreams": names},
                {"name": "fleet0", "upstreams": names, "list_cache_ms": 0},
            ],
        }
        mp = await stack.enter_async_context(mrtr_proxy(ups[0].url, tmp, more=more))
        urls = {
            "single": mp.url.replace("/mcp", "/servers/u0/mcp"),
            "aggregate": mp.url.replace("/mcp", "/servers/fleet/mcp"),
        }
        pids = {"proxy": mp.pid, **{n: up.pid for n, up in zip(names, ups, strict=True)}}
        say(f"[aggregate] {MEMBERS} minimal servers behind {urls['aggregate']}; single {urls['single']}")
        for op, specs in OPS.items():  # warm: sessions to every upstream, the eras probed
            for path, one in zip(urls, specs, strict=True):
                spec, url = _url(one, urls[path])
                base = {"kind": "modern", "url": url, "concurrency": 8, "duration": 0.5}
                await measure({**base, "warmup": 0.2, "limit_s": 60, **spec}, f"warm {op} {path}")
        cells: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {
            op: {str(c): {p: [] for p in urls} for c in plan.concurrencies} for op in OPS
        }
        for rep in range(plan.reps):
            for c in plan.concurrencies:
                for op, specs in OPS.items():
                    for path, one in zip(urls, specs, strict=True):
                        spec, url = _url(one, urls[path])
                        cell = {
                            "kind": "modern",
                            "url": url,
                            "concurrency": c,
                            "duration": plan.duration,
                            "warmup": plan.warmup,
                            "limit_s": 90,
                            "max_requests": 2_000_000,
                            "watch_pids": list(pids.values()),
                            **spec,
                        }
                        label = f"[aggregate] rep {rep + 1}/{plan.reps} c={c:<3} {op} {path:<9}"
                        cells[op][str(c)][path].append(await measure(cell, label, pids))
    return {"members": MEMBERS, "upstream": "minimal", "cells": cells}


def _url(spec: dict[str, Any], url: str) -> tuple[dict[str, Any], str]:
    """The cell's spec without its `route`, and its URL (another route's when `route` names one)."""
    route = spec.get("route")
    rest = {k: v for k, v in spec.items() if k != "route"}
    return rest, url if route is None else url.replace("/servers/fleet/", f"/servers/{route}/")


def main() -> int:
    parser = argparse.ArgumentParser(description="the aggregated-route piece of the bench, alone")
    parser.add_argument("--quick", action="store_true", help="the quick plan's counts")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory(prefix="mrtr-bench-") as tmp:
        data = {"aggregate": asyncio.run(aggregate(plan, Path(tmp)))}
    rows = goals.aggregate_rows(data)
    print("\n".join(goals.markdown_lines(rows, "Aggregated routes (issue 30)")))
    print(json.dumps(goals.aggregate_ratios(data), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
