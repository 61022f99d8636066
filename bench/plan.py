"""What a bench run measures and for how long (the full and the quick plan), where it writes, and the run's
clock: every progress line on stderr says the seconds since the run started."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
PY = sys.executable


@dataclass(frozen=True)
class Plan:
    name: str
    reps: int
    duration: float
    warmup: float
    concurrencies: tuple[int, ...]
    rt_duration: float
    parked_levels: tuple[int, ...]
    park_concurrency: int
    profile_s: float
    ir_calls: int  # section 7: calls (and round trips) counted under callgrind, per piece


FULL = Plan("full", 3, 2.0, 0.4, (1, 16, 64), 1.5, (1000, 5000, 10000), 128, 5.0, 320)
QUICK = Plan("quick", 2, 1.0, 0.3, (1, 16), 1.0, (100, 1000), 64, 3.0, 160)


_T0 = time.monotonic()


def say(*args: Any) -> None:
    print(f"{time.monotonic() - _T0:6.1f}s", *args, file=sys.stderr, flush=True)
