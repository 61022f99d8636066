"""The soak's verdicts (soak/report.py) on readings made up for the purpose: each limit fails the soak when
crossed and only then, so a green soak means the proxy stayed inside them (pure code: no process)."""

from __future__ import annotations

import sys

import peers

if str(peers.REPO_ROOT) not in sys.path:  # the driver lives at the repository root, beside proxy/
    sys.path.insert(0, str(peers.REPO_ROOT))

from soak.report import Readings, Tally, summary, verdicts
from soak.watch import Held, Sample

NOTHING = Held(0, 0, 0, 0)


def readings(
    warm_rss: int = 70_000, end_rss: int = 70_000, warm_fds: int = 15, end_fds: int = 15
) -> Readings:
    return Readings(
        start=Sample(0.0, 60_000, 15),
        warm=Sample(20.0, warm_rss, warm_fds, "socket 9"),
        end=Sample(130.0, end_rss, end_fds, "socket 10"),
        peak_rss_kib=80_000,
        drains=(("after warm-up", NOTHING, 10.0), ("at the end", NOTHING, 10.5)),
    )


def test_inside_every_limit_it_passes() -> None:
    tally = Tally()
    tally.ok("steady", "pass-through", "result")
    assert verdicts(tally, readings(end_rss=77_000), []) == []  # +10.0 %: at the limit, not over it
    assert summary(tally, readings(), [], "soak", {}).endswith("PASS")


def test_rss_growth_over_ten_percent_fails() -> None:
    (failure,) = verdicts(Tally(), readings(end_rss=77_001), [])
    assert failure == "RSS grew from 70000 KiB after warm-up to 77001 KiB (more than 10%)"


def test_one_more_descriptor_fails_and_says_what_they_are() -> None:
    (failure,) = verdicts(Tally(), readings(end_fds=16), [])
    assert failure == "open descriptors grew from 15 after warm-up (socket 9) to 16 (socket 10)"


def test_anything_still_held_after_the_drain_fails() -> None:
    stuck = Readings(**{**readings().__dict__, "drains": (("at the end", Held(1, 0, 2, 1), 58.0),)})
    (failure,) = verdicts(Tally(), stuck, [])
    assert failure == (
        "not drained at the end, 58s after the traffic stopped: parked 1, running 0, sessions 2, listed 1"
    )


def test_an_unexpected_answer_fails_and_is_shown_with_the_proxy_log_lines_about_it() -> None:
    tally = Tally()
    tally.bad(36.1, "recovery", "first tools/list", "tools/list: HTTP 200 [X-Request-Id ab12]: {...}")
    failures = verdicts(tally, readings(), ["1 HTTP 500 answers in the proxy's log"])
    assert failures == [
        "1 HTTP 500 answers in the proxy's log",
        "1 unexpected answers: 1 first tools/list (recovery)",
    ]
    text = summary(tally, readings(), failures, "soak", {"ab12": ['{"event": "upstream.unavailable"}']})
    assert '    proxy log: {"event": "upstream.unavailable"}' in text
    assert "first tools/list  UNEXPECTED  1" in text


def test_no_readings_fails() -> None:
    assert verdicts(Tally(), None, []) == ["the soak stopped before its readings were taken"]
