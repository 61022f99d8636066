"""Adaptive gathering (proxy/calls/gathering.py): what quiet period each kind of tool gets, and the bounds."""

from __future__ import annotations

import pytest

from proxy.calls.gathering import (
    MAX_NAME,
    GatherLearner,
    GatherWindow,
    tool_of,
)

CAP = 0.05
KEY = ("up", "ask")


def test_a_tool_never_seen_gets_the_whole_window() -> None:
    learner = GatherLearner(CAP)
    assert learner.quiet(KEY) == pytest.approx(CAP)


def test_a_tool_seen_only_alone_is_parked_at_once_every_time() -> None:
    learner = GatherLearner(CAP)
    quiets = []
    for _ in range(100):
        quiets.append(learner.quiet(KEY))
        learner.observe(KEY, requests=1, max_gap=0.0)
    assert quiets[0] == pytest.approx(CAP)  # first sight
    assert quiets[1:] == [0.0] * 99  # no probing: a burst that starts later is noticed by `split`


def test_a_tool_seen_sending_a_burst_keeps_at_least_a_tenth_of_the_cap() -> None:
    learner = GatherLearner(CAP)
    learner.observe(KEY, requests=3, max_gap=0.0005)
    assert learner.quiet(KEY) == pytest.approx(CAP / 10)
    for _ in range(100):  # lone rounds afterwards never make it eager again
        learner.observe(KEY, requests=1, max_gap=0.0)
    assert learner.quiet(KEY) == pytest.approx(CAP / 10)


def test_a_burst_that_came_apart_is_learned_as_a_burst() -> None:
    learner = GatherLearner(CAP)
    for _ in range(5):
        learner.observe(KEY, requests=1, max_gap=0.0)
    assert learner.quiet(KEY) == 0.0
    # The round was parked at once; another request came while the client had not answered, 12 ms later.
    learner.split(KEY, parked_for=0.012)
    seen = learner.arrival(KEY)
    assert seen is not None
    assert (seen.lone, seen.bursts, seen.max_gap) == (5, 1, pytest.approx(0.012))
    assert learner.quiet(KEY) == pytest.approx(0.024)


def test_a_split_learns_at_most_the_cap_and_at_least_the_quiet_already_waited() -> None:
    learner = GatherLearner(CAP)
    learner.observe(KEY, requests=2, max_gap=0.010)  # quiet 20 ms
    learner.split(KEY, parked_for=0.001)  # came 20 + at most 1 ms after the round's latest request
    assert max_gap(learner) == pytest.approx(0.021)
    learner.split(KEY, parked_for=30.0)  # a human answered after 30 s: the cap, no more
    assert max_gap(learner) == pytest.approx(CAP)
    assert learner.quiet(KEY) == pytest.approx(CAP)


def max_gap(learner: GatherLearner) -> float:
    seen = learner.arrival(KEY)
    assert seen is not None
    return seen.max_gap


def test_a_split_with_gathering_off_learns_nothing() -> None:
    learner = GatherLearner(0.0)
    learner.split(KEY, parked_for=0.01)
    assert len(learner) == 0


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
    assert learner.quiet(("b", "ask")) == pytest.approx(CAP)
    assert learner.quiet(("a", "other")) == pytest.approx(CAP)


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
    learner.observe(KEY, requests=2, max_gap=0.001)  # a burst tool: quiet a tenth of the cap
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
    assert seen.bursts == 2
    assert seen.max_gap == pytest.approx(0.004)


def test_a_lone_round_is_learned_as_lone() -> None:
    learner = GatherLearner(CAP)
    window = GatherWindow(learner, KEY)
    window.open(5.0, requests=1)
    assert window.deadline == pytest.approx(5.0 + CAP)  # first sight: the whole window
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
