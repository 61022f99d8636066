"""The migration report as JSON (`GET /admin/migration`), the sum of several replicas' reports, and the
verdicts on the sum (the CLI and the admin page). Pure: the caller gives the time and what the book cannot
know (each upstream's era, its parked calls).

The field names are stable (docs/migration.md). A figure is `{"calls": {path: n}, "asked": {path: n},
"by_client_era": {"2026-07-28": n, "legacy": n}, "total": n}`; each upstream and each of its tools has one
for `life` (since `started_at`), `last_24h` and `last_7d` (whole hourly buckets, the current one included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from proxy.migration.tally import (
    ASKED,
    BUCKET_S,
    BUCKETS,
    CLIENT_ERA,
    PATHS,
    MigrationBook,
)
from proxy.migration.verdict import Evidence, Thresholds, judge

SCOPES = ("life", "last_24h", "last_7d")
ERAS = ("2026-07-28", "legacy")


def figure(counts: Sequence[int]) -> dict[str, Any]:
    calls = {p: counts[i] for i, p in enumerate(PATHS)}
    by_era = {era: sum(n for p, n in calls.items() if CLIENT_ERA[p] == era) for era in ERAS}
    return {
        "calls": calls,
        "asked": {p: counts[ASKED + i] for i, p in enumerate(PATHS)},
        "by_client_era": by_era,
        "total": sum(calls.values()),
    }


def _empty() -> dict[str, Any]:
    return figure([0] * (2 * len(PATHS)))


def _add(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for part in ("calls", "asked", "by_client_era"):
        for key, n in more.get(part, {}).items():
            into[part][key] = into[part].get(key, 0) + int(n)
    into["total"] += int(more.get("total", 0))


def snapshot(
    book: MigrationBook,
    *,
    replica: str,
    thresholds: Thresholds,
    eras: Mapping[str, tuple[str, str, float]] | None = None,  # name -> (era, how, decided at)
    parked: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """This replica's report, verdicts included."""
    now = book.clock()
    hour = int(now // BUCKET_S)
    upstreams: dict[str, Any] = {}
    for name, up in book.upstreams.items():
        tools: dict[str, Any] = {}
        for tool, cell in up.cells.items():
            if not any(cell.life) and tool not in up.listed:
                continue  # the `(other)` cell of an upstream whose every call was of a listed tool
            first, last = cell.first_inline, cell.last_inline
            tools[tool] = {
                "life": figure(cell.life),
                "last_24h": figure(cell.window(hour, 24)),
                "last_7d": figure(cell.window(hour, BUCKETS)),
                "window": figure(cell.window(hour, thresholds.window_hours)),
                "inline": None if last is None else {"first_seen": first, "last_seen": last},
            }
        era = (eras or {}).get(name)
        upstreams[name] = {
            "era": era[0] if era else None,
            "era_how": era[1] if era else None,
            "era_since": era[2] if era and era[2] else None,
            "legacy_tools": {
                "listed": sorted(book.legacy_tools.get(name, ())),
                "learned": sorted(book.learned(name)),
            },
            "parked_calls": (parked or {}).get(name, 0),
            "legacy_clients": dict(sorted(up.clients.items(), key=lambda kv: -kv[1])),
            "tools": tools,
        }
    report = {
        "replicas": [{"replica": replica, "started_at": book.started_at}],
        "now": now,
        "started_at": book.started_at,
        "bucket_s": BUCKET_S,
        "buckets": BUCKETS,
        "thresholds": asdict(thresholds),
        "upstreams": upstreams,
    }
    return with_verdicts(report)


def combine(reports: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of several replicas' reports: counts added, first seen the earliest, last seen the latest,
    the window the youngest replica's (`started_at` the latest), verdicts judged again on the sum."""
    out: dict[str, Any] = {"replicas": [], "upstreams": {}}
    for report in reports:
        out["replicas"].extend(report.get("replicas", []))
        out["now"] = max(out.get("now", 0.0), float(report.get("now", 0.0)))
        out["started_at"] = max(out.get("started_at", 0.0), float(report.get("started_at", 0.0)))
        for key in ("bucket_s", "buckets", "thresholds"):
            out.setdefault(key, report.get(key))
        for name, up in report.get("upstreams", {}).items():
            into = out["upstreams"].setdefault(name, _blank(up))
            into["parked_calls"] += int(up.get("parked_calls", 0))
            for client, n in up.get("legacy_clients", {}).items():
                into["legacy_clients"][client] = into["legacy_clients"].get(client, 0) + int(n)
            for kind in ("listed", "learned"):
                merged = set(into["legacy_tools"][kind]) | set(up.get("legacy_tools", {}).get(kind, []))
                into["legacy_tools"][kind] = sorted(merged)
            for tool, fig in up.get("tools", {}).items():
                t = into["tools"].setdefault(
                    tool, {**{s: _empty() for s in (*SCOPES, "window")}, "inline": None}
                )
                for scope in (*SCOPES, "window"):
                    _add(t[scope], fig.get(scope, {}))
                t["inline"] = _seen(t["inline"], fig.get("inline"))
    for up in out["upstreams"].values():
        up["legacy_clients"] = dict(sorted(up["legacy_clients"].items(), key=lambda kv: -kv[1]))
    return with_verdicts(out)


def _blank(up: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "era": up.get("era"),
        "era_how": up.get("era_how"),
        "era_since": up.get("era_since"),
        "legacy_tools": {"listed": [], "learned": []},
        "parked_calls": 0,
        "legacy_clients": {},
        "tools": {},
    }


def _seen(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if a is None or b is None:
        return dict(b) if a is None and b is not None else (dict(a) if a is not None else None)
    return {
        "first_seen": min(a["first_seen"], b["first_seen"]),
        "last_seen": max(a["last_seen"], b["last_seen"]),
    }


def with_verdicts(report: dict[str, Any]) -> dict[str, Any]:
    """Each upstream's sums over its tools and its verdict, from the report's own figures."""
    thresholds = Thresholds(**report.get("thresholds") or {})
    now, started = float(report.get("now", 0.0)), float(report.get("started_at", 0.0))
    seen_s = max(0.0, min(thresholds.window_hours * BUCKET_S, now - started))
    for up in report["upstreams"].values():
        for scope in (*SCOPES, "window"):
            total = _empty()
            for fig in up["tools"].values():
                _add(total, fig[scope])
            up[scope] = total
        inline = sorted(
            (
                (tool, now - fig["inline"]["last_seen"])
                for tool, fig in up["tools"].items()
                if fig["window"]["asked"]["adapted"] and fig["inline"] is not None
            ),
            key=lambda item: item[1],
        )
        window = up["window"]
        evidence = Evidence(
            seen_s=seen_s,
            calls=window["total"],
            legacy_calls=window["by_client_era"]["legacy"],
            inline=tuple(inline),
            clients=tuple(up["legacy_clients"].items()),
        )
        verdict = judge(evidence, thresholds)
        up["verdict"] = {"state": verdict.state, "text": verdict.text, "seen_s": round(seen_s, 1)}
    return report
