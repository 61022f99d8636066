"""The verdict on one upstream, in plain words, from its figures over the window (pure: no clock, no I/O).

In this order, the first that holds:

1. `needs_proxy`: a tool asked inline (an adapted call's first answer was `input_required`) within the
   window: "needs the proxy: tools ask_name, summarize still ask inline (last 3 minutes ago)".
2. `legacy_clients`: legacy clients made more than `max_legacy_percent` of the window's calls: "needs the
   proxy for legacy clients only: 34 % of calls come from legacy clients (top client names: …)".
3. `too_little_traffic`: fewer than `min_calls` calls in the window: "too little traffic to say".
4. `ready`: "ready to be served directly: for 7 days no tool asked inline and no legacy client called it".

One ask, or one legacy call above the threshold, is proof enough whatever the traffic; a clean record
needs `min_calls` calls. The window is never claimed longer than was seen: a process up for 2 hours (the
youngest of the replicas summed) says "for 2 hours".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

State = Literal["needs_proxy", "legacy_clients", "too_little_traffic", "ready"]
STATES: Final = ("needs_proxy", "legacy_clients", "too_little_traffic", "ready")


@dataclass(frozen=True, slots=True)
class Thresholds:
    window_hours: int = 168  # the verdict's window, 1 … 168
    min_calls: int = 20  # fewer calls in the window: too little traffic to say "ready"
    max_legacy_percent: float = 0.0  # legacy clients' share of calls tolerated as "ready"
    top_clients: int = 3  # legacy client names named in the evidence


@dataclass(frozen=True, slots=True)
class Evidence:
    seen_s: float  # how much of the window was seen (≤ window_hours): the youngest replica's age
    calls: int  # calls in the window
    legacy_calls: int  # of them from legacy clients (mirrored + passthrough)
    inline: tuple[tuple[str, float], ...] = ()  # tools that asked inline in the window: (name, ago_s)
    clients: tuple[tuple[str, int], ...] = ()  # legacy clients' names, most sessions first


@dataclass(frozen=True, slots=True)
class Verdict:
    state: State
    text: str


def judge(evidence: Evidence, thresholds: Thresholds) -> Verdict:
    """The verdict on one upstream (see the module docstring)."""
    if evidence.inline:
        names = ", ".join(name for name, _ in evidence.inline)
        last = min(ago for _, ago in evidence.inline)
        word = "tool" if len(evidence.inline) == 1 else "tools"
        verb = "asks" if len(evidence.inline) == 1 else "ask"
        return Verdict(
            "needs_proxy", f"needs the proxy: {word} {names} still {verb} inline (last {ago(last)})"
        )
    share = 100.0 * evidence.legacy_calls / evidence.calls if evidence.calls else 0.0
    if evidence.legacy_calls and share > thresholds.max_legacy_percent:
        top = [name for name, _ in evidence.clients[: thresholds.top_clients]]
        names = f" (top client names: {', '.join(top)})" if top else ""
        return Verdict(
            "legacy_clients",
            f"needs the proxy for legacy clients only: {percent(share)} of calls come from legacy clients"
            f"{names}",
        )
    if evidence.calls < thresholds.min_calls:
        return Verdict(
            "too_little_traffic",
            f"too little traffic to say: {evidence.calls} call{'' if evidence.calls == 1 else 's'} in "
            f"{span(evidence.seen_s)} "
            f"(at least {thresholds.min_calls} needed)",
        )
    legacy = (
        "no legacy client called it"
        if not evidence.legacy_calls
        else (f"legacy clients made only {percent(share)} of calls")
    )
    return Verdict(
        "ready", f"ready to be served directly: for {span(evidence.seen_s)} no tool asked inline and {legacy}"
    )


def percent(share: float) -> str:
    return f"{share:.0f} %" if share >= 1 or share == 0 else f"{share:.1f} %"


def span(seconds: float) -> str:
    """A stretch of time in the largest whole unit that fits: "7 days", "2 hours", "5 minutes"."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    n = max(0, int(seconds))
    return f"{n} second{'s' if n != 1 else ''}"


def ago(seconds: float) -> str:
    return "just now" if seconds < 1 else f"{span(seconds)} ago"
