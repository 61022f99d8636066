"""`mrtr-proxy migration --admin URL[,URL…] [--token-file F] [--json]`: the migration report of every replica
given (each one's `GET /admin/migration` on its admin listener), summed, as a table per upstream and tool
with the verdicts judged on the sum (proxy/migration/report.py `combine`), or as JSON for scripts.

Each replica counts in memory from its own start: a restarted replica starts again at zero, so the sum
covers what the replicas now running have seen, and the verdict's window is the youngest one's age.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from proxy.migration.report import combine
from proxy.migration.tally import PATHS
from proxy.migration.verdict import span

TIMEOUT_S = 10.0
TOKEN_ENV = "MRTR_ADMIN_TOKEN"  # noqa: S105 (the name of the variable, not a secret)


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "migration",
        help="which upstreams and tools still need the proxy: the replicas' reports, summed, with verdicts",
        description="Reads GET /admin/migration from each replica's admin listener and sums them.",
    )
    parser.add_argument(
        "--admin", required=True, help="admin listener URLs, comma-separated (http://10.0.0.5:9090,…)"
    )
    parser.add_argument(
        "--token-file", type=Path, help=f"file holding the admin token (else the {TOKEN_ENV} variable)"
    )
    parser.add_argument("--json", action="store_true", help="print the summed report as JSON")


def run(args: argparse.Namespace) -> int:
    token = (
        args.token_file.read_text(encoding="utf-8").strip()
        if args.token_file
        else os.environ.get(TOKEN_ENV, "")
    )
    if not token:
        print(f"mrtr-proxy migration: give --token-file or set {TOKEN_ENV}", file=sys.stderr)
        return 2
    urls = [u.strip().rstrip("/") for u in args.admin.split(",") if u.strip()]
    reports, failures = asyncio.run(_fetch_all(urls, token))
    for url, why in failures:
        print(f"mrtr-proxy migration: {url}: {why} (left out of the sum)", file=sys.stderr)
    if not reports:
        return 1
    summed = combine(reports)
    print(json.dumps(summed, indent=2, sort_keys=True) if args.json else "\n".join(table(summed)))
    return 1 if failures else 0


async def _fetch_all(urls: list[str], token: str) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout, cookie_jar=aiohttp.DummyCookieJar()) as http:
        got = await asyncio.gather(*(_fetch(http, url, token) for url in urls))
    reports = [r for r in got if isinstance(r, dict)]
    failures = [(url, r) for url, r in zip(urls, got, strict=True) if isinstance(r, str)]
    return reports, failures


async def _fetch(http: aiohttp.ClientSession, url: str, token: str) -> dict[str, Any] | str:
    try:
        async with http.get(f"{url}/admin/migration", headers={"Authorization": f"Bearer {token}"}) as resp:
            if resp.status != 200:
                return f"HTTP {resp.status}"
            body = await resp.json()
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return f"unreachable ({exc or type(exc).__name__})"
    return body if isinstance(body, dict) else "not a migration report"


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) if t else "-"


def table(report: dict[str, Any]) -> list[str]:
    """The summed report as text: per upstream its verdict, then a row per tool over the verdict's window."""
    now = float(report.get("now", 0.0))
    replicas = report.get("replicas", [])
    hours = report.get("thresholds", {}).get("window_hours", 168)
    seen = span(max(0.0, min(hours * 3600, now - float(report.get("started_at", now)))))
    lines = [f"{len(replicas)} replica(s); window: last {hours} h, seen {seen} (counts start at each start)"]
    head = ["tool", *PATHS, "asked", "inline", "2026-07-28", "legacy", "total", "inline last seen"]
    for name, up in report.get("upstreams", {}).items():
        era = up.get("era") or "unknown"
        how = f" ({up['era_how']}, since {_when(up.get('era_since'))})" if up.get("era_how") else ""
        lines += ["", f"upstream {name}: era {era}{how}", f"  verdict: {up['verdict']['text']}"]
        rows = [head]
        for tool, fig in sorted(up["tools"].items()):
            if fig["window"]["total"] or fig.get("inline"):  # listed tools nobody called: JSON only
                rows.append(_row(tool, fig["window"], fig.get("inline"), now))
        rows.append(_row("(all tools)", up["window"], None, now))
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        clients = ", ".join(f"{c} {n}" for c, n in up.get("legacy_clients", {}).items()) or "-"
        tools = up.get("legacy_tools", {})
        lines.append(f"  legacy clients (sessions): {clients}")
        lines.append(
            f"  legacy_tools listed: {', '.join(tools.get('listed', [])) or '-'}; "
            f"learned: {', '.join(tools.get('learned', [])) or '-'}"
        )
        lines.append(f"  parked calls: {up.get('parked_calls', 0)}")
    return lines


def _row(tool: str, fig: dict[str, Any], inline: dict[str, Any] | None, now: float) -> list[str]:
    asked = sum(fig["asked"].values())
    last = f"{span(now - inline['last_seen'])} ago" if inline else "-"
    return [
        tool,
        *(str(fig["calls"][p]) for p in PATHS),
        str(asked),
        str(fig["asked"]["adapted"]),
        str(fig["by_client_era"]["2026-07-28"]),
        str(fig["by_client_era"]["legacy"]),
        str(fig["total"]),
        last,
    ]
