"""The soak's tally (every answer by phase, kind and outcome; every unexpected one with what came back), its
verdicts and the summary table it prints at the end."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from soak.watch import Held, Sample

REQUEST_ID = re.compile(r"X-Request-Id ([0-9a-f]+)")
RSS_GROWTH = 0.10  # more than this above the after-warm-up reading fails
SHOWN = 12  # unexpected answers printed in full (all are counted)


@dataclass
class Tally:
    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (phase, kind, outcome)
    unexpected: list[tuple[float, str, str, str]] = field(default_factory=list)  # (at_s, phase, kind, detail)

    def ok(self, phase: str, kind: str, outcome: str) -> None:
        self.counts[phase, kind, outcome] += 1

    def bad(self, at_s: float, phase: str, kind: str, detail: str) -> None:
        self.counts[phase, kind, "UNEXPECTED"] += 1
        self.unexpected.append((at_s, phase, kind, detail))


@dataclass(frozen=True)
class Readings:
    start: Sample  # the proxy just started
    warm: Sample  # after warm-up and its drain, client connections closed
    end: Sample  # after the last drain, the same way
    peak_rss_kib: int
    drains: tuple[tuple[str, Held, float], ...]  # (when, what was held when the wait ended, seconds waited)


def verdicts(tally: Tally, readings: Readings | None, log_problems: list[str]) -> list[str]:
    """Why the soak fails (empty: it passes)."""
    failures = list(log_problems)
    if tally.unexpected:
        kinds = Counter((phase, kind) for _, phase, kind, _ in tally.unexpected)
        where = ", ".join(f"{n} {kind} ({phase})" for (phase, kind), n in sorted(kinds.items()))
        failures.append(f"{len(tally.unexpected)} unexpected answers: {where}")
    if readings is None:
        return [*failures, "the soak stopped before its readings were taken"]
    limit = readings.warm.rss_kib * (1 + RSS_GROWTH)
    if readings.end.rss_kib > limit:
        failures.append(
            f"RSS grew from {readings.warm.rss_kib} KiB after warm-up to {readings.end.rss_kib} KiB "
            f"(more than {RSS_GROWTH:.0%})"
        )
    if readings.end.fds > readings.warm.fds:
        failures.append(
            f"open descriptors grew from {readings.warm.fds} after warm-up ({readings.warm.fd_kinds}) to "
            f"{readings.end.fds} ({readings.end.fd_kinds})"
        )
    for when, held, waited in readings.drains:
        if not held.drained:
            failures.append(f"not drained {when}, {waited:.0f}s after the traffic stopped: {held}")
    return failures


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def summary(
    tally: Tally, readings: Readings | None, failures: list[str], header: str, notes: dict[str, list[str]]
) -> str:
    """The table; each unexpected answer shown is followed by the proxy's warning and error lines about it
    (`notes`: by X-Request-Id)."""
    lines = [header, ""]
    by_kind: Counter[tuple[str, str]] = Counter()
    for (_, kind, outcome), n in tally.counts.items():
        by_kind[kind, outcome] += n
    rows: list[tuple[str, ...]] = [("kind", "outcome", "answers")]
    rows += [(kind, outcome, str(n)) for (kind, outcome), n in sorted(by_kind.items())]
    rows.append(("all", "", str(sum(by_kind.values()))))
    lines += _table(rows)
    phases: Counter[str] = Counter()
    for (phase, _, _), n in tally.counts.items():
        phases[phase] += n
    lines += ["", "answers by phase: " + ", ".join(f"{phase} {n}" for phase, n in phases.items())]
    if readings is not None:
        lines.append("")
        rows = [("proxy", "start", "after warm-up", "end", "peak")]
        rows.append(
            (
                "RSS (KiB)",
                str(readings.start.rss_kib),
                str(readings.warm.rss_kib),
                str(readings.end.rss_kib),
                str(readings.peak_rss_kib),
            )
        )
        rows.append(("open fds", str(readings.start.fds), str(readings.warm.fds), str(readings.end.fds), ""))
        rows.append(("at (s)", str(readings.start.at_s), str(readings.warm.at_s), str(readings.end.at_s), ""))
        lines += _table(rows)
        growth = readings.end.rss_kib / readings.warm.rss_kib - 1
        lines.append(f"RSS end vs after warm-up: {growth:+.1%} (limit +{RSS_GROWTH:.0%})")
        for when, held, waited in readings.drains:
            lines.append(f"held {when} ({waited:.1f}s after the traffic stopped): {held}")
    for at_s, phase, kind, detail in tally.unexpected[:SHOWN]:
        lines.append(f"UNEXPECTED at {at_s:.1f}s ({phase}) {kind}: {detail}")
        found = REQUEST_ID.search(detail)
        lines += [f"    proxy log: {note}" for note in notes.get(found.group(1) if found else "", [])]
    if len(tally.unexpected) > SHOWN:
        lines.append(f"... and {len(tally.unexpected) - SHOWN} more unexpected answers")
    lines.append("")
    lines += [f"FAIL: {failure}" for failure in failures] or ["PASS"]
    return "\n".join(lines)
