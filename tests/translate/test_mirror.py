"""The mirror's pure translation (translate/mirror.py): inputRequests ⇄ inline requests, answers ⇄
inputResponses, capability filtering, initialize from server/discover, results for a legacy client."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.translate import mirror as tr
from proxy.wire import jsonrpc

FORM = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}}
URL = {"mode": "url", "message": "Sign in", "url": "https://example.com/login"}
SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
ALL = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


def entry(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"method": method, **({"params": params} if params is not None else {})}


@pytest.mark.parametrize(
    ("declared", "modern"),
    [
        ({}, {}),
        (None, {}),
        ({"elicitation": {}}, {"elicitation": {"form": {}}}),  # a bare elicitation is form mode
        ({"elicitation": {"url": {}}}, {"elicitation": {"url": {}}}),
        (
            {"sampling": {"tools": {}}, "roots": {"listChanged": True}},
            {"sampling": {"tools": {}}, "roots": {}},
        ),
        ({"experimental": {"x": {}}, "sampling": "yes"}, {}),
    ],
)
def test_declared_capabilities_become_client_capabilities(declared: object, modern: dict[str, Any]) -> None:
    assert tr.modern_capabilities(declared) == modern


def test_modern_params_carry_the_per_request_meta_and_keep_the_clients_own() -> None:
    params = {"name": "t", "_meta": {"progressToken": 7, "io.modelcontextprotocol/logLevel": "error"}}
    out = tr.modern_params(params, client=("c", "1"), capabilities={"roots": {}}, log_level="debug")
    meta = out["_meta"]
    assert meta["progressToken"] == 7
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientInfo"] == {"name": "c", "version": "1"}
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"roots": {}}
    assert meta["io.modelcontextprotocol/logLevel"] == "error"  # the client's own level wins
    assert out["name"] == "t" and params["_meta"] == {
        "progressToken": 7,
        "io.modelcontextprotocol/logLevel": "error",
    }


def test_initialize_result_from_discover() -> None:
    discover = {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {"listChanged": False}, "extensions": {"x": {}}, "logging": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "4"}},
        "instructions": "be nice",
        "ttlMs": 0,
    }
    assert tr.initialize_result(discover, "2025-06-18") == {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {"listChanged": False}, "logging": {}},
        "serverInfo": {"name": "srv", "version": "4"},
        "instructions": "be nice",
    }
    assert tr.initialize_result({}, "2025-11-25")["serverInfo"] == tr.UNKNOWN_SERVER


@pytest.mark.parametrize(
    ("asked", "agreed"),
    [
        ("2025-06-18", "2025-06-18"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),
        (3, "2025-11-25"),
    ],
)
def test_legacy_version(asked: object, agreed: str) -> None:
    assert tr.legacy_version(asked) == agreed


def test_results_lose_what_a_legacy_client_does_not_know() -> None:
    result = {"resultType": "complete", "ttlMs": 5, "cacheScope": "public", "tools": [], "_meta": {"a": 1}}
    assert tr.legacy_result(result) == {"tools": [], "_meta": {"a": 1}}


def test_a_round_asks_what_the_client_declared() -> None:
    plan = tr.plan_round(
        {
            "a": entry("elicitation/create", FORM),
            "b": entry("sampling/createMessage", SAMPLE),
            "r": entry("roots/list"),
        },
        ALL,
    )
    assert plan.stop is None and plan.answered == {}
    assert [(a.key, a.method) for a in plan.asks] == [
        ("a", "elicitation/create"),
        ("b", "sampling/createMessage"),
        ("r", "roots/list"),
    ]
    assert plan.asks[2].params == {}


def test_undeclared_elicitation_is_declined_and_undeclared_roots_are_none() -> None:
    plan = tr.plan_round(
        {"a": entry("elicitation/create", URL), "r": entry("roots/list", {})}, {"elicitation": {"form": {}}}
    )
    assert plan.asks == () and plan.stop is None
    assert plan.answered == {"a": {"action": "decline"}, "r": {"roots": []}}


def test_undeclared_sampling_ends_the_call() -> None:
    plan = tr.plan_round({"s": entry("sampling/createMessage", SAMPLE)}, {"elicitation": {}})
    assert plan.stop == "the upstream asked for sampling, which your client did not declare at initialize"


def test_a_url_elicitation_gets_the_elicitation_id_a_legacy_client_needs() -> None:
    plan = tr.plan_round({"login": entry("elicitation/create", URL)}, ALL, "mrtr-c1-")
    assert plan.asks[0].params == {**URL, "elicitationId": "mrtr-c1-login"}
    kept = tr.plan_round({"login": entry("elicitation/create", {**URL, "elicitationId": "own"})}, ALL, "p-")
    assert kept.asks[0].params["elicitationId"] == "own"


@pytest.mark.parametrize(
    "requests",
    [
        "not a map",
        {"x": "not an entry"},
        {"x": entry("tools/call", {})},
        {"x": {"method": "roots/list", "params": []}},
        {"x": entry("elicitation/create", {"message": 1})},
        {"x": entry("sampling/createMessage", {"messages": []})},  # no maxTokens
    ],
)
def test_what_cannot_be_relayed_ends_the_call(requests: object) -> None:
    plan = tr.plan_round(requests, ALL)
    assert plan.stop is not None and plan.asks == ()


def test_no_input_requests_means_retry_at_once() -> None:
    assert tr.plan_round(None, ALL) == tr.RoundPlan(answered={})
    assert tr.plan_round({}, ALL) == tr.RoundPlan(answered={})


def test_answers_become_input_responses() -> None:
    accepted = {"action": "accept", "content": {"n": "Ada"}}
    assert tr.input_response("elicitation/create", jsonrpc.Result(1, accepted)) == accepted
    failed = jsonrpc.Error(1, jsonrpc.ErrorObject(-32602, "mode not supported"))
    assert tr.input_response("elicitation/create", failed) == {"action": "cancel"}
    assert tr.input_response("roots/list", jsonrpc.Error(1, jsonrpc.ErrorObject(-32601, "no"))) == {
        "roots": []
    }
    refused = tr.input_response(
        "sampling/createMessage", jsonrpc.Error(1, jsonrpc.ErrorObject(-1, "User rejected"))
    )
    assert refused == "your client refused sampling/createMessage (-1: User rejected)"


def test_client_info() -> None:
    assert tr.client_info({"clientInfo": {"name": "x", "version": "2"}}) == ("x", "2")
    assert tr.client_info({"clientInfo": "bad"}) == ("legacy-client", "")
