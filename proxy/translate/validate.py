"""Shape checks on what crosses the proxy in either direction, before it is relayed.

A malformed server request is answered with an error upstream rather than passed to the client; a malformed
input response is refused to the client rather than passed upstream.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators

from proxy.wire import mcp

ELICIT_ACTIONS = frozenset({"accept", "decline", "cancel"})


def invalid_server_request(method: str, params: Mapping[str, Any]) -> str | None:
    """Why a legacy server's request cannot be surfaced as an input request, or None."""
    if method == mcp.ELICIT:
        if not isinstance(params.get("message"), str):
            return "elicitation/create needs a string 'message'"
        mode = params.get("mode", "form")
        if mode == "form":
            if not isinstance(params.get("requestedSchema"), dict):
                return "form-mode elicitation/create needs an object 'requestedSchema'"
        elif mode == "url":
            if not isinstance(params.get("url"), str) or not isinstance(params.get("elicitationId"), str):
                return "url-mode elicitation/create needs string 'url' and 'elicitationId'"
        else:
            return f"unknown elicitation mode {mode!r}"
    elif method == mcp.SAMPLE:
        if not isinstance(params.get("messages"), list):
            return "sampling/createMessage needs a 'messages' array"
        max_tokens = params.get("maxTokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            return "sampling/createMessage needs an integer 'maxTokens'"
    return None


def invalid_input_response(
    method: str, response: object, params: Mapping[str, Any] | None = None
) -> str | None:
    """Why a client's input response cannot answer a pending request of `method` (asked with `params`,
    when known), or None. An accepted form elicitation's content is checked against the whole
    `requestedSchema`, nested values included."""
    if not isinstance(response, dict):
        return "must be an object"
    if method == mcp.ELICIT:
        if response.get("action") not in ELICIT_ACTIONS:
            return "an elicitation response needs 'action' of accept, decline or cancel"
        if "content" in response and not isinstance(response["content"], dict):
            return "an elicitation response's 'content' must be an object"
        schema = (params or {}).get("requestedSchema")
        if response["action"] == "accept" and isinstance(schema, dict):
            return _schema_problem(schema, response.get("content", {}))
    elif method == mcp.SAMPLE:
        if not isinstance(response.get("role"), str) or "content" not in response:
            return "a sampling response needs 'role' and 'content'"
    elif method == mcp.ROOTS and not isinstance(response.get("roots"), list):
        return "a roots response needs a 'roots' array"
    return None


# Only the types are checked, at every depth: a value of the wrong type would fail the tool, while servers
# differ on the rest (an empty multi-select where the schema says minItems 1 is accepted by some).
_TYPES_ONLY = validators.create(
    meta_schema=validators.Draft202012Validator.META_SCHEMA,
    validators={
        k: validators.Draft202012Validator.VALIDATORS[k]
        for k in ("type", "properties", "items", "prefixItems", "$ref")
    },
)


def _schema_problem(schema: dict[str, Any], content: Any) -> str | None:
    """The first value of `content`, at any depth, whose type `schema` does not allow
    (`content.<path>: <reason>`), or None. A schema that is not valid JSON Schema is the upstream's
    problem, not the client's: nothing is checked against it."""
    try:
        key = json.dumps(schema)
    except (TypeError, ValueError):
        key = None
    checker = _checker(key) if key is not None and len(key) <= MAX_CACHED_SCHEMA else _compile(schema)
    if checker is None:
        return None
    error = schema_errors.best_match(checker.iter_errors(content))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"content{where}: {error.message}"


# Checking a schema against the JSON Schema meta-schema costs ~0.4 ms, paid for every answered elicitation,
# while a tool asks with the same schema every time: the checked validators of recent schemas are kept, by
# their JSON text (key order kept: it decides which of several errors is reported first).
MAX_CACHED_SCHEMA = 16 * 1024  # bytes of JSON; a larger schema is checked afresh every time
Checker = Any  # a jsonschema validator of _TYPES_ONLY's class


def _compile(schema: dict[str, Any]) -> Checker | None:
    """The types-only validator of a valid schema, or None (a schema that is not valid JSON Schema)."""
    try:
        validators.Draft202012Validator.check_schema(schema)
    except schema_errors.SchemaError:
        return None
    return _TYPES_ONLY(schema)


@functools.lru_cache(maxsize=256)
def _checker(key: str) -> Checker | None:
    """`_compile` of the schema `key` is the JSON text of, from its own copy (never the caller's dict)."""
    return _compile(json.loads(key))
