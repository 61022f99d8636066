"""Adaptive gathering (proxy/calls/gathering.py): what quiet period each kind of tool gets, and the bounds."""

from __future__ import annotations

import pytest

from proxy.calls.gathering import (
    MAX_NAME,
    PROBE_EVERY,
    GatherLearner,
    GatherWindow,
    tool_of,
)

CAP = 0.05
KEY = ("up", "ask")


def test_a_tool_never_seen_gets_the_first_sight_quiet_period() -> None:
    learner = GatherLearner(CAP)
    assert learner.quiet(KEY) == pytest.approx(CAP / 10)


def test_a_tool_seen_only_alone_is_parked_at_once_but_probed_now_and_then() -> None:
    learner = GatherLearner(CAP)
    quiets = []
    for _ in range(2 * PROBE_EVERY):
        quiets.append(learner.quiet(KEY))
        learner.observe(KEY, requests=1, max_gap=0.0)
    assert quiets[0] == pytest.approx(CAP / 10)  # first sight
    assert quiets[1] == 0.0
    probes = [i for i, q in enumerate(quiets) if q > 0]
    assert probes == [0, PROBE_EVERY]


def test_a_tool_seen_sending_a_burst_keeps_at_least_the_first_sight_quiet_period() -> None:
    learner = GatherLearner(CAP)
    learner.observe(KEY, requests=3, max_gap=0.0005)
    assert learner.quiet(KEY) == pytest.approx(CAP / 10)
    for _ in range(100):  # lone rounds afterwards never make it eager again
        learner.observe(KEY, requests=1, max_gap=0.0)
    assert learner.quiet(KEY) == pytest.approx(CAP / 10)


def test_a_burst_spread_wider_widens_the_quiet_period_up_to_the_cap() -> None:
    learner = GatherLearner(CAP)
    learner.observe(KEY, requests=2, max_gap=0.012)
    assert learner.quiet(KEY) == pytest.approx(0.024)
    learner.observe(KEY, requests=2, max_gap=10.0)
    assert learner.quiet(KEY) == pytest.approx(CAP)


def test_tools_are_learned_separately_per_upstream() -> None:
    learner = GatherLearner(CAP)
    learner.observe(("a", "ask"), requests=1, max_gap=0.0)
    assert learner.quiet(("a", "ask")) == 0.0
    assert learner.quiet(("b", "ask")) == pytest.approx(CAP / 10)
    assert learner.quiet(("a", "other")) == pytest.approx(CAP / 10)


def test_what_is_learned_is_bounded_least_recently_used_first() -> None:
    learner = GatherLearner(CAP, max_tools=3)
    for name in ("t1", "t2", "t3"):
        learner.observe(("up", name), requests=1, max_gap=0.0)
    learner.observe(("up", "t1"), requests=1, max_gap=0.0)  # t1 used again: t2 is now the oldest
    learner.observe(("up", "t4"), requests=1, max_gap=0.0)
    assert len(learner) == 3
    assert learner.arrival(("up", "t2")) is None
    assert learner.arrival(("up", "t1")) is not None


def test_gather_window_zero_learns_nothing() -> None:
    learner = GatherLearner(0.0)
    learner.observe(KEY, requests=1, max_gap=0.0)
    assert len(learner) == 0
    assert learner.quiet(KEY) == 0.0


def test_the_window_follows_the_requests_and_never_passes_the_cap() -> None:
    learner = GatherLearner(CAP)
    window = GatherWindow(learner, KEY)
    assert window.deadline is None
    window.open(100.0, requests=1)
    assert window.deadline == pytest.approx(100.0 + CAP / 10)
    window.more(100.004)
    assert window.deadline == pytest.approx(100.004 + CAP / 10)
    for step in range(1, 20):  # a server that keeps trickling requests: the round still closes at the cap
        window.more(100.004 + step * 0.004)
    assert window.deadline == pytest.approx(100.0 + CAP)
    window.parked()
    seen = learner.arrival(KEY)
    assert seen is not None
    assert seen.bursts == 1
    assert seen.max_gap == pytest.approx(0.004)


def test_a_lone_round_is_learned_as_lone() -> None:
    learner = GatherLearner(CAP)
    window = GatherWindow(learner, KEY)
    window.open(5.0, requests=1)
    window.parked()
    assert learner.quiet(KEY) == 0.0
    eager = GatherWindow(learner, KEY)
    eager.open(6.0, requests=1)
    assert eager.deadline == 6.0


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        ("tools/call", {"name": "ask"}, "ask"),
        ("tools/call", {"name": 7}, "tools/call"),
        ("prompts/get", {"name": "p"}, "prompts/get"),
        ("tools/call", {"name": "x" * 1000}, "x" * MAX_NAME),
    ],
)
def test_tool_of(method: str, params: dict[str, object], expected: str) -> None:
    assert tool_of(method, params) == expected
