"""Where the hot path's cost moved, per Python function: bytecodes executed per call, before and after.

`hotpath_ir.py` says *how much* a change costs (instructions under callgrind); its dumps say little about
*where* in the proxy's Python, as every Python function is the interpreter's one C loop. This says where:
it starts mrtr-proxy (and, with ``--before DIR``, a second one from another checkout's ``proxy/``) with a
tracer that counts every bytecode executed, per function, between two signals (SIGUSR1 starts, SIGUSR2 ends
and writes the counts), makes exactly ``--calls`` calls (16 modern clients) in front of the minimal servers,
and prints the functions whose counts per call changed most. Deterministic: the same build gives the same
counts to the last call, on a busy machine too. Bytecodes are not instructions (a bytecode that calls into C
— a dict copy, a join — counts as one), so this ranks where to look; `hotpath_ir.py` measures the result::

    python bench/hotpath_ops.py --before /tmp/base-src --calls 300 [--relay | --mrtr] [--top 40]

With ``--mrtr`` a "call" is a whole MRTR round trip (both exchanges). The tracer makes the proxy ~30 times
slower; nothing here is a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import runpy
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

Key = tuple[str, int, str]  # (file, first line, function)
_WRAP = "--count-bytecodes"  # argv[1] of this file run as the proxy's wrapper (see `wrapper`)
_SELF = str(Path(__file__).resolve())


def wrapper() -> None:
    """Run ``python -m proxy ...`` (the rest of argv after ``-m``), counting bytecodes per function between
    SIGUSR1 and SIGUSR2, then writing them as JSON to $MRTR_OPS_OUT."""
    ops: Counter[Key] = Counter()
    frames: Counter[Key] = Counter()

    def local(frame: FrameType, event: str, arg: object) -> Any:
        if event == "opcode":
            code = frame.f_code
            ops[(code.co_filename, code.co_firstlineno, code.co_name)] += 1
        return local

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        frame.f_trace_opcodes = True
        code = frame.f_code
        frames[(code.co_filename, code.co_firstlineno, code.co_name)] += 1  # a call or a resumption
        return local

    def start(*_: object) -> None:
        ops.clear()
        frames.clear()
        sys.settrace(tracer)

    def stop(*_: object) -> None:
        sys.settrace(None)
        counted = [[*key, ops[key], frames[key]] for key in set(ops) | set(frames)]
        Path(os.environ["MRTR_OPS_OUT"]).write_text(json.dumps(counted))

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    at = sys.argv.index("-m")
    sys.argv = [sys.argv[at + 1], *sys.argv[at + 2 :]]
    sys.path[0] = os.getcwd()  # as `python -m` has it (not bench/, this file's folder)
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)


def _short(path: str) -> str:
    """A function's file as the same words in both checkouts: from `proxy/` or the package on."""
    found = re.search(r"(proxy/.*|site-packages/.*|python3\.\d+/.*)", path)
    return re.sub(r"^site-packages/", "", found.group(1)) if found else path


def _load(path: Path, calls: int) -> tuple[dict[str, float], dict[str, float]]:
    ops: Counter[str] = Counter()
    frames: Counter[str] = Counter()
    for file, _line, name, n_ops, n_frames in json.loads(path.read_text()):
        key = f"{_short(file)}:{name}"
        ops[key] += n_ops
        frames[key] += n_frames
    return {k: v / calls for k, v in ops.items()}, {k: v / calls for k, v in frames.items()}


async def _count(label: str, source: Path | None, url: str, *, out: Path, args: argparse.Namespace) -> None:
    from hotpath import proxy  # (bench/ on sys.path: run as a script)
    from hotpath_ir import _calls, _round_trips
    from passthrough import TOOLS

    os.environ["MRTR_OPS_OUT"] = str(out)
    ask = TOOLS["minimal"]["ask"]
    async with proxy(
        url, out.parent, label, source, wrap=[sys.executable, _SELF, _WRAP], ready_timeout=240
    ) as p:

        async def traffic(n: int) -> None:
            await (_round_trips(p.url, n, ask) if args.mrtr else _calls(p.url, n))

        await traffic(64)  # warm-up: the pool grows to 16 sessions
        os.kill(p.pid, signal.SIGUSR1)
        await traffic(args.calls)
        os.kill(p.pid, signal.SIGUSR2)
        await asyncio.to_thread(_written, out, 60)


def _written(out: Path, limit_s: float) -> None:
    """Wait (bounded) for the proxy to write its counts: it does when it handles SIGUSR2."""
    deadline = time.monotonic() + limit_s
    while not out.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the proxy wrote no counts to {out} within {limit_s:g} s")
        time.sleep(0.1)


async def main(args: argparse.Namespace) -> None:
    from pieces import legacy_server, modern_server
    from plan import say

    with tempfile.TemporaryDirectory(prefix="mrtr-hotpath-ops-") as tmp_name:
        tmp = Path(tmp_name)
        runs = [("before", args.before)] if args.before is not None else []
        runs.append(("after", None))
        async with modern_server() if args.relay else legacy_server("minimal") as up:
            for label, source in runs:
                await _count(label, source, up.url, out=tmp / f"{label}.json", args=args)
                say(f"{label}: counted")
        counted = {label: _load(tmp / f"{label}.json", args.calls) for label, _ in runs}
    after_ops, after_frames = counted["after"]
    before_ops, before_frames = counted.get("before", ({}, {}))
    total_b, total_a = sum(before_ops.values()), sum(after_ops.values())
    what = "round trip" if args.mrtr else "call"
    if before_ops:
        change = f"{total_a / total_b - 1:+.2%}"
        print(f"bytecodes per {what}: before {total_b:,.0f}, after {total_a:,.0f} ({change})")
    else:
        print(f"bytecodes per {what}: {total_a:,.0f}")
    keys = sorted(
        set(after_ops) | set(before_ops), key=lambda k: -abs(after_ops.get(k, 0) - before_ops.get(k, 0))
    )
    print(f"{'change':>8} {'before':>8} {'after':>8} {'frames':>11}  function")
    for key in keys[: args.top]:
        b, a = before_ops.get(key, 0.0), after_ops.get(key, 0.0)
        fb, fa = before_frames.get(key, 0.0), after_frames.get(key, 0.0)
        print(f"{a - b:+8.1f} {b:8.1f} {a:8.1f} {fb:5.2f}>{fa:<5.2f}  {key}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == _WRAP:
        wrapper()
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout's root (its proxy/ package) to compare")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--top", type=int, default=40, help="how many functions to list")
    parser.add_argument("--relay", action="store_true", help="the native relay: a 2026-07-28 upstream")
    parser.add_argument("--mrtr", action="store_true", help="per MRTR round trip of the server's asking tool")
    asyncio.run(main(parser.parse_args()))
