"""The goals of issue 18 (performance, round two), each figure against its goal, from one bench run.

`goals(data, s)` takes the run's data and `summary.summarize`'s output; every row says the figure, its goal,
whether it is met, and how it was measured. Ratios are medians of per-repetition ratios, each repetition's
cells having run back to back; CPU figures are read from /proc for the processes in question over the same
window, so they hold on a shared machine better than throughput does.
"""

from __future__ import annotations

import statistics
from typing import Any


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(x: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "n/a" if x is None else f"{x:{spec}}{unit}"


def _runs(data: dict[str, Any], kind: str, c: str, path: str) -> list[dict[str, Any]]:
    runs = data.get("upstreams", {}).get(kind, {}).get("pass", {}).get(c, {}).get(path, [])
    return [r for r in runs if "failed" not in r]


def _concurrencies(data: dict[str, Any], kind: str) -> list[str]:
    return sorted(data.get("upstreams", {}).get(kind, {}).get("pass", {}), key=int)


def new_conns_per_1000(data: dict[str, Any], kind: str) -> tuple[float | None, float | None]:
    """Median and largest, over the proxy's pass-through cells, of new upstream connections per 1,000 calls
    in the cell's window (after its warm-up at the same concurrency)."""
    rates = [
        1000 * r["new_conns"] / r["completed"]
        for c in _concurrencies(data, kind)
        for r in _runs(data, kind, c, "mrtr")
        if "new_conns" in r and r.get("completed")
    ]
    return _median(rates), (max(rates) if rates else None)


def cpu_ratio(data: dict[str, Any], kind: str, c: str, path: str = "mrtr") -> float | None:
    """Proxy CPU per call ÷ legacy server CPU per call, both in the proxy's own run (median over reps);
    `path` "floor": the same for the aiohttp floor relay (bench/floor_relay.py)."""
    ratios = []
    for r in _runs(data, kind, c, path):
        per = r.get("cpu_us_per_req") or {}
        proxy, server = per.get("proxy"), per.get("upstream")
        if proxy and server:
            ratios.append(proxy / server)
    return _median(ratios)


def goals(data: dict[str, Any], s: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(figure: str, measured: float | None, text: str, goal: str, *, ok: bool | None, note: str) -> None:
        out.append(
            {"figure": figure, "value": measured, "measured": text, "goal": goal, "met": ok, "note": note}
        )

    for kind, label in (("fastmcp130", "FastMCP 1.30"), ("minimal", "minimal aiohttp server")):
        if not _concurrencies(data, kind):
            continue
        median, worst = new_conns_per_1000(data, kind)
        add(
            f"new upstream connections per 1,000 pass-through calls after warm-up ({label})",
            median,
            f"{_fmt(median, '.1f')} (largest cell {_fmt(worst, '.1f')})",
            "≤ 5",
            ok=None if median is None else median <= 5,
            note="sockets to the upstream port in /proc/net/tcp over each proxy cell's window",
        )
    cpu_goals = (("fastmcp130", "FastMCP 1.30 server", 0.25), ("minimal", "minimal aiohttp server", 2.5))
    for kind, label, goal in cpu_goals:
        cs = _concurrencies(data, kind)
        if not cs:
            continue
        ratios = {c: cpu_ratio(data, kind, c) for c in cs}
        floors = {c: cpu_ratio(data, kind, c, "floor") for c in cs}
        top = ratios.get("16", ratios[cs[-1]])
        floor_text = ""
        if any(f is not None for f in floors.values()):
            floor_text = "; the aiohttp floor relay: " + ", ".join(
                f"c={c}: {_fmt(f, '.2f')}" for c, f in floors.items()
            )
        add(
            f"proxy CPU per pass-through call ÷ {label} CPU per call",
            top,
            ", ".join(f"c={c}: {_fmt(r, '.2f')}" for c, r in ratios.items()) + floor_text,
            f"≤ {goal:g}",
            ok=None if top is None else top <= goal,
            note="both from /proc in the proxy's own run; verdict at 16 clients; the floor relay is one "
            "aiohttp server request + one pooled aiohttp client request per call and nothing else",
        )
    throughput_goals = (("fastmcp130", "FastMCP 1.30", 0.9), ("minimal", "minimal aiohttp server", 0.45))
    for kind, label, goal in throughput_goals:
        row = s.get("pass", {}).get(kind, {}).get("16")
        if not row:
            continue
        r = row.get("mrtr_over_direct")
        add(
            f"pass-through throughput ÷ direct, {label}, 16 clients",
            r,
            _fmt(r, ".2f", "×"),
            f"≥ {goal:g}",
            ok=None if r is None else r >= goal,
            note="load generator, server and proxy share the machine's 2 cores",
        )
    rt = s.get("roundtrip", {}).get("fastmcp130")
    if rt:
        r, r0 = rt.get("mrtr_over_direct_p50"), rt.get("mrtr_gather0_over_direct_p50")
        add(
            "MRTR round trip ÷ legacy inline round trip, default settings, FastMCP 1.30",
            r,
            f"{_fmt(r, '.2f', '×')} (p50; {_fmt(r0, '.2f', '×')} with gather_window_ms 0)",
            "≤ 1.3",
            ok=None if r is None else r <= 1.3,
            note="one elicitation answered at once, 1 client",
        )
    parked = [p for p in s.get("parked", []) if p["parked"] and p["kb_per_call"] is not None]
    with_get = [p for p in parked if p["get_stream"]]
    for level in (1000, 10000):
        name = f"memory per parked call at {level:,} parked"
        # With GET streams the fd limit may cap the level (each parked call holds 2 sockets): take the
        # largest level measured up to it, and the run without GET streams at the level itself when there is.
        near = [p for p in with_get if p["parked"] <= level and p["parked"] >= level * 0.9]
        without = [p for p in parked if not p["get_stream"] and p["target"] == level]
        if not near and not without:
            add(name, None, "not measured in this plan", "≤ 30 KiB", ok=None, note="")
            continue
        parts = [f"{p['kb_per_call']:.1f} KiB at {p['parked']:,} with GET streams" for p in near[-1:]]
        parts += [f"{p['kb_per_call']:.1f} KiB at {p['parked']:,} without GET streams" for p in without[-1:]]
        verdict = near[-1] if near else without[-1]
        add(
            name,
            verdict["kb_per_call"],
            "; ".join(parts),
            "≤ 30 KiB",
            ok=verdict["kb_per_call"] <= 30,
            note="proxy VmRSS over the no-parked baseline (kB of 1,024 bytes); verdict with GET streams "
            "where measured",
        )
    h = data.get("handles", {}).get("typical")
    if h:
        add(
            "seal + unseal",
            h["seal_unseal_us"],
            f"{h['seal_us']:.1f} + {h['unseal_us']:.1f} = {h['seal_unseal_us']:.1f} µs",
            "≤ 20 µs",
            ok=h["seal_unseal_us"] <= 20,
            note="typical handle, process CPU time per handle",
        )
    return out


AGGREGATE_GOAL = 1.2  # issue 30: an aggregate of 4 costs at most this many times a single route


def aggregate_ratios(data: dict[str, Any]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per operation and concurrency: aggregate ÷ single route, medians of per-repetition ratios (the two
    cells of a repetition ran back to back) of the proxy's CPU per request, p50 latency and throughput."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for op, by_c in data.get("aggregate", {}).get("cells", {}).items():
        for c, paths in by_c.items():
            pairs = [
                (a, b)
                for a, b in zip(paths.get("aggregate", []), paths.get("single", []), strict=False)
                if "failed" not in a and "failed" not in b and a.get("completed") and b.get("completed")
            ]

            def ratio(get: Any, pairs: list[tuple[dict[str, Any], dict[str, Any]]] = pairs) -> float | None:
                values = [get(a) / get(b) for a, b in pairs if get(a) is not None and get(b)]
                return _median(values)

            out.setdefault(op, {})[c] = {
                "cpu": ratio(lambda r: (r.get("cpu_us_per_req") or {}).get("proxy")),
                "p50": ratio(lambda r: r.get("latency", {}).get("p50_ms")),
                "rps": ratio(lambda r: r.get("throughput_rps")),
            }
    return out


def aggregate_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue-30 bench line: listing and calling through an aggregate of 4, each beside a single-upstream
    route in the same run; the verdict is the proxy's CPU per request at 16 clients (else the highest)."""
    rows = []
    for op, by_c in aggregate_ratios(data).items():
        cs = sorted(by_c, key=int)
        top = by_c.get("16", by_c[cs[-1]])["cpu"]
        text = "; ".join(
            f"c={c}: CPU {_fmt(by_c[c]['cpu'], '.2f', '×')}, p50 {_fmt(by_c[c]['p50'], '.2f', '×')}, "
            f"req/s {_fmt(by_c[c]['rps'], '.2f', '×')}"
            for c in cs
        )
        rows.append(
            {
                "figure": f"proxy CPU per {op} through an aggregate of 4 ÷ through a single-upstream route",
                "value": top,
                "measured": text,
                "goal": f"≤ {AGGREGATE_GOAL:g}",
                "met": None if top is None else top <= AGGREGATE_GOAL,
                "note": "4 minimal legacy servers behind one route (prefixed names) beside one of them on "
                "its own route, one proxy, cells interleaved; verdict at 16 clients",
            }
        )
    return rows


def markdown_lines(rows: list[dict[str, Any]], title: str = "Goals of issue 18") -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| figure | measured | goal | met | how |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = {True: "yes", False: "**no**", None: "n/a"}[r["met"]]
        lines.append(f"| {r['figure']} | {r['measured']} | {r['goal']} | {verdict} | {r['note']} |")
    return [*lines, ""]
