"""Pure checks of a modern (2026-07-28) request at the front: headers against body, era, MRTR params.

Each failure is a `Refusal`: the HTTP status and the JSON-RPC error the client gets. Nothing here does I/O.
"""

from __future__ import annotations

import base64
import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from multidict import istr

from proxy.translate.capabilities import ClientCapabilities
from proxy.translate.notes import log_level_problem
from proxy.translate.request import ModernRequest
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject, Request


@dataclass(frozen=True, slots=True)
class Refusal(Exception):
    status: int
    error: ErrorObject
    headers: tuple[tuple[str, str], ...] = ()  # e.g. Retry-After


LOOPBACK_NAMES = frozenset({"localhost", "::1"})
# The request metadata headers, as the case-insensitive names aiohttp looks up without converting a str each
_VERSION_HEADER = istr("MCP-Protocol-Version")
_METHOD_HEADER = istr("Mcp-Method")
_NAME_HEADER = istr("Mcp-Name")


def _is_loopback(hostname: str) -> bool:
    if hostname in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def origin_allowed(origin: str | None, host: str | None, allowed: frozenset[str]) -> bool:
    """No Origin (a non-browser client), a configured origin, or a loopback page calling the same loopback
    host:port. `Host` is the client's word, so a non-loopback Origin is never trusted for merely matching it:
    under DNS rebinding both name the attacker's domain."""
    if origin is None or origin in allowed:
        return True
    parts = urlsplit(origin)
    return (
        parts.scheme in ("http", "https")
        and parts.hostname is not None
        and _is_loopback(parts.hostname)
        and host is not None
        and parts.netloc == host
    )


def decode_header_value(value: str) -> str | None:
    """Undo the `=?base64?…?=` sentinel encoding of Mcp-Name; None if it is malformed."""
    if value.startswith("=?base64?") and value.endswith("?="):
        if len(value) < len("=?base64??=") or not value.isascii():
            return None
        try:
            return base64.b64decode(value[9:-2], validate=True).decode()
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
            return None
    return value


def _mismatch(rid: jsonrpc.RequestId, text: str) -> Refusal:
    return Refusal(400, ErrorObject(jsonrpc.HEADER_MISMATCH, f"Header mismatch: {text}"))


def check_modern(req: Request, headers: Mapping[str, str], *, limits: InputLimits) -> ModernRequest:
    meta = req.params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    version = meta.get(mcp.META_PROTOCOL_VERSION)
    header_version = headers.get(_VERSION_HEADER)
    if header_version is None:
        raise _mismatch(req.id, "the MCP-Protocol-Version header is required")
    if not isinstance(version, str):
        raise Refusal(
            400,
            ErrorObject(
                jsonrpc.INVALID_PARAMS,
                f"params._meta[{mcp.META_PROTOCOL_VERSION!r}] is required on every request",
            ),
        )
    if header_version != version:
        raise _mismatch(
            req.id,
            f"MCP-Protocol-Version header value {header_version!r} does not match body value {version!r}",
        )
    if version not in mcp.MODERN_VERSIONS:
        raise Refusal(
            400,
            ErrorObject(
                jsonrpc.UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(mcp.MODERN_VERSIONS), "requested": version},
            ),
        )
    header_method = headers.get(_METHOD_HEADER)
    if header_method is None:
        raise _mismatch(req.id, "the Mcp-Method header is required")
    if header_method != req.method:
        raise _mismatch(
            req.id, f"Mcp-Method header value {header_method!r} does not match body value {req.method!r}"
        )
    name_field = mcp.NAMED_METHODS.get(req.method)
    if name_field is not None:
        body_name = req.params.get(name_field)
        if not isinstance(body_name, str):
            raise Refusal(200, ErrorObject(jsonrpc.INVALID_PARAMS, f"params.{name_field} must be a string"))
        raw = headers.get(_NAME_HEADER)
        if raw is None:
            raise _mismatch(req.id, f"the Mcp-Name header is required for {req.method}")
        decoded = decode_header_value(raw)
        if decoded is None:
            raise _mismatch(req.id, "the Mcp-Name header has a malformed base64 value")
        if decoded != body_name:
            raise _mismatch(
                req.id, f"Mcp-Name header value {decoded!r} does not match body value {body_name!r}"
            )
    state, responses = _mrtr_params(req, limits)
    level = meta.get(mcp.META_LOG_LEVEL)
    if level is not None and (problem := log_level_problem(level)) is not None:
        raise Refusal(200, ErrorObject(jsonrpc.INVALID_PARAMS, problem))
    return ModernRequest(  # positional: the fields in order (translate/request.py)
        req,
        None,  # upstream_params: derived if read, which the native relay never does
        ClientCapabilities.from_declared(meta.get(mcp.META_CLIENT_CAPABILITIES)),
        None,  # client_info: the same
        state,
        responses,
        level,
    )


# What json.dumps(separators=(",", ":"), ensure_ascii=False) writes, from one encoder made once: json.dumps
# makes a new one for every call with options, and every retry's inputResponses are measured.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class InputLimits:
    max_keys: int
    max_bytes: int


def _mrtr_params(req: Request, limits: InputLimits) -> tuple[str | None, Mapping[str, Any]]:
    state = req.params.get("requestState")
    responses = req.params.get("inputResponses")
    takes_responses = req.method in mcp.MRTR_METHODS or req.method == mcp.TASKS_UPDATE  # SEP-2663
    if (state is not None and req.method not in mcp.MRTR_METHODS) or (
        responses is not None and not takes_responses
    ):
        raise Refusal(
            200,
            ErrorObject(jsonrpc.INVALID_PARAMS, f"{req.method} does not take requestState or inputResponses"),
        )
    if not takes_responses:
        return None, {}
    if state is not None and not isinstance(state, str):
        raise Refusal(200, ErrorObject(jsonrpc.INVALID_PARAMS, "params.requestState must be a string"))
    if responses is None:
        return state, {}
    if not isinstance(responses, dict):
        raise Refusal(200, ErrorObject(jsonrpc.INVALID_PARAMS, "params.inputResponses must be an object"))
    if len(responses) > limits.max_keys:
        raise Refusal(
            200,
            ErrorObject(
                jsonrpc.INVALID_PARAMS,
                f"params.inputResponses has {len(responses)} keys; at most {limits.max_keys}",
            ),
        )
    size = len(_COMPACT.encode(responses).encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise Refusal(
            200,
            ErrorObject(
                jsonrpc.INVALID_PARAMS, f"params.inputResponses is {size} bytes; at most {limits.max_bytes}"
            ),
        )
    return state, responses
