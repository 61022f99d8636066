"""Section 6 of a bench run: the native relay (issue 28) — a 2026-07-28 client's plain tool call through
mrtr-proxy to a 2026-07-28 upstream against the same client calling that upstream directly, repetitions
interleaved in the same run, in front of two upstreams: the minimal aiohttp server (bench/minimal_modern.py:
what the proxy's own cost shows against) and FastMCP 4.2.3 (a real two-era server, tests/fixtures/
fastmcp4_server.py: what an operator sees). The goal: relay throughput at least 0.9 times going direct.
Beside them, interleaved too, the aiohttp floor relay in its 2026-07-28 mode (``bench/floor_relay.py
--modern``: one aiohttp server exchange + one pooled client exchange per call, bytes forwarded as they came,
nothing else): what any relay on aiohttp can reach on this machine, so a goal beyond it shows as such.

Also runnable alone, to check it without a whole ``make bench`` (nothing is recorded)::

    python bench/relay_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any

from pieces import Piece, fastmcp4_server, floor_relay, measure, modern_server, mrtr_proxy
from plan import FULL, QUICK, Plan, say

GOAL = 0.9  # relay throughput ÷ direct


async def relay(plan: Plan, tmp: Path) -> dict[str, Any]:
    """{"pass": cells in front of the minimal server, "fastmcp4": cells in front of FastMCP 4.2.3}."""
    out = {"pass": await _cells(plan, tmp, modern_server(), "minimal")}
    out["fastmcp4"] = await _cells(plan, tmp, fastmcp4_server(), "fastmcp4")
    return out


async def _cells(
    plan: Plan, tmp: Path, server: contextlib.AbstractAsyncContextManager[Piece], name: str
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    echo = {"tool": "echo", "args": {"text": "hello"}, "expect": "hello"}
    async with server as up, mrtr_proxy(up.url, tmp) as mp, floor_relay(up.url, modern=True) as fl:
        say(f"[relay] {name} server {up.url}, mrtr-proxy {mp.url}, floor relay {fl.url}")
        targets = {
            "direct": (up.url, {"upstream": up.pid}),
            "relay": (mp.url, {"proxy": mp.pid, "upstream": up.pid}),
            "floor": (fl.url, {"proxy": fl.pid, "upstream": up.pid}),
        }
        for path, (url, _) in targets.items():  # warm-up (the proxy's era probe included)
            spec = {"mode": "pass", "kind": "modern", "url": url, "concurrency": 8, **echo}
            await measure({**spec, "duration": 0.5, "warmup": 0.2, "limit_s": 60}, f"warm {path}")
        cells: dict[str, dict[str, list[dict[str, Any]]]] = {
            str(c): {p: [] for p in targets} for c in plan.concurrencies
        }
        for rep in range(plan.reps):
            for c in plan.concurrencies:
                for path, (url, pids) in targets.items():
                    spec = {
                        "mode": "pass",
                        "kind": "modern",
                        "url": url,
                        "concurrency": c,
                        "duration": plan.duration,
                        "warmup": plan.warmup,
                        "limit_s": 90,
                        "max_requests": 2_000_000,
                        "watch_pids": list(pids.values()),
                        **echo,
                    }
                    label = f"[relay] {name} rep {rep + 1}/{plan.reps} c={c:<3} {path:<6}"
                    cells[str(c)][path].append(await measure(spec, label, pids))
    return cells


def ratio_line(s: dict[str, Any], key: str = "relay_over_direct") -> str:
    return ", ".join(f"c={c}: {r[key]:.2f}×" for c, r in s.items() if r.get(key))


def main() -> int:
    from summary import relay_rows

    parser = argparse.ArgumentParser(description="the native relay's bench cell alone (nothing recorded)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory(prefix="mrtr-bench-relay-") as tmp:
        data = asyncio.run(relay(plan, Path(tmp)))
    for name, key in (("minimal", "pass"), ("FastMCP 4.2.3", "fastmcp4")):
        rows = relay_rows({"pass": data[key]})
        print(f"relay throughput ÷ direct, {name} (goal ≥ {GOAL:g}): {ratio_line(rows)}")
        print(f"  floor relay ÷ direct: {ratio_line(rows, 'floor_over_direct')}")
        print(f"  relay ÷ floor relay:  {ratio_line(rows, 'relay_over_floor')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
