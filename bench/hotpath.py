"""The pass-through hot path on its own: the proxy's CPU time per call, A/B, for a machine too busy for req/s.

Starts the minimal legacy server and mrtr-proxy in front of it (as ``make bench`` does: ``serve --config``,
info-level JSON log), and with ``--before DIR`` a second proxy run from another checkout's ``proxy/``
package (e.g. ``git archive main proxy | tar -x -C DIR``). Then ``--reps`` times, alternating (before, after,
before, after, …), 16 modern clients call the echo tool for ``--seconds``; each run reports the proxy's CPU
time (utime + stime from /proc) per completed call. CPU per call is far steadier than req/s when other
processes share the cores. With ``--floor``, the aiohttp floor relay (bench/floor_relay.py) takes its turn
in each repetition too, and each proxy's CPU per call ÷ the floor's in the same repetition is printed
(issue 31's ratio, over longer windows than ``make bench``'s 2 s). With ``--profile DIR``, one more run per
proxy under ``py-spy record`` writes ``profile-hotpath-<label>.svg`` there::

    python bench/hotpath.py --before /tmp/main-src --reps 4 --seconds 15 --profile bench/results
    python bench/hotpath.py --floor --reps 6 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from pieces import STOP_S, Piece, floor_relay, legacy_server, loadgen
from plan import PY, say

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import peers  # tests/peers.py


@contextlib.asynccontextmanager
async def proxy(
    upstream: str,
    tmp: Path,
    label: str,
    source: Path | None,
    *,
    wrap: Sequence[str] = (),
    ready_timeout: float = peers.DEFAULT_READY_TIMEOUT,
) -> AsyncIterator[Piece]:
    """mrtr-proxy (from `source`'s proxy/ package, else this checkout's), its command after `wrap`."""
    key = tmp / f"key-{label}"
    key.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    key.chmod(0o600)

    def config(port: int) -> list[str]:
        cfg = tmp / f"mrtr-{label}.json"
        body = {
            "listen": {"host": "127.0.0.1", "port": port},
            "keys": {"files": [str(key)]},
            "logging": {"level": "info", "format": "json"},
            "upstreams": [{"name": "bench", "url": upstream}],
        }
        cfg.write_text(json.dumps(body))
        return [*wrap, PY, "-m", "proxy", "serve", "--config", str(cfg)]

    env = {"PYTHONPATH": str(source)} if source is not None else None
    async with peers.run_peer(
        f"mrtr-{label}", config, env=env, cwd=source, stop_timeout=STOP_S, ready_timeout=ready_timeout
    ) as peer:
        yield Piece(f"http://127.0.0.1:{peer.port}/mcp", peer.pid)


def _spec(url: str, seconds: float, pid: int) -> dict[str, Any]:
    return {
        "mode": "pass",
        "kind": "modern",
        "url": url,
        "concurrency": 16,
        "duration": seconds,
        "warmup": 0.5,
        "limit_s": seconds + 30,
        "tool": "echo",
        "args": {"text": "hello"},
        "expect": "hello",
        "watch_pids": [pid],
    }


async def _one(piece: Piece, seconds: float) -> dict[str, float]:
    result = await loadgen(_spec(piece.url, seconds, piece.pid))
    return {
        "cpu_us": float(result["cpu_us_per_req"][str(piece.pid)]),
        "rps": float(result["throughput_rps"]),
        "errors": float(result.get("errors", 0)),
        "other_pct": float(result.get("other_cpu_pct", float("nan"))),
    }


async def _profile(piece: Piece, seconds: float, out: Path, fmt: str) -> None:
    pyspy = shutil.which("py-spy", path=str(Path(PY).parent)) or shutil.which("py-spy")
    if pyspy is None:
        say("py-spy not found: no profile")
        return
    load = asyncio.create_task(loadgen(_spec(piece.url, seconds + 2, piece.pid)))
    await asyncio.sleep(1.0)
    argv = [pyspy, "record", "--pid", str(piece.pid), "--duration", str(int(seconds)), "--rate", "250"]
    proc = await asyncio.create_subprocess_exec(
        *argv, "--format", fmt, "--output", str(out), stdout=asyncio.subprocess.PIPE
    )
    try:
        await asyncio.wait_for(proc.communicate(), seconds + 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await load
    say(f"profile -> {out}")


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="mrtr-hotpath-") as tmp_name:
        tmp = Path(tmp_name)
        async with contextlib.AsyncExitStack() as stack:
            up = await stack.enter_async_context(legacy_server("minimal"))
            pieces = {"after": await stack.enter_async_context(proxy(up.url, tmp, "after", None))}
            if args.before is not None:
                before = await stack.enter_async_context(proxy(up.url, tmp, "before", args.before))
                pieces = {"before": before, **pieces}
            if args.floor:
                pieces["floor"] = await stack.enter_async_context(floor_relay(up.url))
            for piece in pieces.values():  # warm-up: the pools grow to 16 sessions
                await _one(piece, 2.0)
            runs: dict[str, list[dict[str, float]]] = {label: [] for label in pieces}
            for rep in range(args.reps):
                for label, piece in pieces.items():
                    run = await _one(piece, args.seconds)
                    runs[label].append(run)
                    say(
                        f"rep {rep + 1} {label:6s}: {run['cpu_us']:6.0f} µs CPU per call, {run['rps']:6.0f} "
                        f"req/s, errors {run['errors']:.0f}, other processes {run['other_pct']:.0f}%"
                    )
            if args.profile is not None:
                for label, piece in pieces.items():
                    name = f"profile-hotpath-{label}"
                    await _profile(piece, args.seconds, args.profile / f"{name}.svg", "flamegraph")
                    if args.raw:  # collapsed stacks, for bench/hotspots.py or a grep
                        await _profile(piece, args.seconds, args.profile / f"{name}.txt", "raw")
    summary = {
        label: {
            "cpu_us_median": statistics.median(r["cpu_us"] for r in rs),
            "cpu_us_each": [round(r["cpu_us"]) for r in rs],
            "rps_median": statistics.median(r["rps"] for r in rs),
            "other_pct_median": statistics.median(r["other_pct"] for r in rs),
        }
        for label, rs in runs.items()
    }
    if args.floor:  # paired: each proxy's run ÷ the floor's run of the same repetition
        for label, rs in runs.items():
            if label != "floor":
                paired = [r["cpu_us"] / f["cpu_us"] for r, f in zip(rs, runs["floor"], strict=True)]
                summary[label]["cpu_over_floor_each"] = [round(x, 3) for x in paired]
                summary[label]["cpu_over_floor_median"] = round(statistics.median(paired), 3)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout's root (its proxy/ package) to compare")
    parser.add_argument("--floor", action="store_true", help="the aiohttp floor relay beside, paired ratios")
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--profile", type=Path, help="write py-spy flame graphs here")
    parser.add_argument("--raw", action="store_true", help="and py-spy's collapsed stacks beside them")
    asyncio.run(main(parser.parse_args()))
