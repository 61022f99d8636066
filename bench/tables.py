"""A bench run as Markdown: the machine, one table per section (pass-through, round trip, parked calls,
handles), the targets, the goals (``goals.py``) and the profile. What ``make bench`` prints and records."""

from __future__ import annotations

import statistics
from typing import Any

import goals
import goals31

UPSTREAM_LABEL = {"minimal": "minimal aiohttp legacy server", "fastmcp130": "FastMCP 1.30 legacy server"}
PATH_LABEL = {
    "direct": "direct",
    "mrtr": "mrtr-proxy",
    "floor": "aiohttp floor relay",
    "fastmcp": "FastMCP proxy",
    "fastmcp_shared": "FastMCP proxy, shared session",
}


def fmt(x: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "n/a" if x is None else f"{x:{spec}}{unit}"


def _pp(c: dict[str, Any]) -> str:
    return f"{fmt(c.get('p50_ms'))} / {fmt(c.get('p99_ms'))}"


def _cpu(c: dict[str, Any]) -> str:
    cpu = c.get("cpu_pct") or {}
    order = [r for r in ("proxy", "upstream", "loadgen") if r in cpu]
    return " / ".join(f"{cpu[r]:.0f}" if cpu[r] is not None else "n/a" for r in order)


def _other(cells: list[dict[str, Any]]) -> str:
    vals = [c["other_cpu_pct"] for c in cells if c.get("other_cpu_pct") is not None]
    peaks = [c["other_cpu_pct_max"] for c in cells if c.get("other_cpu_pct_max") is not None]
    if not vals:
        return ""
    return (
        "Other processes on the machine (not the bench's) used a median "
        f"{statistics.median(vals):.0f}% of one core during these windows (at most {max(peaks):.0f}%)."
    )


def _flag(c: dict[str, Any]) -> str:
    bad = []
    if c.get("failed_runs"):
        bad.append(f"{c['failed_runs']} run(s) failed")
    if c.get("errors"):
        bad.append(f"{c['errors']} errors")
    return f" ⚠ {', '.join(bad)}" if bad else ""


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _header(*names: str, left: int = 0, text_last: bool = False) -> list[str]:
    """A Markdown table header: the first `left` columns left-aligned, the others right-aligned (numbers),
    except the last one with `text_last`."""
    right = len(names) - left - text_last
    return [_row(*names), "|" + "---|" * left + "---:|" * right + "---|" * text_last]


def _machine_lines(data: dict[str, Any]) -> list[str]:
    m, plan = data["machine"], data["plan"]
    loads = ", ".join(f"{x:.2f}" for x in m["loadavg"])
    busiest = ", ".join(f"{t['comm']} {t['cpu_pct']:.0f}%" for t in m.get("background_top", []))
    return [
        f"Machine: {m['nproc']} cores, {m['cpu_model']}, {m['mem_gb']} GB, Linux {m['kernel']}, "
        f"Python {m['python']}; background CPU before/after the run {m['background_cpu_pct']}% / "
        f"{m.get('background_cpu_pct_after', 'n/a')}% (whole machine); load average at start {loads}"
        + (f"; busiest other processes at start: {busiest}" if busiest else "")
        + ".",
        f"Versions: {', '.join(f'{k} {v}' for k, v in m['versions'].items())}; git {m['git']}.",
        f"Plan: {plan['name']} — {plan['reps']} interleaved repetitions × {plan['duration']:g} s windows "
        f"(after {plan['warmup']:g} s warm-up); run took {data.get('elapsed_s', 'n/a')} s.",
        "",
        *[f"- {note}" for note in data.get("notes", [])],
        "",
    ]


def _pass_lines(kind: str, rows: dict[str, Any]) -> list[str]:
    has_shared = any("fastmcp_shared" in r for r in rows.values())
    has_floor = any("floor" in r for r in rows.values())
    paths = ["direct", "mrtr", *(["floor"] if has_floor else []), "fastmcp"]
    paths += ["fastmcp_shared"] if has_shared else []
    ratios = ["mrtr ÷ direct", "mrtr ÷ FastMCP"] + (["mrtr ÷ FastMCP shared"] if has_shared else [])
    lines = [
        f"### 1. Pass-through: plain tool call, {UPSTREAM_LABEL.get(kind, kind)}",
        "",
        *_header(
            "clients",
            *(f"{PATH_LABEL[p]} req/s" for p in paths),
            *ratios,
            *(f"{PATH_LABEL[p]} p50 / p99 ms" for p in paths),
            "added by mrtr p50 / p99 ms",
        ),
    ]
    for c in sorted(rows, key=int):
        r = rows[c]
        cells = [r.get(p) or {} for p in paths]
        ratio_cells = [fmt(r["mrtr_over_direct"], ".2f", "×"), fmt(r["mrtr_over_fastmcp"], ".1f", "×")]
        if has_shared:
            ratio_cells.append(fmt(r.get("mrtr_over_fastmcp_shared"), ".1f", "×"))
        lines.append(
            _row(
                c,
                *(f"{fmt(x.get('throughput_rps'), '.0f')}{_flag(x)}" for x in cells),
                *ratio_cells,
                *(_pp(x) for x in cells),
                f"{fmt(r['added_p50_ms'])} / {fmt(r['added_p99_ms'])}",
            )
        )
    lines += [
        "",
        "CPU time per request (µs, from /proc/<pid>/stat over the window ÷ requests completed) — steadier "
        "than req/s on a shared machine — and CPU % of one core during the mrtr-proxy run:",
        "",
        *_header(
            "clients",
            *(f"{PATH_LABEL[p]}: proxy µs" for p in paths[1:]),
            "legacy server µs (direct)",
            "loadgen µs (direct)",
            "loadgen µs (mrtr)",
            "mrtr run CPU %: proxy / server / loadgen / others",
        ),
    ]
    for c in sorted(rows, key=int):
        r = rows[c]

        def us(path: str, role: str, r: dict[str, Any] = r) -> str:
            return fmt(((r.get(path) or {}).get("cpu_us_per_req") or {}).get(role), ".0f")

        lines.append(
            _row(
                c,
                *(us(p, "proxy") for p in paths[1:]),
                us("direct", "upstream"),
                us("direct", "loadgen"),
                us("mrtr", "loadgen"),
                f"{_cpu(r['mrtr'])} / {fmt(r['mrtr'].get('other_cpu_pct'), '.0f')}",
            )
        )
    lines += ["", _other([v for r in rows.values() for v in r.values() if isinstance(v, dict)]), ""]
    return lines


def _roundtrip_lines(s: dict[str, Any]) -> list[str]:
    lines = [
        "### 2. Round trip: one elicitation answered at once, 1 client",
        "",
        *_header(
            "legacy server",
            "direct, legacy inline p50 / p99 ms",
            "mrtr-proxy MRTR p50 / p99 ms (gather 50 ms, default)",
            "mrtr-proxy MRTR p50 / p99 ms (gather 0)",
            "aiohttp floor relay, MRTR p50 / p99 ms",
            "FastMCP proxy, inline p50 / p99 ms",
            "mrtr ÷ direct (p50)",
            "mrtr gather 0 ÷ direct (p50)",
            "floor ÷ direct (p50)",
            "mrtr ÷ floor, proxy CPU per round trip",
            left=1,
        ),
    ]
    for kind, r in s["roundtrip"].items():
        paths = ("direct", "mrtr", "mrtr_gather0", "floor", "fastmcp")
        lines.append(
            _row(
                UPSTREAM_LABEL.get(kind, kind),
                *(f"{_pp(r[p])}{_flag(r[p])}" if p in r else "n/a" for p in paths),
                fmt(r["mrtr_over_direct_p50"], ".2f", "×"),
                fmt(r["mrtr_gather0_over_direct_p50"], ".2f", "×"),
                fmt(r.get("floor_over_direct_p50"), ".2f", "×"),
                fmt(r.get("mrtr_over_floor_cpu"), ".2f", "×"),
            )
        )
    cells = [v for r in s["roundtrip"].values() for v in r.values() if isinstance(v, dict)]
    return [*lines, "", _other(cells), ""]


def _parked_lines(data: dict[str, Any], s: dict[str, Any]) -> list[str]:
    lines = [
        "### 3. Parked calls (minimal legacy server; a parked call holds its upstream session: "
        "POST stream + GET stream)",
        "",
        *_header(
            "GET stream",
            "parked",
            "proxy RSS MB",
            "KB per parked call",
            "proxy fds",
            "legacy server RSS MB",
            "new calls, 1 client p50 / p99 ms",
            "new calls, 16 clients req/s",
            "16 clients p50 / p99 ms",
            "parked at (calls/s)",
            left=1,
        ),
    ]
    for r in s["parked"]:
        lines.append(
            _row(
                "yes" if r["get_stream"] else "no",
                r["parked"] if r["parked"] is not None else "n/a",
                f"{r['proxy_rss_mb']:.1f}",
                fmt(r["kb_per_call"], ".1f"),
                r.get("proxy_fds", "n/a"),
                f"{r['upstream_rss_mb']:.1f}",
                f"{_pp(r['c1'])}{_flag(r['c1'])}",
                fmt(r["c16"]["throughput_rps"], ".0f"),
                f"{_pp(r['c16'])}{_flag(r['c16'])}",
                fmt(r["park_rate"], ".0f"),
            )
        )
    lines += ["", _other([r[k] for r in s["parked"] for k in ("c1", "c16")])]
    pk = data.get("parked", {})
    if pk.get("cap_with_get_stream") and len(pk.get("runs", [])) > 1:
        lines.append(
            f"\nRLIMIT_NOFILE is {pk['fd_limit']} here and cannot be raised, and a parked call holds two "
            f"sockets in the proxy (and two in the server), so at most {pk['cap_with_get_stream']:,} calls "
            "fit with GET streams; the last level was measured again against a legacy server that offers "
            "no GET stream."
        )
    lines += [f"\nStopped early: {run['stopped']}" for run in pk.get("runs", []) if run.get("stopped")]
    return [*lines, ""]


def _handle_lines(data: dict[str, Any]) -> list[str]:
    lines = [
        "### 4. Handles (requestState)",
        "",
        *_header(
            "case",
            "seal µs (claims + seal)",
            "unseal µs (open + verify)",
            "seal + unseal µs",
            "target digest µs",
            "bytes",
            "steps µs",
            left=1,
            text_last=True,
        ),
    ]
    for name, h in data["handles"].items():
        steps = ", ".join(f"{k} {v:.1f}" for k, v in h.get("steps_us", {}).items())
        lines.append(
            _row(
                name,
                f"{h['seal_us']:.1f}",
                f"{h['unseal_us']:.1f}",
                f"{h['seal_unseal_us']:.1f}",
                f"{h['target_digest_us']:.1f}",
                h["handle_bytes"],
                steps,
            )
        )
    return [*lines, ""]


def _profile_lines(prof: dict[str, Any]) -> list[str]:
    load = prof.get("raw_load") or {}
    inclusive = {b["area"]: b["pct"] for b in prof["inclusive_by_area"]}
    areas = "; ".join(
        f"{a['area']} {a['pct']}% / {inclusive.get(a['area'], 'n/a')}%" for a in prof["self_by_area"]
    )
    svg = next((f for f in prof.get("files", []) if f.endswith(".svg")), "n/a")
    return [
        f"### Profile of the proxy ({prof['workload']}, py-spy, {prof['samples']} samples)",
        "",
        f"During the profile the proxy used {fmt(prof.get('raw_proxy_cpu_pct'), '.0f')}% of one core at "
        f"{fmt(load.get('throughput_rps'), '.0f')} req/s, other processes "
        f"{fmt(load.get('other_cpu_pct'), '.0f')}%. py-spy samples the thread whenever it is not idle, so "
        "time spent preempted (e.g. inside a loopback `send()` that woke the receiver) counts too.",
        "",
        f"CPU by area (self time / inclusive): {areas}",
        "",
        *_header("inclusive %", "where the proxy's time goes", text_last=True),
        *[_row(x["pct"], x["phase"]) for x in prof.get("phases", [])],
        "",
        *_header("inclusive %", "mrtr-proxy function (file)", text_last=True),
        *[_row(x["pct"], f"`{x['function']}`") for x in prof["inclusive_proxy_top"][:12]],
        "",
        *_header("self %", "hottest lines (function (file:line))", text_last=True),
        *[_row(x["pct"], f"`{x['frame']}`") for x in prof["self_top"][:12]],
        "",
        f"Flame graph: `{svg}`.",
        "",
    ]


def _relay_lines(rows: dict[str, Any], server: str = "minimal 2026-07-28 server") -> list[str]:
    has_floor = any("floor" in r for r in rows.values())
    floor_cols = ["floor relay req/s", "relay ÷ floor"] if has_floor else []
    lines = [
        f"### 6. Native relay: plain tool call, 2026-07-28 client and {server}",
        "",
        *_header(
            "clients",
            "direct req/s",
            "relay req/s",
            *floor_cols,
            "relay ÷ direct",
            *(["floor ÷ direct"] if has_floor else []),
            "p50 ms direct / relay" + (" / floor" if has_floor else ""),
            "added p50",
            *(["floor's added p50"] if has_floor else []),
        ),
    ]
    for c in sorted(rows, key=int):
        r = rows[c]
        d, m, f = r["direct"], r["relay"], r.get("floor") or {}
        floor_cells = (
            [f"{fmt(f.get('throughput_rps'), '.0f')}{_flag(f)}", fmt(r.get("relay_over_floor"), ".2f", "×")]
            if has_floor
            else []
        )
        p50s = f"{fmt(d.get('p50_ms'))} / {fmt(m.get('p50_ms'))}"
        lines.append(
            _row(
                c,
                f"{fmt(d.get('throughput_rps'), '.0f')}{_flag(d)}",
                f"{fmt(m.get('throughput_rps'), '.0f')}{_flag(m)}",
                *floor_cells,
                fmt(r["relay_over_direct"], ".2f", "×"),
                *([fmt(r.get("floor_over_direct"), ".2f", "×")] if has_floor else []),
                p50s + (f" / {fmt(f.get('p50_ms'))}" if has_floor else ""),
                fmt(r["added_p50_ms"]),
                *([fmt(r.get("floor_added_p50_ms"))] if has_floor else []),
            )
        )
    return [*lines, ""]


def markdown(data: dict[str, Any], s: dict[str, Any]) -> str:
    lines = _machine_lines(data)
    for kind, rows in s["pass"].items():
        lines += _pass_lines(kind, rows)
    if s["roundtrip"]:
        lines += _roundtrip_lines(s)
    if s.get("parked"):
        lines += _parked_lines(data, s)
    if data.get("handles"):
        lines += _handle_lines(data)
    if s.get("relay"):
        lines += _relay_lines(s["relay"])
    if s.get("relay_fastmcp4"):
        lines += _relay_lines(s["relay_fastmcp4"], "FastMCP 4.2.3 (two eras)")
    if goals31.instructions(data):
        lines += _instruction_lines(data)
    lines += ["### Targets", "", *_header("target", "measured", "met", "note", left=4)]
    for t in s["targets"]:
        verdict = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
        lines.append(_row(t["target"], t["measured"], verdict, t["note"]))
    lines.append("")
    lines += goals.markdown_lines(s.get("goals") or goals.goals(data, s))
    if s["pass"]:
        title = "Goals of issue 31 (beside the aiohttp floor relay)"
        lines += goals.markdown_lines(goals31.rows(data, s), title)
    if data.get("aggregate"):
        lines += goals.markdown_lines(goals.aggregate_rows(data), "Goals of issue 30 (aggregated routes)")
    prof = profile_of(data)
    if prof and prof.get("samples"):
        lines += _profile_lines(prof)
    return "\n".join(lines)


_EXCHANGES = {
    "pass": "pass-through call",
    "l2": "pass-through call: simulated misses of this CPU's L2 (not instructions)",
    "first": "MRTR first exchange (the call, parked: input_required)",
    "second": "MRTR second exchange (the retry, resumed: the result)",
    "roundtrip": "MRTR round trip",
}


def _instruction_lines(data: dict[str, Any]) -> list[str]:
    calls = data["instructions"].get("calls")
    lines = [
        "### 7. Instructions and L2 misses per exchange "
        f"(callgrind, minimal legacy server, 16 clients, {calls} each)",
        "",
        *_header("exchange", "mrtr-proxy", "aiohttp floor relay", "mrtr ÷ floor", left=1),
    ]
    for key, (mine, floor, ratio) in goals31.instructions(data).items():
        lines.append(_row(_EXCHANGES[key], f"{mine:,}", f"{floor:,}", fmt(ratio, ".2f", "×")))
    return [*lines, ""]


def profile_of(data: dict[str, Any]) -> dict[str, Any] | None:
    return data.get("upstreams", {}).get("minimal", {}).get("profile")
