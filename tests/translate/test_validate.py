"""Shape checks on server requests (before they become input requests) and input responses."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.translate.validate import invalid_input_response, invalid_server_request
from proxy.wire import mcp

FORM: dict[str, Any] = {"message": "Confirm?", "requestedSchema": {"type": "object", "properties": {}}}
URL: dict[str, Any] = {
    "mode": "url",
    "message": "Sign in",
    "url": "https://x.example/a",
    "elicitationId": "e1",
}
SAMPLE: dict[str, Any] = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
    "maxTokens": 5,
}


@pytest.mark.parametrize(
    ("method", "params"),
    [
        pytest.param(mcp.ELICIT, FORM, id="form"),
        pytest.param(mcp.ELICIT, {**FORM, "mode": "form"}, id="form-explicit"),
        pytest.param(mcp.ELICIT, URL, id="url"),
        pytest.param(mcp.SAMPLE, SAMPLE, id="sampling"),
        pytest.param(mcp.SAMPLE, {**SAMPLE, "messages": [], "maxTokens": 0}, id="sampling-empty"),
        pytest.param(mcp.ROOTS, {}, id="roots"),
        pytest.param(mcp.ROOTS, {"anything": 1}, id="roots-any-params"),
        pytest.param("other/method", {}, id="other-method-unchecked"),
    ],
)
def test_valid_server_request(method: str, params: dict[str, Any]) -> None:
    assert invalid_server_request(method, params) is None


@pytest.mark.parametrize(
    ("method", "params", "fragment"),
    [
        pytest.param(mcp.ELICIT, {"requestedSchema": {}}, "needs a string 'message'", id="no-message"),
        pytest.param(mcp.ELICIT, {**FORM, "message": 1}, "needs a string 'message'", id="message-int"),
        pytest.param(mcp.ELICIT, {**URL, "message": None}, "needs a string 'message'", id="url-message-null"),
        pytest.param(mcp.ELICIT, {"message": "m"}, "object 'requestedSchema'", id="form-no-schema"),
        pytest.param(
            mcp.ELICIT,
            {"message": "m", "requestedSchema": []},
            "object 'requestedSchema'",
            id="form-schema-array",
        ),
        pytest.param(
            mcp.ELICIT,
            {"message": "m", "mode": "form", "requestedSchema": "s"},
            "object 'requestedSchema'",
            id="form-explicit-schema-string",
        ),
        pytest.param(mcp.ELICIT, {**URL, "url": None}, "string 'url' and 'elicitationId'", id="url-null"),
        pytest.param(
            mcp.ELICIT,
            {k: v for k, v in URL.items() if k != "url"},
            "string 'url' and 'elicitationId'",
            id="url-missing",
        ),
        pytest.param(
            mcp.ELICIT,
            {**URL, "elicitationId": 3},
            "string 'url' and 'elicitationId'",
            id="url-elicitation-id-int",
        ),
        pytest.param(
            mcp.ELICIT, {**FORM, "mode": "native"}, "unknown elicitation mode 'native'", id="mode-unknown"
        ),
        pytest.param(mcp.ELICIT, {**FORM, "mode": None}, "unknown elicitation mode None", id="mode-null"),
        pytest.param(mcp.ELICIT, {**FORM, "mode": "Form"}, "unknown elicitation mode 'Form'", id="mode-case"),
        pytest.param(mcp.SAMPLE, {"maxTokens": 5}, "needs a 'messages' array", id="no-messages"),
        pytest.param(
            mcp.SAMPLE, {**SAMPLE, "messages": {}}, "needs a 'messages' array", id="messages-object"
        ),
        pytest.param(mcp.SAMPLE, {"messages": []}, "needs an integer 'maxTokens'", id="no-max-tokens"),
        pytest.param(
            mcp.SAMPLE, {**SAMPLE, "maxTokens": "5"}, "needs an integer 'maxTokens'", id="max-tokens-str"
        ),
        pytest.param(
            mcp.SAMPLE, {**SAMPLE, "maxTokens": 5.0}, "needs an integer 'maxTokens'", id="max-tokens-float"
        ),
        pytest.param(
            mcp.SAMPLE, {**SAMPLE, "maxTokens": True}, "needs an integer 'maxTokens'", id="max-tokens-bool"
        ),
    ],
)
def test_invalid_server_request(method: str, params: dict[str, Any], fragment: str) -> None:
    problem = invalid_server_request(method, params)
    assert problem is not None
    assert fragment in problem


@pytest.mark.parametrize(
    ("method", "response"),
    [
        pytest.param(mcp.ELICIT, {"action": "accept", "content": {"ok": True}}, id="elicit-accept"),
        pytest.param(mcp.ELICIT, {"action": "accept"}, id="elicit-accept-no-content"),
        pytest.param(mcp.ELICIT, {"action": "decline"}, id="elicit-decline"),
        pytest.param(mcp.ELICIT, {"action": "cancel", "_meta": {}}, id="elicit-cancel"),
        pytest.param(
            mcp.SAMPLE,
            {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"},
            id="sampling",
        ),
        pytest.param(
            mcp.SAMPLE,
            {"role": "assistant", "content": [{"type": "text", "text": "x"}], "model": "m"},
            id="sampling-content-array",
        ),
        pytest.param(mcp.ROOTS, {"roots": []}, id="roots-empty"),
        pytest.param(mcp.ROOTS, {"roots": [{"uri": "file:///a"}]}, id="roots"),
        pytest.param("other/method", {}, id="other-method-any-object"),
    ],
)
def test_valid_input_response(method: str, response: object) -> None:
    assert invalid_input_response(method, response) is None


@pytest.mark.parametrize(
    ("method", "response", "fragment"),
    [
        pytest.param(mcp.ELICIT, "accept", "must be an object", id="elicit-string"),
        pytest.param(mcp.ELICIT, None, "must be an object", id="elicit-null"),
        pytest.param(mcp.SAMPLE, [], "must be an object", id="sampling-array"),
        pytest.param(mcp.ROOTS, 1, "must be an object", id="roots-number"),
        pytest.param("other/method", "x", "must be an object", id="other-method-string"),
        pytest.param(mcp.ELICIT, {}, "'action' of accept, decline or cancel", id="elicit-no-action"),
        pytest.param(
            mcp.ELICIT, {"action": "ACCEPT"}, "'action' of accept, decline or cancel", id="elicit-action-case"
        ),
        pytest.param(
            mcp.ELICIT, {"action": "reject"}, "'action' of accept, decline or cancel", id="elicit-action-bad"
        ),
        pytest.param(
            mcp.ELICIT,
            {"action": "accept", "content": "x"},
            "'content' must be an object",
            id="elicit-content-string",
        ),
        pytest.param(
            mcp.ELICIT,
            {"action": "accept", "content": None},
            "'content' must be an object",
            id="elicit-content-null",
        ),
        pytest.param(mcp.SAMPLE, {"content": {}}, "needs 'role' and 'content'", id="sampling-no-role"),
        pytest.param(
            mcp.SAMPLE, {"role": 1, "content": {}}, "needs 'role' and 'content'", id="sampling-role-int"
        ),
        pytest.param(
            mcp.SAMPLE, {"role": "assistant"}, "needs 'role' and 'content'", id="sampling-no-content"
        ),
        pytest.param(mcp.ROOTS, {}, "needs a 'roots' array", id="roots-missing"),
        pytest.param(mcp.ROOTS, {"roots": {}}, "needs a 'roots' array", id="roots-object"),
    ],
)
def test_invalid_input_response(method: str, response: object, fragment: str) -> None:
    problem = invalid_input_response(method, response)
    assert problem is not None
    assert fragment in problem


NESTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "prefs": {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
    },
    "required": ["name"],
}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"name": "x", "prefs": {"age": "old"}}, "content.prefs.age: 'old' is not of type 'integer'"),
        ({"name": "x", "tags": ["a", 3]}, "content.tags[1]: 3 is not of type 'string'"),
        ({"name": ["x"]}, "content.name: ['x'] is not of type 'string'"),
        # The whole schema, not only the types (proxy/translate/answers.py; tests/translate/test_answers.py):
        ({"name": "x", "prefs": {"age": -1}}, "content.prefs.age: -1 is less than the minimum of 0"),
        ({"name": "x", "tags": ["c"]}, "content.tags[0]: 'c' is not one of ['a', 'b']"),
        ({"prefs": {}}, "content.name: 'name' is a required property"),
        ({"name": "x", "prefs": {"age": 3}, "tags": ["b"]}, None),
    ],
)
def test_accepted_content_is_checked_against_the_whole_requested_schema(
    content: dict[str, Any], problem: str | None
) -> None:
    params = {"message": "m", "requestedSchema": NESTED_SCHEMA}
    response = {"action": "accept", "content": content}
    assert invalid_input_response(mcp.ELICIT, response, params) == problem


def test_declines_and_broken_schemas_are_not_checked_against_the_schema() -> None:
    assert (
        invalid_input_response(mcp.ELICIT, {"action": "decline"}, {"requestedSchema": NESTED_SCHEMA}) is None
    )
    broken = {"requestedSchema": {"type": "no-such-type"}}  # the upstream's mistake, not the client's
    assert invalid_input_response(mcp.ELICIT, {"action": "accept", "content": {}}, broken) is None
