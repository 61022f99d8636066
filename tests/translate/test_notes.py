"""Per-round notification scope (translate/notes.py): progress re-labelled per round, logging opt-in."""

from __future__ import annotations

import pytest

from proxy.translate.notes import (
    RoundScope,
    at_least,
    call_progress_token,
    log_level_problem,
    with_progress_token,
)
from proxy.wire import jsonrpc

UP = call_progress_token("call-1")


def progress(token: object, value: int = 1) -> jsonrpc.Notification:
    return jsonrpc.Notification("notifications/progress", {"progressToken": token, "progress": value})


def message(level: str) -> jsonrpc.Notification:
    return jsonrpc.Notification("notifications/message", {"level": level, "data": level})


def test_the_upstream_token_is_the_proxys_and_stable() -> None:
    assert call_progress_token("call-1") == call_progress_token("call-1") != call_progress_token("call-2")
    params = with_progress_token({"name": "t", "_meta": {"progressToken": "client", "x/y": 1}}, UP)
    assert params == {"name": "t", "_meta": {"progressToken": UP, "x/y": 1}}
    assert with_progress_token({"name": "t"}, UP) == {"name": "t", "_meta": {"progressToken": UP}}


@pytest.mark.parametrize("token", ["round-2", 7, 0])
def test_progress_gets_this_rounds_token(token: str | int) -> None:
    scope = RoundScope.of({"_meta": {"progressToken": token}}, None)
    relayed = scope.relay(progress(UP, 3), UP)
    assert relayed is not None
    assert relayed.params == {"progressToken": token, "progress": 3}


@pytest.mark.parametrize(
    "meta", [{}, {"progressToken": None}, {"progressToken": True}, {"progressToken": [1]}]
)
def test_a_round_without_a_valid_token_gets_no_progress(meta: dict[str, object]) -> None:
    assert RoundScope.of({"_meta": meta}, None).relay(progress(UP), UP) is None


def test_progress_for_another_token_is_dropped() -> None:
    scope = RoundScope.of({"_meta": {"progressToken": "mine"}}, None)
    assert scope.relay(progress("someone-else"), UP) is None


def test_log_messages_need_the_opt_in_and_the_level() -> None:
    assert RoundScope.of({}, None).relay(message("emergency"), UP) is None
    scope = RoundScope.of({}, "warning")
    assert [
        lvl
        for lvl in ("debug", "info", "notice", "warning", "error", "alert")
        if scope.relay(message(lvl), UP)
    ] == [
        "warning",
        "error",
        "alert",
    ]
    bogus = jsonrpc.Notification("notifications/message", {"level": "loud", "data": "?"})
    assert scope.relay(bogus, UP) is None


def test_other_notifications_pass() -> None:
    note = jsonrpc.Notification("notifications/resources/updated", {"uri": "x"})
    assert RoundScope.of({}, None).relay(note, UP) is note


def test_levels() -> None:
    assert log_level_problem("notice") is None
    assert log_level_problem("NOTICE") is not None
    assert log_level_problem(3) is not None
    assert at_least("error", "warning") and not at_least("info", "warning") and not at_least(None, "debug")
