"""The verdict on one upstream, as a table: evidence and thresholds in, state and words out."""

from __future__ import annotations

import pytest

from proxy.migration.verdict import Evidence, Thresholds, ago, judge, span

DAY, HOUR = 86400.0, 3600.0
T = Thresholds()  # 168 h, min_calls 20, max_legacy_percent 0, top_clients 3

CASES = [
    # (evidence, thresholds, state, text)
    (
        Evidence(7 * DAY, 500, 0),
        T,
        "ready",
        "ready to be served directly: for 7 days no tool asked inline and no legacy client called it",
    ),
    (
        Evidence(2 * HOUR + 59, 500, 0),
        T,
        "ready",
        "ready to be served directly: for 2 hours no tool asked inline and no legacy client called it",
    ),
    (
        Evidence(7 * DAY, 100, 34, clients=(("claude-code", 9), ("cursor", 4), ("zed", 2), ("vim", 1))),
        T,
        "legacy_clients",
        "needs the proxy for legacy clients only: 34 % of calls come from legacy clients "
        "(top client names: claude-code, cursor, zed)",
    ),
    (
        Evidence(7 * DAY, 100, 34),
        T,
        "legacy_clients",
        "needs the proxy for legacy clients only: 34 % of calls come from legacy clients",
    ),
    (  # under the configured share: judged ready, and it says what it tolerated
        Evidence(DAY, 1000, 5),
        Thresholds(max_legacy_percent=1.0),
        "ready",
        "ready to be served directly: for 1 day no tool asked inline and legacy clients made only "
        "0.5 % of calls",
    ),
    (
        Evidence(DAY, 100, 10, inline=(("summarize", 600.0), ("ask_name", 180.0))),
        T,
        "needs_proxy",
        "needs the proxy: tools summarize, ask_name still ask inline (last 3 minutes ago)",
    ),
    (
        Evidence(DAY, 1, 0, inline=(("ask_name", 0.2),)),
        T,
        "needs_proxy",
        "needs the proxy: tool ask_name still asks inline (last just now)",
    ),
    (
        Evidence(5 * 60, 19, 0),
        T,
        "too_little_traffic",
        "too little traffic to say: 19 calls in 5 minutes (at least 20 needed)",
    ),
    (
        Evidence(5 * 60, 2, 0),
        Thresholds(min_calls=2),
        "ready",
        "ready to be served directly: for 5 minutes no tool asked inline and no legacy client called it",
    ),
    (  # one legacy call is proof at any traffic
        Evidence(60, 1, 1, clients=(("old-client", 1),)),
        T,
        "legacy_clients",
        "needs the proxy for legacy clients only: 100 % of calls come from legacy clients "
        "(top client names: old-client)",
    ),
    (
        Evidence(0, 0, 0),
        T,
        "too_little_traffic",
        "too little traffic to say: 0 calls in 0 seconds (at least 20 needed)",
    ),
]


@pytest.mark.parametrize(("evidence", "thresholds", "state", "text"), CASES)
def test_verdict(evidence: Evidence, thresholds: Thresholds, state: str, text: str) -> None:
    verdict = judge(evidence, thresholds)
    assert (verdict.state, verdict.text) == (state, text)


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0, "0 seconds"),
        (1, "1 second"),
        (59, "59 seconds"),
        (60, "1 minute"),
        (7199, "1 hour"),
        (7200, "2 hours"),
        (86400, "1 day"),
        (604800, "7 days"),
    ],
)
def test_span(seconds: float, words: str) -> None:
    assert span(seconds) == words


def test_ago() -> None:
    assert ago(0.5) == "just now"
    assert ago(180) == "3 minutes ago"
