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
(bench/minimal_modern.py) instead, so the path measured is the native relay (issue 28, section 6); with
``--legacy fastmcp130`` it is FastMCP 1.30, whose replies are chunked SSE streams (the minimal server's are
one Content-Length SSE body).

With ``--mrtr`` the figure is per MRTR round trip instead (issue 31): the legacy server's asking tool (the
minimal server's ``ask``, FastMCP 1.30's ``ask_name``), each
client answering the ``input_required`` at once with its ``inputResponses`` and the ``requestState``. It is
counted in two parts, each in dumps of its own: the *first* exchange (start the call upstream, see it ask,
park it, seal the handle, answer ``input_required``) for a batch of calls, then the *second* exchange of the
same batch (unseal, look up, deliver the answer upstream, drive on to the final result), batch after batch
(16 calls each, 16 clients at once). Their sum is the round trip::

    python bench/hotpath_ir.py --before /tmp/main-src --calls 600 [--relay | --mrtr] [--floor]

With ``--floor`` the aiohttp floor relay (bench/floor_relay.py, in the same mode: ``--modern`` with
``--relay``, ``--mrtr`` with ``--mrtr``) is counted the same way after the proxy, and the proxy's figure over
the floor's is printed: issue 31's CPU ratio in instructions, steady where CPU time is not. With ``--l2``
the caches are simulated too (the last level as this CPU's L2) and a pass-through call's L2 misses printed:
what CPU time adds to instructions is mostly those (each a trip to the L3). `make bench`'s last section
(``beside_floor``) counts both modes this way, the proxy and the floor relay in front of the minimal legacy
server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from clients import ANSWER, BenchError, Modern
from hotpath import proxy
from passthrough import TOOLS
from pieces import floor_relay, legacy_server, modern_server
from plan import say

_EVENTS = re.compile(r"^events: (.+)$", re.M)
_TOTALS = re.compile(r"^(?:summary|totals): (.+)$", re.M)
L2_MISSES = ("ILmr", "DLmr", "DLmw")  # with the last level simulated as this CPU's L2: its misses


async def _calls(url: str, n: int, concurrency: int = 16) -> None:
    left = [n]
    async with aiohttp.ClientSession() as http:

        async def worker() -> None:
            client = Modern(http, url)
            while left[0] > 0:
                left[0] -= 1
                await asyncio.wait_for(client.call("echo", {"text": "hello"}), 60)

        await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _firsts(clients: list[Modern], tool: str) -> list[dict[str, object]]:
    """Each client's first exchange of an `ask` call: its `input_required`."""

    async def one(client: Modern) -> dict[str, object]:
        first = await asyncio.wait_for(client.request_call(tool, {"arguments": {}}), 60)
        if first.get("resultType") != "input_required":
            raise BenchError(f"expected input_required: {first}")
        return first

    return list(await asyncio.gather(*(one(c) for c in clients)))


async def _seconds(clients: list[Modern], firsts: list[dict[str, object]], tool: str) -> None:
    """Each client's retry with its answer and the handle: the final result."""

    async def one(client: Modern, first: dict[str, Any]) -> None:
        responses = {key: ANSWER for key in first["inputRequests"]}
        params = {"arguments": {}, "inputResponses": responses, "requestState": first["requestState"]}
        final = await asyncio.wait_for(client.request_call(tool, params), 60)
        if final.get("resultType") != "complete":
            raise BenchError(f"expected a complete result: {final}")

    await asyncio.gather(*(one(c, f) for c, f in zip(clients, firsts, strict=True)))


async def _round_trips(url: str, n: int, tool: str, concurrency: int = 16) -> None:
    async with aiohttp.ClientSession() as http:
        clients = [Modern(http, url) for _ in range(concurrency)]
        for start in range(0, n, concurrency):
            batch = clients[: min(concurrency, n - start)]
            await _seconds(batch, await _firsts(batch, tool), tool)


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
    return _dumped_events(out).get("Ir", 0)


def _dumped_events(out: Path) -> dict[str, int]:
    """Every event counted in the dumps (one per thread) since the counters were zeroed, by name."""
    totals: dict[str, int] = {}
    for dump in sorted(out.glob("callgrind.out.*")):
        text = dump.read_text(errors="replace")
        names, values = _EVENTS.search(text), _TOTALS.search(text)
        if names and values:
            for name, value in zip(names.group(1).split(), values.group(1).split(), strict=False):
                totals[name] = totals.get(name, 0) + int(value)
    return totals


def l2_cache() -> str:
    """This CPU's level-2 cache as callgrind's ``--LL=size,ways,line`` (1 MiB, 8 ways, 64 B if unknown)."""
    index = Path("/sys/devices/system/cpu/cpu0/cache/index2")
    try:
        if (index / "level").read_text().strip() == "2":
            size = (index / "size").read_text().strip()  # "1024K", "2M" or bytes
            unit = {"K": 1024, "M": 1024 * 1024}.get(size[-1:], 1)
            size_b = int(size[:-1] if unit > 1 else size) * unit
            ways = int((index / "ways_of_associativity").read_text())
            line = int((index / "coherency_line_size").read_text())
            return f"{size_b},{ways},{line}"
    except (OSError, ValueError):
        pass
    return "1048576,8,64"


async def _measure(label: str, url: str, pid: int, out: Path, calls: int) -> float:
    return (await _measure_events(label, url, pid, out, calls))["Ir"]


async def _measure_events(label: str, url: str, pid: int, out: Path, calls: int) -> dict[str, float]:
    """Per pass-through call, every event callgrind counted (instructions: "Ir")."""
    await _calls(url, 64)  # warm-up: the pool grows to 16 sessions
    await _control(pid, "-z")
    await _calls(url, calls)
    await asyncio.to_thread(_remove_dumps, out)
    await _control(pid, "-d")
    await asyncio.sleep(1.0)
    per_call = {name: n / calls for name, n in (await asyncio.to_thread(_dumped_events, out)).items()}
    misses = f", {sum(per_call[e] for e in L2_MISSES):,.0f} L2 misses" if "DLmr" in per_call else ""
    say(f"{label}: {per_call['Ir']:,.0f} instructions per call{misses} ({calls} calls)")
    return per_call


async def _measure_mrtr(
    label: str, url: str, pid: int, out: Path, calls: int, *, tool: str, keep: Path | None = None
) -> tuple[float, float]:
    """Instructions per MRTR round trip, counted per exchange: each batch's first exchanges, then its
    second ones, each between a zeroing of the counters and a dump (with `keep`, each dump is copied there
    as ``<phase>-<batch>.<thread>``, for callgrind_annotate)."""
    # warm-up: the pool grows; gathering learns that the tool sends lone requests
    await _round_trips(url, 64, tool)
    totals = {"first": 0, "second": 0}
    async with aiohttp.ClientSession() as http:
        clients = [Modern(http, url) for _ in range(16)]
        for start in range(0, calls, len(clients)):
            batch = clients[: min(len(clients), calls - start)]
            await _control(pid, "-z")
            firsts = await _firsts(batch, tool)
            totals["first"] += await _dump(pid, out, keep, f"{label}-first-{start // len(clients)}")
            await _control(pid, "-z")
            await _seconds(batch, firsts, tool)
            totals["second"] += await _dump(pid, out, keep, f"{label}-second-{start // len(clients)}")
    first, second = totals["first"] / calls, totals["second"] / calls
    say(
        f"{label}: {first + second:,.0f} instructions per MRTR round trip ({calls} round trips): "
        f"first exchange {first:,.0f}, second {second:,.0f}"
    )
    return first, second


async def _dump(pid: int, out: Path, keep: Path | None, name: str) -> int:
    """The counters since the last zeroing, dumped once the proxy has had a moment to finish its work."""
    await asyncio.sleep(0.3)  # what the proxy does after the reply (releasing the session …) counts here
    await asyncio.to_thread(_remove_dumps, out)
    await _control(pid, "-d")
    await asyncio.sleep(0.3)
    if keep is not None:
        await asyncio.to_thread(_keep, out, keep, name)
    return await asyncio.to_thread(_dumped, out)


def _keep(out: Path, keep: Path, name: str) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    for n, dump in enumerate(sorted(out.glob("callgrind.out.*"))):
        shutil.copy(dump, keep / f"{name}.{n}")


def _callgrind(out: Path, *, l2: bool = False) -> list[str]:
    """valgrind's callgrind, counting instructions; with `l2`, also simulating the caches, the last level
    as this CPU's L2 (its misses are the ones that go to L3)."""
    sim = ["--cache-sim=yes", "--I1=32768,8,64", "--D1=32768,8,64", f"--LL={l2_cache()}"] if l2 else []
    out_file = f"--callgrind-out-file={out}/callgrind.out.%p"
    return ["valgrind", "--tool=callgrind", out_file, "--dump-instr=no", *sim]


async def beside_floor(tmp: Path, *, calls: int) -> dict[str, Any]:
    """`make bench`'s instructions section: in front of the minimal legacy server, mrtr-proxy and the floor
    relay each counted per pass-through call and per MRTR round trip (its two exchanges apart), `calls`
    calls or round trips each; the pass-through calls with simulated caches too, for the L2 misses per call.
    {"pass": {role: n}, "l2_misses": {role: n}, "roundtrip": {role: {"first": n, "second": n}}}, the roles
    "mrtr" and "floor"."""
    counted: dict[str, Any] = {"calls": calls, "pass": {}, "l2_misses": {}, "roundtrip": {}}
    async with legacy_server("minimal") as up:
        for mrtr in (False, True):
            for role in ("mrtr", "floor"):
                out = tmp / f"cg-{role}-{'rt' if mrtr else 'pass'}"
                out.mkdir()
                wrap = _callgrind(out, l2=not mrtr)
                target = (
                    floor_relay(up.url, mrtr=mrtr, wrap=wrap, ready_timeout=240)
                    if role == "floor"
                    else proxy(up.url, tmp, f"ir-{role}-{mrtr}", None, wrap=wrap, ready_timeout=240)
                )
                async with target as p:
                    if mrtr:
                        first, second = await _measure_mrtr(
                            role, p.url, p.pid, out, calls, tool=TOOLS["minimal"]["ask"]
                        )
                        counted["roundtrip"][role] = {"first": round(first), "second": round(second)}
                    else:
                        events = await _measure_events(role, p.url, p.pid, out, calls)
                        counted["pass"][role] = round(events["Ir"])
                        counted["l2_misses"][role] = round(sum(events.get(e, 0) for e in L2_MISSES))
                with contextlib.suppress(OSError):
                    shutil.rmtree(out)
    return counted


async def main(args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="mrtr-hotpath-ir-") as tmp_name:
        tmp = Path(tmp_name)
        upstream = modern_server() if args.relay else legacy_server(args.legacy)
        async with upstream as up:
            labels = [("before", args.before)] if args.before is not None else []
            labels.append(("after", None))
            if args.floor:
                labels.append(("floor", None))
            for rep in range(args.reps):
                for label, source in labels:
                    out = tmp / f"cg-{label}-{rep}"
                    out.mkdir()
                    wrap = _callgrind(out, l2=args.l2)
                    target = (
                        floor_relay(up.url, modern=args.relay, mrtr=args.mrtr, wrap=wrap, ready_timeout=240)
                        if label == "floor"
                        else proxy(up.url, tmp, f"{label}{rep}", source, wrap=wrap, ready_timeout=240)
                    )
                    async with target as p:
                        if args.mrtr:
                            tool = TOOLS[args.legacy]["ask"]
                            parts = await _measure_mrtr(
                                label, p.url, p.pid, out, args.calls, tool=tool, keep=args.keep
                            )
                            per_call = sum(parts)
                        else:
                            per_call = await _measure(label, p.url, p.pid, out, args.calls)
                    results.setdefault(label, []).append(per_call)
                    if args.keep is not None and not args.mrtr:  # the dumps, for callgrind_annotate
                        args.keep.mkdir(parents=True, exist_ok=True)
                        for dump in out.glob("callgrind.out.*"):
                            shutil.copy(dump, args.keep / f"{dump.name}.{label}.{rep}")
                    with contextlib.suppress(OSError):
                        shutil.rmtree(out)
    print(json.dumps({label: [round(v) for v in values] for label, values in results.items()}, indent=2))
    if args.floor:
        ratio = statistics.median(results["after"]) / statistics.median(results["floor"])
        say(f"this checkout ÷ the floor relay: {ratio:.3f} (medians of {args.reps} repetition(s))")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout's root (its proxy/ package) to compare")
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="copy the callgrind dumps here")
    parser.add_argument("--relay", action="store_true", help="the native relay: a 2026-07-28 upstream")
    parser.add_argument("--floor", action="store_true", help="the aiohttp floor relay too, in the same mode")
    parser.add_argument("--mrtr", action="store_true", help="per MRTR round trip of the server's asking tool")
    parser.add_argument("--l2", action="store_true", help="simulate the caches too: L2 misses per call")
    parser.add_argument(
        "--legacy",
        choices=("minimal", "fastmcp130"),
        default="minimal",
        help="the legacy server in front of which the proxy is measured",
    )
    asyncio.run(main(parser.parse_args()))
