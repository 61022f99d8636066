"""Exchange: server requests → keyed input requests across rounds → replies with the legacy ids."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.translate.capabilities import ClientCapabilities as Caps
from proxy.translate.exchange import Exchange, PendingInput, Reply
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject, Request

ALL = Caps(elicitation_form=True, elicitation_url=True, sampling=True, roots=True)
FORM: dict[str, Any] = {"message": "Confirm?", "requestedSchema": {"type": "object"}}
URL: dict[str, Any] = {"mode": "url", "message": "Sign in", "url": "https://x.example/", "elicitationId": "e"}
SAMPLE: dict[str, Any] = {"messages": [], "maxTokens": 10}


def elicit(rid: jsonrpc.RequestId, **params: Any) -> Request:
    return Request(rid, mcp.ELICIT, {**FORM, **params})


def sample(rid: jsonrpc.RequestId) -> Request:
    return Request(rid, mcp.SAMPLE, SAMPLE)


def roots(rid: jsonrpc.RequestId) -> Request:
    return Request(rid, mcp.ROOTS, {})


# ---------------------------------------------------------------------------------------------------------
# on_server_request
# ---------------------------------------------------------------------------------------------------------


def test_keys_are_unique_and_numbered_across_kinds_and_rounds() -> None:
    ex = Exchange(ALL)
    assert ex.on_server_request(elicit(1)) is None
    assert ex.on_server_request(sample("s")) is None
    assert ex.on_server_request(roots(3)) is None
    assert list(ex.pending) == ["elicit-1", "sample-2", "roots-3"]
    ex.open_round()
    ex.accept({"elicit-1": {"action": "decline"}, "sample-2": {}, "roots-3": {"roots": []}})
    assert ex.on_server_request(elicit(4)) is None
    assert ex.on_server_request(Request(5, mcp.ELICIT, URL)) is None
    assert list(ex.pending) == ["elicit-4", "elicit-5"]


def test_pending_input_contents() -> None:
    ex = Exchange(ALL)
    ex.on_server_request(elicit("abc", message="Deploy?"))
    assert ex.has_pending
    pending = ex.pending["elicit-1"]
    assert pending == PendingInput("elicit-1", "abc", mcp.ELICIT, {**FORM, "message": "Deploy?"})
    assert pending.as_input_request() == {"method": mcp.ELICIT, "params": {**FORM, "message": "Deploy?"}}


@pytest.mark.parametrize("rid", [7, "srv-7"], ids=["int-id", "str-id"])
def test_ping_answered_at_once(rid: jsonrpc.RequestId) -> None:
    ex = Exchange(Caps())
    reply = ex.on_server_request(Request(rid, mcp.PING, {}))
    assert reply == Reply(rid, result={})
    assert reply.message() == jsonrpc.Result(rid, {})
    assert not ex.has_pending


@pytest.mark.parametrize(
    ("req", "code", "fragment"),
    [
        pytest.param(
            Request(1, "tools/list", {}),
            jsonrpc.METHOD_NOT_FOUND,
            "Method not found: tools/list",
            id="unknown-method",
        ),
        pytest.param(
            Request("x", "elicitation/Create", FORM),
            jsonrpc.METHOD_NOT_FOUND,
            "Method not found: elicitation/Create",
            id="method-case-sensitive",
        ),
        pytest.param(
            Request(2, mcp.ELICIT, {"requestedSchema": {}}),
            jsonrpc.INVALID_PARAMS,
            "needs a string 'message'",
            id="elicit-no-message",
        ),
        pytest.param(
            Request(2, mcp.ELICIT, {"message": "m"}),
            jsonrpc.INVALID_PARAMS,
            "object 'requestedSchema'",
            id="elicit-form-no-schema",
        ),
        pytest.param(
            Request(2, mcp.ELICIT, {"mode": "url", "message": "m", "url": "u"}),
            jsonrpc.INVALID_PARAMS,
            "string 'url' and 'elicitationId'",
            id="elicit-url-no-id",
        ),
        pytest.param(
            Request(2, mcp.ELICIT, {**FORM, "mode": "x"}),
            jsonrpc.INVALID_PARAMS,
            "unknown elicitation mode 'x'",
            id="elicit-unknown-mode",
        ),
        pytest.param(
            Request(3, mcp.SAMPLE, {"maxTokens": 1}),
            jsonrpc.INVALID_PARAMS,
            "'messages' array",
            id="sampling-no-messages",
        ),
        pytest.param(
            Request(3, mcp.SAMPLE, {"messages": [], "maxTokens": "1"}),
            jsonrpc.INVALID_PARAMS,
            "integer 'maxTokens'",
            id="sampling-str-max-tokens",
        ),
    ],
)
def test_refused_at_once(req: Request, code: int, fragment: str) -> None:
    ex = Exchange(ALL)
    reply = ex.on_server_request(req)
    assert reply is not None
    assert reply.legacy_id == req.id
    assert reply.result is None
    assert reply.error is not None
    assert reply.error.code == code
    assert fragment in reply.error.message
    assert reply.message() == jsonrpc.Error(req.id, reply.error)
    assert not ex.has_pending


@pytest.mark.parametrize(
    ("caps", "req", "fragment"),
    [
        pytest.param(Caps(), elicit(1), "does not support form-mode elicitation", id="no-elicitation"),
        pytest.param(
            Caps(elicitation_url=True),
            elicit(1),
            "does not support form-mode elicitation",
            id="url-only-gets-form",
        ),
        pytest.param(
            Caps(elicitation_form=True),
            Request(1, mcp.ELICIT, URL),
            "does not support url-mode elicitation",
            id="form-only-gets-url",
        ),
        pytest.param(Caps(elicitation_form=True), sample("s"), "does not support sampling", id="no-sampling"),
        pytest.param(Caps(sampling=True), roots(9), "does not support roots", id="no-roots"),
    ],
)
def test_undeclared_capability(caps: Caps, req: Request, fragment: str) -> None:
    ex = Exchange(caps)
    reply = ex.on_server_request(req)
    assert reply is not None
    assert reply.legacy_id == req.id
    assert reply.error is not None
    assert reply.error.code == jsonrpc.INVALID_REQUEST
    assert fragment in reply.error.message
    assert not ex.has_pending
    assert dict(ex.pending) == {}


def test_refusals_do_not_consume_keys() -> None:
    ex = Exchange(Caps(elicitation_form=True))
    ex.on_server_request(Request(1, mcp.PING, {}))
    ex.on_server_request(sample(2))
    ex.on_server_request(Request(3, "x/y", {}))
    ex.on_server_request(elicit(4))
    assert list(ex.pending) == ["elicit-1"]


# ---------------------------------------------------------------------------------------------------------
# open_round
# ---------------------------------------------------------------------------------------------------------


def test_open_round_contents_and_numbering() -> None:
    ex = Exchange(ALL)
    assert ex.round == 0
    ex.on_server_request(elicit(10))
    ex.on_server_request(sample("s-11"))
    first = ex.open_round()
    assert first.round == ex.round == 1
    assert first.input_requests == {
        "elicit-1": {"method": mcp.ELICIT, "params": FORM},
        "sample-2": {"method": mcp.SAMPLE, "params": SAMPLE},
    }
    assert first.pending_ids == {"elicit-1": 10, "sample-2": "s-11"}
    second = ex.open_round()
    assert second.round == 2
    assert second.input_requests == first.input_requests


def test_open_round_is_a_snapshot() -> None:
    ex = Exchange(ALL)
    ex.on_server_request(elicit(1))
    rnd = ex.open_round()
    ex.on_server_request(roots(2))
    ex.accept({"elicit-1": {"action": "cancel"}})
    assert list(rnd.input_requests) == ["elicit-1"]
    assert dict(rnd.pending_ids) == {"elicit-1": 1}


def test_a_round_keeps_its_pending_requests_as_compact_json_and_reoffers_them_unchanged() -> None:
    ex = Exchange(ALL)
    odd = {**FORM, "message": "Déployer ? \ud800", "n": 12345678901234567890123, "x": 2.5e-05, "z": None}
    ex.on_server_request(Request(1, mcp.ELICIT, odd))
    ex.on_server_request(sample(2))
    first = ex.open_round()
    assert first.input_requests["elicit-1"] == {"method": mcp.ELICIT, "params": odd}
    held = ex.pending["elicit-1"].held
    assert isinstance(held, str)  # what a parked call holds: the JSON text, not its dicts
    assert held.isascii() and len(held) < 200
    assert ex.pending["elicit-1"].params == odd  # read back exactly: the long integer, the surrogate
    ex.accept({"sample-2": {"role": "assistant", "content": {}}})
    again = ex.open_round()  # the unanswered request, offered again from its JSON
    assert jsonrpc.dump_bytes(again.input_requests["elicit-1"]) == jsonrpc.dump_bytes(
        first.input_requests["elicit-1"]
    )
    assert ex.pending["elicit-1"].compact() is ex.pending["elicit-1"]


def test_open_round_without_pending_raises() -> None:
    ex = Exchange(ALL)
    with pytest.raises(RuntimeError, match="no pending input requests"):
        ex.open_round()
    assert ex.round == 0


# ---------------------------------------------------------------------------------------------------------
# accept
# ---------------------------------------------------------------------------------------------------------


def test_accept_answers_with_legacy_ids() -> None:
    ex = Exchange(ALL)
    ex.on_server_request(elicit(1))
    ex.on_server_request(sample("two"))
    ex.on_server_request(roots(3))
    ex.open_round()
    answers = {
        "roots-3": {"roots": [{"uri": "file:///r"}]},
        "elicit-1": {"action": "accept", "content": {"ok": True}},
        "sample-2": {"role": "assistant", "content": {"type": "text", "text": "hi"}},
    }
    replies = ex.accept(answers)
    assert replies == [
        Reply(1, result=answers["elicit-1"]),
        Reply("two", result=answers["sample-2"]),
        Reply(3, result=answers["roots-3"]),
    ]
    assert [r.message() for r in replies] == [
        jsonrpc.Result(1, answers["elicit-1"]),
        jsonrpc.Result("two", answers["sample-2"]),
        jsonrpc.Result(3, answers["roots-3"]),
    ]
    assert not ex.has_pending


def test_missing_keys_stay_pending_and_are_reasked_under_the_same_key() -> None:
    ex = Exchange(ALL)
    ex.on_server_request(elicit(1))
    ex.on_server_request(sample(2))
    ex.open_round()
    replies = ex.accept({"sample-2": {"role": "assistant", "content": {}}})
    assert [r.legacy_id for r in replies] == [2]
    assert list(ex.pending) == ["elicit-1"]
    ex.on_server_request(roots(3))
    rnd = ex.open_round()
    assert rnd.round == 2
    assert list(rnd.input_requests) == ["elicit-1", "roots-3"]
    assert rnd.pending_ids == {"elicit-1": 1, "roots-3": 3}


def test_answered_says_whether_the_round_last_opened_got_an_answer() -> None:
    ex = Exchange(ALL)
    ex.on_server_request(elicit(1))
    ex.on_server_request(sample(2))
    ex.open_round()
    assert not ex.answered
    ex.accept({"elicit-9": {"action": "decline"}})  # not pending: no answer
    assert not ex.answered
    ex.accept({"sample-2": {"role": "assistant", "content": {}}})
    assert ex.answered
    ex.accept({})
    assert ex.answered  # part of the round was answered: stays so until the next round
    ex.open_round()
    assert not ex.answered


def test_extra_and_stale_keys_ignored() -> None:
    ex = Exchange(ALL)
    ex.on_server_request(elicit(1))
    ex.open_round()
    assert ex.accept({"elicit-1": {"action": "decline"}}) == [Reply(1, result={"action": "decline"})]
    ex.on_server_request(elicit(2))
    ex.open_round()
    replies = ex.accept({"elicit-1": {"action": "accept"}, "bogus": {}, "sample-9": {}})
    assert replies == []
    assert list(ex.pending) == ["elicit-2"]


def test_accept_empty() -> None:
    ex = Exchange(ALL)
    ex.on_server_request(elicit(1))
    assert ex.accept({}) == []
    assert ex.has_pending


def test_reply_message_with_empty_result() -> None:
    assert Reply(5).message() == jsonrpc.Result(5, {})
    err = ErrorObject(-1, "x")
    assert Reply("a", result={"x": 1}, error=err).message() == jsonrpc.Error("a", err)


# ---------------------------------------------------------------------------------------------------------
# cancel_all
# ---------------------------------------------------------------------------------------------------------


def test_cancel_all() -> None:
    ex = Exchange(ALL)
    ex.on_server_request(elicit(1))
    ex.on_server_request(sample("s"))
    ex.on_server_request(Request(3, mcp.ELICIT, URL))
    ex.on_server_request(roots(4))
    replies = ex.cancel_all("client went away")
    err = ErrorObject(jsonrpc.INTERNAL_ERROR, "client went away")
    assert replies == [
        Reply(1, result={"action": "cancel"}),
        Reply("s", error=err),
        Reply(3, result={"action": "cancel"}),
        Reply(4, error=err),
    ]
    assert not ex.has_pending
    assert ex.cancel_all("again") == []


def test_keys_not_reused_after_cancel_all() -> None:
    ex = Exchange(ALL)
    ex.on_server_request(elicit(1))
    ex.cancel_all("x")
    ex.on_server_request(elicit(2))
    assert list(ex.pending) == ["elicit-2"]


def test_the_proxys_own_input_request_gets_no_upstream_reply() -> None:
    from proxy.translate.capabilities import ClientCapabilities
    from proxy.translate.exchange import PROXY_ASKED, Exchange

    exchange = Exchange(ClientCapabilities(roots=True))
    key = exchange.ask("roots/list")
    assert key == "roots-1"
    assert exchange.open_round().input_requests == {key: {"method": "roots/list", "params": {}}}
    (reply,) = exchange.accept({key: {"roots": []}})
    assert reply.legacy_id == PROXY_ASKED and not reply.for_upstream
    exchange.ask("roots/list")
    assert exchange.cancel_all("gone") == []  # nothing to tell the upstream
