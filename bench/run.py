"""`make bench`: what putting mrtr-proxy in front of a legacy MCP server costs, measured side by side.

Starts the real pieces on 127.0.0.1 (each its own process), drives them with ``bench/loadgen.py`` (another
process), prints a table, writes ``bench/results/latest.json`` and ``latest.png``, a py-spy profile of the
proxy, and appends a dated section to ``bench/RESULTS.md``. Run it with the bench venv's Python (see the
Makefile)::

    python bench/run.py            # the full run (~25 minutes on 2 cores)
    python bench/run.py --quick    # smaller counts (~8 minutes)

Sections:
1. pass-through: a plain tool, 1/16/64 concurrent clients: direct (legacy client) vs mrtr-proxy (modern
   client) vs FastMCP's ``create_proxy`` (legacy client), in front of a minimal aiohttp legacy server and
   of FastMCP 1.30; repetitions interleaved (direct, mrtr, fastmcp, direct, …), medians reported.
2. round trip: one elicitation answered at once: legacy inline direct vs MRTR through the proxy (with the
   default 50 ms gather window and with 0), and inline through FastMCP's proxy.
3. parked calls: proxy RSS and latency of new plain calls while N calls are parked waiting for input.
4. handle: seal and unseal per handle (µs), handle size (bytes).
5. aggregated routes: tools/list and tools/call through an aggregate of 4 minimal servers vs a
   single-upstream route, in one proxy, interleaved; the list also through the aggregate without its list
   cache (bench/aggregate.py).
6. native relay: a 2026-07-28 client's plain call through the proxy to a minimal 2026-07-28 server vs the
   same client direct (``bench/relay_bench.py``), interleaved; goal relay at least 0.9 times direct.
7. instructions: the proxy and the floor relay under callgrind, per pass-through call and per MRTR round
   trip (``bench/hotpath_ir.py``): issue 31's CPU ratio in a measure the host's load does not move (needs
   valgrind; ``--no-instructions`` skips it).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import report
from aggregate import aggregate
from handles import handles
from hotpath_ir import beside_floor
from machine import background_cpu, machine, raise_nofile, wait_quiet
from parked import parked
from passthrough import pass_and_roundtrip
from plan import BENCH, FULL, QUICK, RESULTS, Plan, say
from relay_bench import relay

UPSTREAMS = ("minimal", "fastmcp130")


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
        if not args.no_aggregate:
            data["aggregate"] = await aggregate(plan, tmp)
        if not args.no_relay:
            data["relay"] = await relay(plan, tmp)
        if not args.no_instructions:
            if shutil.which("valgrind") is None:
                say("[instructions] skipped: valgrind is not installed")
            else:
                say("[instructions] the proxy and the floor relay under callgrind")
                data["instructions"] = await beside_floor(tmp, calls=plan.ir_calls)
    data["elapsed_s"] = round(time.time() - started, 1)
    data["machine"]["background_cpu_pct_after"] = background_cpu()
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description="mrtr-proxy benchmarks (see bench/README.md)")
    parser.add_argument("--quick", action="store_true", help="smaller counts (~8 minutes)")
    parser.add_argument("--upstreams", nargs="+", choices=UPSTREAMS, default=list(UPSTREAMS))
    parser.add_argument(
        "--parked-levels",
        nargs="+",
        type=int,
        help="parked-call counts to measure (default: the plan's: 100 1000 quick, 1000 5000 10000 full)",
    )
    parser.add_argument("--no-parked", action="store_true", help="skip the parked-calls section")
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy profile")
    parser.add_argument("--no-aggregate", action="store_true", help="skip the aggregated-routes section")
    parser.add_argument("--no-relay", action="store_true", help="skip the native relay section")
    parser.add_argument(
        "--no-instructions", action="store_true", help="skip the instructions section (callgrind)"
    )
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
