"""Shape checks on what crosses the proxy in either direction, before it is relayed.

A malformed server request is answered with an error upstream rather than passed to the client; a malformed
input response is refused to the client rather than passed upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.translate import answers
from proxy.wire import mcp


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
    when known), or None. Checked in full (proxy/translate/answers.py): an accepted form elicitation's
    content against the whole `requestedSchema`, sampling and roots results against their shapes."""
    if not isinstance(response, dict):
        return "must be an object"
    if method == mcp.ELICIT:
        return answers.elicitation_problem(response, params)
    if method == mcp.SAMPLE:
        return answers.sampling_problem(response)
    if method == mcp.ROOTS:
        return answers.roots_problem(response)
    return None
