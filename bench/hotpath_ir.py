"""The pass-through hot path in instructions per call: mrtr-proxy under callgrind, for a machine too busy
for any timing.

CPU time per call moves by ±15 % on a machine whose other processes take one of its two cores; the number of
instructions the proxy executes per call does not (±1-2 %). This starts the minimal legacy server and
mrtr-proxy under ``valgrind --tool=callgrind`` (with ``--before DIR``, a second proxy from another checkout's
``proxy/`` package, both in turn), warms each up, then zeroes callgrind's counters, makes exactly ``--calls``
calls (16 modern clients, the echo tool), and dumps the counters: their total ÷ calls is the figure. Valgrind
runs the proxy ~50 times slower, so the clients wait on it alone; instructions are not time (a syscall counts
as the few instructions that make it), so this ranks changes to the proxy's own code, it does not replace
the CPU figures of ``make bench``. With ``--relay`` the upstream is the minimal 2026-07-28 server
(bench/minimal_modern.py) instead, so the path measured is the native relay (issue 28, section 6)::

    python bench/hotpath_ir.py --before /tmp/main-src --calls 600 [--relay]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import aiohttp

from clients import Modern
from hotpath import proxy
from pieces import legacy_server, modern_server
from plan import say

_TOTALS = re.compile(r"^(?:summary|totals): (\d+)", re.M)


async def _calls(url: str, n: int, concurrency: int = 16) -> None:
    left = [n]
    async with aiohttp.ClientSession() as http:

        async def worker() -> None:
            client = Modern(http, url)
            while left[0] > 0:
                left[0] -= 1
                await asyncio.wait_for(client.call("echo", {"text": "hello"}), 60)

        await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _control(pid: int, flag: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        "callgrind_control", flag, str(pid), stdout=asyncio.subprocess.DEVNULL
    )
    await asyncio.wait_for(proc.wait(), 60)


def _remove_dumps(out: Path) -> None:
    for old in out.glob("callgrind.out.*"):
        old.unlink()


def _dumped(out: Path) -> int:
    """The instructions counted in the dumps (one per thread) written since the counters were zeroed."""
    dumps = sorted(out.glob("callgrind.out.*"))
    return sum(int(m.group(1)) for d in dumps if (m := _TOTALS.search(d.read_text(errors="replace"))))


async def _measure(label: str, url: str, pid: int, out: Path, calls: int) -> float:
    await _calls(url, 64)  # warm-up: the pool grows to 16 sessions
    await _control(pid, "-z")
    await _calls(url, calls)
    await asyncio.to_thread(_remove_dumps, out)
    await _control(pid, "-d")
    await asyncio.sleep(1.0)
    per_call = await asyncio.to_thread(_dumped, out) / calls
    say(f"{label}: {per_call:,.0f} instructions per call ({calls} calls)")
    return per_call


async def main(args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="mrtr-hotpath-ir-") as tmp_name:
        tmp = Path(tmp_name)
        upstream = modern_server() if args.relay else legacy_server("minimal")
        async with upstream as up:
            labels = [("before", args.before)] if args.before is not None else []
            labels.append(("after", None))
            for rep in range(args.reps):
                for label, source in labels:
                    out = tmp / f"cg-{label}-{rep}"
                    out.mkdir()
                    wrap = [
                        "valgrind",
                        "--tool=callgrind",
                        f"--callgrind-out-file={out}/callgrind.out.%p",
                        "--dump-instr=no",
                    ]
                    async with proxy(up.url, tmp, f"{label}{rep}", source, wrap=wrap, ready_timeout=240) as p:
                        per_call = await _measure(label, p.url, p.pid, out, args.calls)
                    results.setdefault(label, []).append(per_call)
                    if args.keep is not None:  # the dumps, for callgrind_annotate
                        args.keep.mkdir(parents=True, exist_ok=True)
                        for dump in out.glob("callgrind.out.*"):
                            shutil.copy(dump, args.keep / f"{dump.name}.{label}.{rep}")
                    with contextlib.suppress(OSError):
                        shutil.rmtree(out)
    print(json.dumps({label: [round(v) for v in values] for label, values in results.items()}, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout's root (its proxy/ package) to compare")
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="copy the callgrind dumps here")
    parser.add_argument("--relay", action="store_true", help="the native relay: a 2026-07-28 upstream")
    asyncio.run(main(parser.parse_args()))
