"""Turns a bench run (``bench/run.py``'s data) into medians, ratios, target verdicts, tables, a plot, a
profile summary, and a dated section of ``bench/RESULTS.md``.

Re-render the latest run without measuring again: ``python bench/report.py [bench/results/latest.json]``.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import goals

UPSTREAM_LABEL = {"minimal": "minimal aiohttp legacy server", "fastmcp130": "FastMCP 1.30 legacy server"}
PATH_LABEL = {
    "direct": "direct",
    "mrtr": "mrtr-proxy",
    "floor": "aiohttp floor relay",
    "fastmcp": "FastMCP proxy",
    "fastmcp_shared": "FastMCP proxy, shared session",
}
RESULTS_HEADER = """# Benchmark results

Each `make bench` (or `make bench-quick`) run appends a section here: the date, the machine, and the table it
printed. How the numbers are taken: `bench/README.md`. Newest last.
"""


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
    out["targets"] = targets(data, out)
    out["goals"] = goals.goals(data, out)
    return out


# --------------------------------------------------------------------------------------------------
# targets


def _fmt(x: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "n/a" if x is None else f"{x:{spec}}{unit}"


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
            ", ".join(f"c={c}: {_fmt(r, '.2f', '×')}" for c, r in ratios.items()),
            all(r is not None and r >= 0.9 for r in ratios.values()),
            "minimal legacy server; every concurrency",
        )
        one = pm.get("1", {})
        add(
            "added latency p50 ≤ 0.5 ms",
            _fmt(one.get("added_p50_ms"), ".2f", " ms"),
            None if one.get("added_p50_ms") is None else one["added_p50_ms"] <= 0.5,
            "1 client (no queueing), minimal legacy server",
        )
        add(
            "added latency p99 ≤ 2 ms",
            _fmt(one.get("added_p99_ms"), ".2f", " ms"),
            None if one.get("added_p99_ms") is None else one["added_p99_ms"] <= 2.0,
            "1 client (no queueing), minimal legacy server",
        )
        vs = {c: pm[c]["mrtr_over_fastmcp"] for c in cs}
        shared = {c: pm[c].get("mrtr_over_fastmcp_shared") for c in cs}
        known = [r for r in vs.values() if r is not None]
        add(
            "≥ 2× the throughput of FastMCP's proxy",
            ", ".join(f"c={c}: {_fmt(r, '.1f', '×')}" for c, r in vs.items())
            + (
                "; vs its shared-session mode: "
                + ", ".join(f"c={c}: {_fmt(r, '.1f', '×')}" for c, r in shared.items())
                if any(r is not None for r in shared.values())
                else ""
            ),
            (all(r >= 2.0 for r in known) if known else None),
            "minimal legacy server; every concurrency; create_proxy(url) as documented",
        )
    rt = s["roundtrip"].get("minimal")
    if rt:
        r, r0 = rt.get("mrtr_over_direct_p50"), rt.get("mrtr_gather0_over_direct_p50")
        add(
            "MRTR round trip ≤ 1.2× the legacy inline round trip",
            f"{_fmt(r, '.2f', '×')} (p50, default "
            f"gather window 50 ms); {_fmt(r0, '.2f', '×')} with gather_window_ms 0",
            None if r is None else r <= 1.2,
            "minimal legacy server, 1 client",
        )
    parked = [r for r in s.get("parked", []) if r["get_stream"]]
    if parked:
        top = parked[-1]
        goal = data.get("plan", {}).get("parked_levels", [10000])[-1]
        noget = [r for r in s.get("parked", []) if not r["get_stream"] and r["parked"]]
        extra = (
            f"; {_fmt(noget[-1]['kb_per_call'], '.1f', ' KB')} at {noget[-1]['parked']:,} parked "
            "without GET streams"
            if noget
            else ""
        )
        cap = data.get("parked", {}).get("cap_with_get_stream")
        add(
            f"≤ 30 KB per parked call at {goal:,} parked",
            f"{_fmt(top['kb_per_call'], '.1f', ' KB')} at {top['parked']:,} parked{extra}",
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
            f"c=1 p50 {_fmt(b1['p50_ms'])} → {_fmt(t1['p50_ms'])} ms; "
            f"c=16 {_fmt(b16['throughput_rps'], '.0f')} → {_fmt(t16['throughput_rps'], '.0f')} req/s, "
            f"p99 {_fmt(b16['p99_ms'])} → {_fmt(t16['p99_ms'])} ms (0 → {top['parked']:,} parked)",
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


# --------------------------------------------------------------------------------------------------
# profile


_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def short_path(path: str, root: Path) -> str:
    """`proxy/…` for the project, `aiohttp/…` for installed packages, `asyncio/…` for the standard library."""
    for marker in ("site-packages/", "/lib/python3."):
        if marker in path:
            tail = path.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker.startswith("/lib") else tail
    if path.startswith(str(root) + "/"):
        return path[len(str(root)) + 1 :]
    return path


def area(file: str) -> str:
    if file.startswith("proxy/"):
        return "mrtr-proxy code (proxy/)"
    for prefix, name in (
        ("aiohttp/", "aiohttp"),
        ("structlog/", "structlog (logging)"),
        ("asyncio/", "asyncio"),
        ("json/", "json"),
        ("cryptography/", "cryptography"),
        ("multidict/", "multidict/yarl"),
        ("yarl/", "multidict/yarl"),
    ):
        if file.startswith(prefix):
            return name
    return "other"


# Phases of a proxied request, by a frame that marks them (inclusive: a sample counts once per phase).
PHASES = (
    ("front: Endpoint.handle (parse, check, dispatch, call service)", "Endpoint.handle "),
    ("  of which CallService.start (acquire a session, start the call, drive it)", "CallService.start "),
    (
        "upstream POST: StreamableHttpSession._post_and_read (aiohttp client request + reply)",
        "_post_and_read ",
    ),
    ("aiohttp client: ClientRequest.write_bytes (send the upstream request)", "ClientRequest.write_bytes "),
    (
        "aiohttp server: RequestHandler.finish_response (write the client's response)",
        "RequestHandler.finish_response ",
    ),
    (
        "aiohttp server: RequestHandler.data_received (parse the client's request)",
        "RequestHandler.data_received ",
    ),
    ("logging: structlog (anything under it)", "(structlog/"),
    ("asyncio.timeout / timers", "asyncio/timeouts.py"),
    ("metrics (proxy/observe/metrics.py)", "proxy/observe/metrics.py"),
    ("event loop: EpollSelector.select", "EpollSelector.select "),
)
SEND_LEAF = "socket send() (leaf: _SelectorSocketTransport.write → sock.send)"


def analyse_profile(raw: str, root: Path, top: int = 15) -> dict[str, Any]:
    """py-spy `--format raw` (collapsed stacks) → self and inclusive hot spots with file:line, and areas."""
    self_line: Counter[str] = Counter()
    incl_func: Counter[str] = Counter()
    self_area: Counter[str] = Counter()
    incl_area: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = []
        for frame in stack.split(";"):
            m = _FRAME.match(frame)
            if m is None:
                frames.append((frame, "?", None))
                continue
            frames.append((m["func"], short_path(m["file"], root), m["line"]))
        func, file, lineno = frames[-1]
        self_line[f"{func} ({file}:{lineno})"] += n
        for label, needle in PHASES:
            if any(needle in f for f in stack.split(";")):
                phases[label] += n
        if func == "_SelectorSocketTransport.write":
            phases[SEND_LEAF] += n
        self_area[area(file)] += n
        for name in {f"{fn} ({fl})" for fn, fl, _ in frames}:
            incl_func[name] += n
        for name in {area(fl) for _, fl, _ in frames}:
            incl_area[name] += n
    pct = lambda n: round(100.0 * n / total, 1) if total else 0.0  # noqa: E731
    proxy_incl = [(k, v) for k, v in incl_func.most_common() if "(proxy/" in k]
    return {
        "samples": total,
        "self_top": [{"frame": k, "pct": pct(v)} for k, v in self_line.most_common(top)],
        "self_by_area": [{"area": k, "pct": pct(v)} for k, v in self_area.most_common()],
        "inclusive_by_area": [{"area": k, "pct": pct(v)} for k, v in incl_area.most_common()],
        "inclusive_proxy_top": [{"function": k, "pct": pct(v)} for k, v in proxy_incl[:top]],
        "inclusive_top": [{"function": k, "pct": pct(v)} for k, v in incl_func.most_common(top + 10)],
        "phases": [{"phase": label, "pct": pct(phases[label])} for label, _ in PHASES]
        + [{"phase": SEND_LEAF, "pct": pct(phases[SEND_LEAF])}],
    }


# --------------------------------------------------------------------------------------------------
# tables


def _pp(c: dict[str, Any]) -> str:
    return f"{_fmt(c.get('p50_ms'))} / {_fmt(c.get('p99_ms'))}"


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
        ratio_cells = [_fmt(r["mrtr_over_direct"], ".2f", "×"), _fmt(r["mrtr_over_fastmcp"], ".1f", "×")]
        if has_shared:
            ratio_cells.append(_fmt(r.get("mrtr_over_fastmcp_shared"), ".1f", "×"))
        lines.append(
            _row(
                c,
                *(f"{_fmt(x.get('throughput_rps'), '.0f')}{_flag(x)}" for x in cells),
                *ratio_cells,
                *(_pp(x) for x in cells),
                f"{_fmt(r['added_p50_ms'])} / {_fmt(r['added_p99_ms'])}",
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
            return _fmt(((r.get(path) or {}).get("cpu_us_per_req") or {}).get(role), ".0f")

        lines.append(
            _row(
                c,
                *(us(p, "proxy") for p in paths[1:]),
                us("direct", "upstream"),
                us("direct", "loadgen"),
                us("mrtr", "loadgen"),
                f"{_cpu(r['mrtr'])} / {_fmt(r['mrtr'].get('other_cpu_pct'), '.0f')}",
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
            "FastMCP proxy, inline p50 / p99 ms",
            "mrtr ÷ direct (p50)",
            "mrtr gather 0 ÷ direct (p50)",
            left=1,
        ),
    ]
    for kind, r in s["roundtrip"].items():
        paths = ("direct", "mrtr", "mrtr_gather0", "fastmcp")
        lines.append(
            _row(
                UPSTREAM_LABEL.get(kind, kind),
                *(f"{_pp(r[p])}{_flag(r[p])}" for p in paths),
                _fmt(r["mrtr_over_direct_p50"], ".2f", "×"),
                _fmt(r["mrtr_gather0_over_direct_p50"], ".2f", "×"),
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
                _fmt(r["kb_per_call"], ".1f"),
                r.get("proxy_fds", "n/a"),
                f"{r['upstream_rss_mb']:.1f}",
                f"{_pp(r['c1'])}{_flag(r['c1'])}",
                _fmt(r["c16"]["throughput_rps"], ".0f"),
                f"{_pp(r['c16'])}{_flag(r['c16'])}",
                _fmt(r["park_rate"], ".0f"),
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
        f"During the profile the proxy used {_fmt(prof.get('raw_proxy_cpu_pct'), '.0f')}% of one core at "
        f"{_fmt(load.get('throughput_rps'), '.0f')} req/s, other processes "
        f"{_fmt(load.get('other_cpu_pct'), '.0f')}%. py-spy samples the thread whenever it is not idle, so "
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
    lines += ["### Targets", "", *_header("target", "measured", "met", "note", left=4)]
    for t in s["targets"]:
        verdict = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
        lines.append(_row(t["target"], t["measured"], verdict, t["note"]))
    lines.append("")
    lines += goals.markdown_lines(s.get("goals") or goals.goals(data, s))
    prof = profile_of(data)
    if prof and prof.get("samples"):
        lines += _profile_lines(prof)
    return "\n".join(lines)


def profile_of(data: dict[str, Any]) -> dict[str, Any] | None:
    return data.get("upstreams", {}).get("minimal", {}).get("profile")


# --------------------------------------------------------------------------------------------------
# plot


def plot(data: dict[str, Any], s: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    colours = {"direct": "#4c72b0", "mrtr": "#dd8452", "fastmcp": "#55a868", "fastmcp_shared": "#8172b3"}
    styles = {"minimal": "-", "fastmcp130": "--"}
    ax_tp, ax_lat, ax_rt, ax_park = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    for kind, rows in s["pass"].items():
        cs = sorted(rows, key=int)
        for path in ("direct", "mrtr", "fastmcp", "fastmcp_shared"):
            if path not in rows[cs[0]]:
                continue
            xs = [int(c) for c in cs if rows[c][path]["throughput_rps"] is not None]
            label = f"{PATH_LABEL[path]} → {UPSTREAM_LABEL.get(kind, kind).replace(' legacy server', '')}"
            ax_tp.plot(
                xs,
                [rows[str(c)][path]["throughput_rps"] for c in xs],
                styles.get(kind, "-"),
                marker="o",
                color=colours[path],
                label=label,
            )
            ax_lat.plot(
                xs,
                [rows[str(c)][path]["p50_ms"] for c in xs],
                styles.get(kind, "-"),
                marker="o",
                color=colours[path],
                label=label,
            )
    ticks = sorted({int(c) for rows in s["pass"].values() for c in rows})
    for ax, title, unit in (
        (ax_tp, "Pass-through throughput", "requests/s"),
        (ax_lat, "Pass-through p50 latency", "ms"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    ax_lat.set_yscale("log")
    ax_tp.set_yscale("log")
    ax_tp.legend(fontsize=7)

    if s["roundtrip"]:
        kinds = list(s["roundtrip"])
        paths = [
            ("direct", "direct (legacy inline)"),
            ("mrtr", "mrtr-proxy (MRTR, gather 50 ms)"),
            ("mrtr_gather0", "mrtr-proxy (MRTR, gather 0)"),
            ("fastmcp", "FastMCP proxy (inline)"),
        ]
        width = 0.8 / len(paths)
        for i, (path, label) in enumerate(paths):
            vals = [s["roundtrip"][k][path]["p50_ms"] or 0 for k in kinds]
            xs = [j + i * width for j in range(len(kinds))]
            bars = ax_rt.bar(xs, vals, width, label=label)
            ax_rt.bar_label(bars, fmt="%.1f", fontsize=7)
        ax_rt.set_xticks([j + width * (len(paths) - 1) / 2 for j in range(len(kinds))])
        ax_rt.set_xticklabels([UPSTREAM_LABEL.get(k, k) for k in kinds])
        ax_rt.set_ylabel("p50 ms (one elicitation round trip, 1 client)")
        ax_rt.set_title("Round trip with one elicitation")
        ax_rt.legend(fontsize=7)
        ax_rt.grid(True, axis="y", alpha=0.3)

    if s.get("parked"):
        rows = [r for r in s["parked"] if r["get_stream"]]
        noget = [r for r in s["parked"] if not r["get_stream"] and r["parked"]]
        xs = [r["parked"] or 0 for r in rows]
        ax_park.plot(
            xs, [r["proxy_rss_mb"] for r in rows], marker="o", color="#dd8452", label="proxy RSS (MB)"
        )
        if noget:
            ax_park.plot(
                [r["parked"] for r in noget],
                [r["proxy_rss_mb"] for r in noget],
                marker="x",
                linestyle="",
                color="#c44e52",
                label="proxy RSS, server without GET stream (MB)",
            )
        ax_park.set_xlabel("calls parked")
        ax_park.set_ylabel("proxy RSS MB")
        ax_park.set_title("Parked calls: proxy memory and new-call latency")
        ax_park.grid(True, alpha=0.3)
        twin = ax_park.twinx()
        twin.plot(
            xs,
            [r["c1"]["p50_ms"] for r in rows],
            marker="s",
            color="#4c72b0",
            label="new call p50, 1 client (ms)",
        )
        twin.plot(
            xs,
            [r["c16"]["p99_ms"] for r in rows],
            marker="^",
            color="#55a868",
            label="new call p99, 16 clients (ms)",
        )
        twin.set_ylabel("ms")
        h1, l1 = ax_park.get_legend_handles_labels()
        h2, l2 = twin.get_legend_handles_labels()
        ax_park.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")
    m = data["machine"]
    fig.suptitle(
        f"mrtr-proxy benchmarks — {data['date']} — {m['nproc']} cores {m['cpu_model']}, Python {m['python']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------------


def finish(data: dict[str, Any], results: Path, results_md: Path, *, record: bool) -> None:
    summary = summarize(data)
    data["summary"] = summary
    (results / "latest.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    text = markdown(data, summary)
    try:
        plot(data, summary, results / "latest.png")
    except Exception as exc:  # the table and JSON still matter without the plot
        print(f"plot failed: {exc}", file=sys.stderr)
    print(text)
    if record:
        if not results_md.exists():
            results_md.write_text(RESULTS_HEADER)
        with results_md.open("a") as f:
            f.write(
                f"\n## {data['date']} — `make bench{'-quick' if data['plan']['name'] == 'quick' else ''}`\n\n"
            )
            f.write(text + "\n")
    print(
        f"\nwrote {results / 'latest.json'}, {results / 'latest.png'}"
        + (f", appended to {results_md}" if record else ""),
        file=sys.stderr,
    )


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results" / "latest.json"
    data = json.loads(path.read_text())
    summary = summarize(data)
    plot(data, summary, path.with_suffix(".png"))
    print(markdown(data, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
