"""A bench run's measurements (``bench/run.py``'s data) as medians, paired ratios and target verdicts: what
``report.py`` prints, plots and records, and what ``goals.py`` judges the issue-18 goals from."""

from __future__ import annotations

import math
import statistics
from typing import Any

import goals
from tables import fmt

# --------------------------------------------------------------------------------------------------
# statistics


def _ok(x: Any) -> bool:
    return isinstance(x, int | float) and not math.isnan(x)


def med(values: list[Any]) -> float | None:
    vals = [v for v in values if _ok(v)]
    return statistics.median(vals) if vals else None


def cell(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "failed" not in r]
    roles = sorted({role for r in ok for role in r.get("cpu_pct", {})})
    return {
        "throughput_rps": med([r["throughput_rps"] for r in ok]),
        "p50_ms": med([r["latency"]["p50_ms"] for r in ok]),
        "p99_ms": med([r["latency"]["p99_ms"] for r in ok]),
        "errors": sum(r.get("errors", 0) for r in ok),
        "failed_runs": len(runs) - len(ok),
        "first_error": next((r["failed"] for r in runs if "failed" in r), None)
        or next((r["first_errors"][0] for r in ok if r.get("first_errors")), None),
        "cpu_pct": {role: med([r["cpu_pct"].get(role) for r in ok]) for role in roles},
        "cpu_us_per_req": {
            role: med([(r.get("cpu_us_per_req") or {}).get(role) for r in ok]) for role in roles
        },
        "other_cpu_pct": med([r.get("other_cpu_pct") for r in ok]),
        "other_cpu_pct_max": max(
            (r["other_cpu_pct"] for r in ok if _ok(r.get("other_cpu_pct"))), default=None
        ),
    }


def paired(a: list[dict[str, Any]], b: list[dict[str, Any]], fn: Any) -> float | None:
    """Median over repetitions of fn(a[i], b[i]) — the repetitions were interleaved, so pair them."""
    vals = []
    for x, y in zip(a, b, strict=False):
        if "failed" in x or "failed" in y:
            continue
        with_nan = fn(x, y)
        if _ok(with_nan):
            vals.append(with_nan)
    return statistics.median(vals) if vals else None


def _tp(x: dict[str, Any]) -> float:
    return float(x["throughput_rps"])


def _p(q: str) -> Any:
    return lambda x: float(x["latency"][q])


def _cpu_of(role: str) -> Any:
    return lambda x: float((x.get("cpu_us_per_req") or {}).get(role) or "nan")


def _ratio(f: Any) -> Any:
    return lambda x, y: f(x) / f(y) if f(y) else float("nan")


def _diff(f: Any) -> Any:
    return lambda x, y: f(x) - f(y)


def summarize(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"pass": {}, "roundtrip": {}}
    for kind, up in data.get("upstreams", {}).items():
        rows = {}
        for c, paths in up.get("pass", {}).items():
            row = {path: cell(runs) for path, runs in paths.items()}
            d, m, f = paths.get("direct", []), paths.get("mrtr", []), paths.get("fastmcp", [])
            row["mrtr_over_direct"] = paired(m, d, _ratio(_tp))
            row["mrtr_over_fastmcp"] = paired(m, f, _ratio(_tp))
            row["fastmcp_over_direct"] = paired(f, d, _ratio(_tp))
            if paths.get("fastmcp_shared"):
                row["mrtr_over_fastmcp_shared"] = paired(m, paths["fastmcp_shared"], _ratio(_tp))
            row["added_p50_ms"] = paired(m, d, _diff(_p("p50_ms")))
            row["added_p99_ms"] = paired(m, d, _diff(_p("p99_ms")))
            rows[c] = row
        out["pass"][kind] = rows
        rt = up.get("roundtrip", {})
        if rt:
            row = {path: cell(runs) for path, runs in rt.items()}
            d = rt.get("direct", [])
            row["mrtr_over_direct_p50"] = paired(rt.get("mrtr", []), d, _ratio(_p("p50_ms")))
            row["mrtr_gather0_over_direct_p50"] = paired(rt.get("mrtr_gather0", []), d, _ratio(_p("p50_ms")))
            row["floor_over_direct_p50"] = paired(rt.get("floor", []), d, _ratio(_p("p50_ms")))
            cpu = _ratio(_cpu_of("proxy"))
            row["mrtr_over_floor_cpu"] = paired(rt.get("mrtr", []), rt.get("floor", []), cpu)
            row["fastmcp_over_direct_p50"] = paired(rt.get("fastmcp", []), d, _ratio(_p("p50_ms")))
            out["roundtrip"][kind] = row
    runs = data.get("parked", {}).get("runs", [])
    if runs:
        out["parked"] = []
        for run in runs:
            levels = run.get("levels", [])
            if not levels:
                continue
            base = levels[0]
            for lv in levels:
                n = lv.get("parked") or 0
                out["parked"].append(
                    {
                        "get_stream": run["get_stream"],
                        "parked": n,
                        "target": lv["target"],
                        "proxy_rss_mb": lv["proxy_rss_kb"] / 1024,
                        "kb_per_call": (lv["proxy_rss_kb"] - base["proxy_rss_kb"]) / n if n else None,
                        "upstream_rss_mb": lv["upstream_rss_kb"] / 1024,
                        "proxy_fds": lv.get("proxy_fds"),
                        "c1": cell([lv["c1"]]),
                        "c16": cell([lv["c16"]]),
                        "park_rate": (lv.get("park") or {}).get("rate_per_s"),
                    }
                )
    if data.get("relay"):
        out["relay"] = relay_rows(data["relay"])
        if data["relay"].get("fastmcp4"):
            out["relay_fastmcp4"] = relay_rows({"pass": data["relay"]["fastmcp4"]})
    out["targets"] = targets(data, out)
    out["goals"] = goals.goals(data, out)
    return out


