"""Where the memory of a parked call goes: tracemalloc inside an in-process mrtr-proxy (a diagnostic, not a
benchmark; `make bench` measures RSS from outside).

    .bench/venv/bin/python bench/parked_memory.py [--count 1000] [--top 20] [--no-get-stream] [--garbage]

Starts the minimal legacy server (its own process), runs the proxy in this process with tracemalloc on, parks
``--count`` calls with ``bench/loadgen.py`` (another process), and prints the allocation sites that grew, per
parked call, grouped by file:line (and by file), next to this process's RSS growth per call.

The snapshots are taken after a full collection, so they show what parked calls hold, not the cyclic garbage
parking them left for the collector (which RSS shows: it waits for a full collection, rare in a busy proxy).
``--garbage`` counts that garbage instead: the collector off while parking, then what a collection finds,
per parked call by type.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import peers  # noqa: E402
from proxy.config import CallsConfig, Config, ListenConfig, PoolConfig, UpstreamConfig  # noqa: E402
from proxy.handle import KeyRing  # noqa: E402
from proxy.observe import logs  # noqa: E402
from proxy.process.app import CALLS, create_app  # noqa: E402

import hotspots  # noqa: E402
from machine import raise_nofile, rss_kb  # noqa: E402
from pieces import legacy_server, loadgen  # noqa: E402


def _short(filename: str) -> str:
    return hotspots.short_path(filename, ROOT)


async def main_async(args: argparse.Namespace) -> None:
    logs.configure("warning", "json")
    async with legacy_server("minimal", get_stream=not args.no_get_stream) as up:
        port = peers.free_port()
        config = Config(
            upstreams=(UpstreamConfig(name="bench", url=up.url, pool=PoolConfig(max_sessions=30000)),),
            listen=ListenConfig(host="127.0.0.1", port=port),
            calls=CallsConfig(max_parked=30000, max_parked_per_principal=30000, max_calls_per_address=0),
        )
        runner = web.AppRunner(create_app(config, ring=KeyRing.ephemeral()), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            park = {"mode": "park", "url": url, "tool": "ask", "concurrency": 64, "limit_s": 240}
            await loadgen({**park, "count": 50})  # warm: pools, caches, first sessions
            gc.collect()
            if args.garbage:
                gc.disable()
            tracemalloc.start(args.frames)
            rss0 = rss_kb(os.getpid())
            before = tracemalloc.take_snapshot()
            result = await loadgen({**park, "count": args.count})
            await asyncio.sleep(1.0)
            if args.garbage:
                print_garbage(runner.app[CALLS].registry.parked_count - 50)
            gc.collect()
            after = tracemalloc.take_snapshot()
            rss1 = rss_kb(os.getpid())
            parked = runner.app[CALLS].registry.parked_count - 50
            n = max(1, parked)
            traced = sum(s.size_diff for s in after.compare_to(before, "filename"))
            print(json.dumps({k: result[k] for k in ("parked", "elapsed_s", "errors")}))
            print(
                f"\n{parked} calls parked{' (server without GET stream)' if args.no_get_stream else ''}: "
                f"RSS +{(rss1 - rss0) / n:.1f} KB per call (inflated here by tracemalloc's own bookkeeping; "
                f"`make bench` measures RSS without it); Python allocations (tracemalloc) "
                f"+{traced / n / 1024:.1f} KB per call\n"
            )
            for key, title in (("filename", "by file"), ("lineno", "by line")):
                print(f"top allocation growth {title} (bytes per parked call, objects per parked call):")
                for stat in after.compare_to(before, key)[: args.top]:
                    frame = stat.traceback[0]
                    where = _short(frame.filename) + ("" if key == "filename" else f":{frame.lineno}")
                    print(f"  {stat.size_diff / n:9.0f} B  {stat.count_diff / n:6.1f}  {where}")
                print()
            if args.tracebacks:
                print("largest growth with call stacks:")
                for stat in after.compare_to(before, "traceback")[: args.tracebacks]:
                    print(f"  {stat.size_diff / n:9.0f} B per call")
                    for frame in stat.traceback.format(limit=args.frames)[-12:]:
                        print("    " + frame.replace(str(ROOT) + "/", ""))
        finally:
            tracemalloc.stop()
            await runner.cleanup()


def print_garbage(parked: int) -> None:
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        garbage, n = list(gc.garbage), max(1, parked)
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
        gc.enable()
    size = sum(sys.getsizeof(o) for o in garbage)
    print(f"cyclic garbage: {len(garbage) / n:.1f} objects, {size / n:.0f} B (getsizeof) per parked call")
    kinds = Counter(type(o).__qualname__ for o in garbage)
    for kind, count in kinds.most_common(15):
        print(f"  {count / n:6.2f}  {kind}")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument(
        "--tracebacks", type=int, default=0, help="also print the N biggest sites with stacks"
    )
    parser.add_argument("--no-get-stream", action="store_true")
    parser.add_argument(
        "--garbage", action="store_true", help="also count the cyclic garbage parking leaves, by type"
    )
    args = parser.parse_args()
    raise_nofile()
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
