"""The task state machine (proxy/tasks/state.py): transitions, terminal stickiness, and the wire shapes."""

from __future__ import annotations

import pytest

from proxy.tasks.state import TERMINAL, TaskState, iso8601
from proxy.wire.jsonrpc import ErrorObject

T0 = 1_700_000_000.0
ASK = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {"type": "object"}}}
RESULT = {"content": [{"type": "text", "text": "hi"}], "isError": False, "resultType": "complete"}
ERROR = ErrorObject(-31004, "Upstream did not answer within 1s")


def new(**kwargs: object) -> TaskState:
    return TaskState(T0, ttl_ms=60_000, poll_interval_ms=500, **kwargs)  # type: ignore[arg-type]


def test_a_new_task_is_working_and_expires_after_its_ttl() -> None:
    state = new()
    assert state.status == "working" and not state.terminal
    assert state.updated_at == T0
    assert state.expires_at == T0 + 60


def test_working_input_required_working_completed() -> None:
    state = new()
    assert state.need_input({"elicit-1": ASK}, T0 + 1)
    assert state.status == "input_required" and state.input_requests == {"elicit-1": ASK}
    assert state.updated_at == T0 + 1
    assert state.answered({"elicit-1"}, T0 + 2)
    assert state.status == "working" and state.input_requests == {}
    assert state.complete(RESULT, T0 + 3)
    assert state.status == "completed" and state.terminal and state.result == RESULT


def test_a_partial_answer_leaves_the_rest_outstanding() -> None:
    state = new()
    state.need_input({"elicit-1": ASK, "elicit-2": ASK}, T0)
    assert state.answered({"elicit-1", "never-asked"}, T0 + 1)
    assert state.status == "input_required" and list(state.input_requests) == ["elicit-2"]
    assert not state.answered({"elicit-1"}, T0 + 2)  # already answered: nothing changes
    assert state.updated_at == T0 + 1
    assert state.answered({"elicit-2"}, T0 + 3)
    assert state.status == "working"


def test_answers_count_only_while_input_is_required() -> None:
    state = new()
    assert not state.answered({"elicit-1"}, T0)
    assert state.status == "working"


def test_need_input_with_nothing_outstanding_is_working() -> None:
    state = new()
    state.need_input({"elicit-1": ASK}, T0)
    state.need_input({}, T0 + 1)
    assert state.status == "working"


@pytest.mark.parametrize("finish", ["complete", "fail", "cancel"])
def test_the_first_terminal_status_stays(finish: str) -> None:
    state = new()
    state.need_input({"elicit-1": ASK}, T0)
    if finish == "complete":
        assert state.complete(RESULT, T0 + 1)
    elif finish == "fail":
        assert state.fail(ERROR, T0 + 1)
    else:
        assert state.cancel(T0 + 1)
    status = state.status
    assert status in TERMINAL and state.input_requests == {}
    assert not state.complete(RESULT, T0 + 2)
    assert not state.fail(ERROR, T0 + 2)
    assert not state.cancel(T0 + 2)
    assert not state.need_input({"elicit-2": ASK}, T0 + 2)
    assert not state.work(T0 + 2)
    assert state.status == status and state.updated_at == T0 + 1


def test_created_carries_the_task_only() -> None:
    state = new()
    state.need_input({"elicit-1": ASK}, T0)  # on_elicit: created while input is already required
    assert state.created("tid") == {
        "resultType": "task",
        "taskId": "tid",
        "status": "input_required",
        "createdAt": "2023-11-14T22:13:20.000Z",
        "lastUpdatedAt": "2023-11-14T22:13:20.000Z",
        "ttlMs": 60_000,
        "pollIntervalMs": 500,
    }


def test_detailed_carries_what_the_status_carries() -> None:
    state = new()
    assert state.detailed("t").keys() == {
        "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"
    }  # fmt: skip
    state.need_input({"elicit-1": ASK}, T0 + 0.25)
    assert state.detailed("t")["inputRequests"] == {"elicit-1": ASK}
    assert state.detailed("t")["lastUpdatedAt"] == "2023-11-14T22:13:20.250Z"
    state.complete(RESULT, T0 + 1)
    detailed = state.detailed("t")
    assert detailed["result"] == RESULT and "inputRequests" not in detailed and "error" not in detailed

    failed = new()
    failed.fail(ERROR, T0 + 1)
    shown = failed.detailed("t")
    assert shown["error"] == {"code": -31004, "message": "Upstream did not answer within 1s"}
    assert shown["statusMessage"] == ERROR.message and "result" not in shown

    cancelled = new()
    cancelled.cancel(T0 + 1, "Cancelled by the client")
    assert cancelled.detailed("t")["status"] == "cancelled"
    assert {"result", "error", "inputRequests"}.isdisjoint(cancelled.detailed("t"))


def test_iso8601_is_utc_with_milliseconds() -> None:
    assert iso8601(0) == "1970-01-01T00:00:00.000Z"
    assert iso8601(T0 + 0.5) == "2023-11-14T22:13:20.500Z"