def relay_rows(relay: dict[str, Any]) -> dict[str, Any]:
    """Section 6 (bench/relay_bench.py): per concurrency, the direct, relay and (when measured) aiohttp floor
    relay cells, relay ÷ direct, floor ÷ direct, relay ÷ floor, and the p50 each adds to going direct."""
    rows = {}
    for c, paths in relay.get("pass", {}).items():
        d, r, f = paths.get("direct", []), paths.get("relay", []), paths.get("floor", [])
        rows[c] = {
            "direct": cell(d),
            "relay": cell(r),
            "relay_over_direct": paired(r, d, _ratio(_tp)),
            "added_p50_ms": paired(r, d, _diff(_p("p50_ms"))),
        }
        if f:
            rows[c] |= {
                "floor": cell(f),
                "floor_over_direct": paired(f, d, _ratio(_tp)),
                "relay_over_floor": paired(r, f, _ratio(_tp)),
                "floor_added_p50_ms": paired(f, d, _diff(_p("p50_ms"))),
            }
    return rows


# --------------------------------------------------------------------------------------------------
# targets


def targets(data: dict[str, Any], s: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(name: str, measured: str, ok: bool | None, note: str = "") -> None:
        out.append({"target": name, "measured": measured, "met": ok, "note": note})

    pm = s["pass"].get("minimal", {})
    if pm:
        cs = sorted(pm, key=int)
        ratios = {c: pm[c]["mrtr_over_direct"] for c in cs}
        add(
            "pass-through throughput through the proxy ≥ 0.9× direct",
            ", ".join(f"c={c}: {fmt(r, '.2f', '×')}" for c, r in ratios.items()),
            all(r is not None and r >= 0.9 for r in ratios.values()),
            "minimal legacy server; every concurrency",
        )
        one = pm.get("1", {})
        add(
            "added latency p50 ≤ 0.5 ms",
            fmt(one.get("added_p50_ms"), ".2f", " ms"),
            None if one.get("added_p50_ms") is None else one["added_p50_ms"] <= 0.5,
            "1 client (no queueing), minimal legacy server",
        )
        add(
            "added latency p99 ≤ 2 ms",
            fmt(one.get("added_p99_ms"), ".2f", " ms"),
            None if one.get("added_p99_ms") is None else one["added_p99_ms"] <= 2.0,
            "1 client (no queueing), minimal legacy server",
        )
        vs = {c: pm[c]["mrtr_over_fastmcp"] for c in cs}
        shared = {c: pm[c].get("mrtr_over_fastmcp_shared") for c in cs}
        known = [r for r in vs.values() if r is not None]
        add(
            "≥ 2× the throughput of FastMCP's proxy",
            ", ".join(f"c={c}: {fmt(r, '.1f', '×')}" for c, r in vs.items())
            + (
                "; vs its shared-session mode: "
                + ", ".join(f"c={c}: {fmt(r, '.1f', '×')}" for c, r in shared.items())
                if any(r is not None for r in shared.values())
                else ""
            ),
            (all(r >= 2.0 for r in known) if known else None),
            "minimal legacy server; every concurrency; create_proxy(url) as documented",
        )
    for key, server in (("relay", "minimal 2026-07-28 server"), ("relay_fastmcp4", "FastMCP 4.2.3")):
        relay = s.get(key)
        if not relay:
            continue
        cs = sorted(relay, key=int)
        ratios = {c: relay[c]["relay_over_direct"] for c in cs}
        floors = {c: relay[c].get("floor_over_direct") for c in cs}
        floor_text = ""
        if any(f is not None for f in floors.values()):
            floor_text = "; the aiohttp floor relay ÷ direct: " + ", ".join(
                f"c={c}: {fmt(f, '.2f', '×')}" for c, f in floors.items()
            )
        add(
            f"relay throughput ≥ 0.9× going direct ({server})",
            ", ".join(f"c={c}: {fmt(r, '.2f', '×')}" for c, r in ratios.items()) + floor_text,
            all(r is not None and r >= 0.9 for r in ratios.values()),
            f"2026-07-28 client → mrtr-proxy → {server} vs the same client direct; every "
            "concurrency; same run, interleaved; the floor relay (bench/floor_relay.py --modern) is one "
            "aiohttp server exchange + one pooled client exchange per call, bytes as they came",
        )
    rt = s["roundtrip"].get("minimal")
    if rt:
        r, r0 = rt.get("mrtr_over_direct_p50"), rt.get("mrtr_gather0_over_direct_p50")
        add(
            "MRTR round trip ≤ 1.2× the legacy inline round trip",
            f"{fmt(r, '.2f', '×')} (p50, default "
            f"gather window 50 ms); {fmt(r0, '.2f', '×')} with gather_window_ms 0",
            None if r is None else r <= 1.2,
            "minimal legacy server, 1 client",
        )
    parked = [r for r in s.get("parked", []) if r["get_stream"]]
    if parked:
        top = parked[-1]
        goal = data.get("plan", {}).get("parked_levels", [10000])[-1]
        noget = [r for r in s.get("parked", []) if not r["get_stream"] and r["parked"]]
        extra = (
            f"; {fmt(noget[-1]['kb_per_call'], '.1f', ' KB')} at {noget[-1]['parked']:,} parked "
            "without GET streams"
            if noget
            else ""
        )
        cap = data.get("parked", {}).get("cap_with_get_stream")
        add(
            f"≤ 30 KB per parked call at {goal:,} parked",
            f"{fmt(top['kb_per_call'], '.1f', ' KB')} at {top['parked']:,} parked{extra}",
            None
            if top["kb_per_call"] is None
            else top["kb_per_call"] <= 30
            and (
                top["parked"] >= goal
                or bool(noget and noget[-1]["kb_per_call"] is not None and noget[-1]["kb_per_call"] <= 30)
            ),
            ""
            if top["parked"] >= goal
            else f"with GET streams only {top['parked']:,} fit: RLIMIT_NOFILE "
            f"{data['parked'].get('fd_limit')} (cannot be raised here) and each parked call holds 2 sockets "
            f"(cap {cap:,})",
        )
        b16, t16 = parked[0]["c16"], top["c16"]
        b1, t1 = parked[0]["c1"], top["c1"]
        collapse = None
        if None not in (b16["throughput_rps"], t16["throughput_rps"], b1["p50_ms"], t1["p50_ms"]):
            collapse = (
                t16["throughput_rps"] >= 0.5 * b16["throughput_rps"] and t1["p50_ms"] <= 2 * b1["p50_ms"]
            )
        add(
            "no latency collapse for new calls while calls are parked",
            f"c=1 p50 {fmt(b1['p50_ms'])} → {fmt(t1['p50_ms'])} ms; "
            f"c=16 {fmt(b16['throughput_rps'], '.0f')} → {fmt(t16['throughput_rps'], '.0f')} req/s, "
            f"p99 {fmt(b16['p99_ms'])} → {fmt(t16['p99_ms'])} ms (0 → {top['parked']:,} parked)",
            collapse,
            "met = c=1 p50 within 2× and c=16 throughput within 0.5× of no calls parked",
        )
    h = data.get("handles", {}).get("typical")
    if h:
        add(
            "seal + unseal ≤ 20 µs",
            f"{h['seal_us']:.1f} + {h['unseal_us']:.1f} = {h['seal_unseal_us']:.1f} µs",
            h["seal_unseal_us"] <= 20,
            "typical handle; seal includes building the claims",
        )
        big = data["handles"].get("large", {})
        add(
            "handle ≤ 512 bytes",
            f"{h['handle_bytes']} bytes (large case: {big.get('handle_bytes', 'n/a')})",
            h["handle_bytes"] <= 512 and big.get("handle_bytes", 0) <= 512,
        )
    return out
