"""The per-request observability alone, in instructions: the canonical log line, its metrics, a request id.

Runs itself under ``valgrind --tool=callgrind`` twice, once only building ``--calls`` typical pass-through
lines and once also doing each line's piece (``info_line`` into a file, as ``serve`` writes it with
``logging.format: json``; ``observe_request`` on the same line; a fresh request id), and prints the
difference ÷ calls. ``--source DIR`` measures another checkout's ``proxy/`` package (``git archive main proxy
| tar -x -C DIR``)::

    python bench/logline_ir.py --source /tmp/main-src
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PIECES = ("line", "metrics", "request_id")
_TOTALS = re.compile(r"^(?:summary|totals): (\d+)", re.M)


def _line(n: int) -> dict[str, object]:
    return {
        "request_id": f"{n:032x}",
        "http_method": "POST",
        "path": "/mcp",
        "upstream": "bench",
        "id": n,
        "method": "tools/call",
        "tool": "echo",
        "outcome": "complete",
        "status": 200,
        "duration_ms": 1.23,
    }


def work(piece: str, calls: int, log_path: str) -> None:
    """In the measured process: `calls` times the piece (set-up outside the counted difference)."""
    import structlog
    from proxy.front.request_ids import request_id
    from proxy.observe import logs
    from proxy.observe.metrics import Metrics

    with open(log_path, "w", encoding="utf-8") as out:
        logs.configure("info", "json", out)
        log = structlog.get_logger("proxy.request")
        metrics = Metrics(["bench"])
        lines = [_line(n) for n in range(calls)]
        if piece == "line":
            for line in lines:
                logs.info_line(log, "request", line)
        elif piece == "metrics":
            for line in lines:
                metrics.observe_request(line)
        elif piece == "request_id":
            for _ in lines:
                request_id({})


def _measure(piece: str, calls: int, source: Path | None, tmp: Path) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    out = tmp / f"cg-{piece}-{calls}"
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
        "--work",
        piece,
        "--calls",
        str(calls),
        "--log",
        str(tmp / "log.jsonl"),
    ]
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=600)
    match = _TOTALS.search(out.read_text(errors="replace"))
    assert match is not None
    return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, help="another checkout's root (its proxy/ package)")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--pieces", nargs="*", default=list(PIECES), choices=PIECES)
    parser.add_argument("--work", choices=(*PIECES, "none"), help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.work is not None:
        work(args.work, args.calls, args.log)
        return
    with tempfile.TemporaryDirectory(prefix="mrtr-logline-ir-") as tmp_name:
        tmp = Path(tmp_name)
        for piece in args.pieces:
            base = _measure("none", args.calls, args.source, tmp)
            total = _measure(piece, args.calls, args.source, tmp)
            print(f"{piece}: {(total - base) / args.calls:,.0f} instructions per call ({args.calls} calls)")


if __name__ == "__main__":
    main()
