"""check_modern: header/body agreement, era, MRTR params, and the split into upstream params."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Mapping
from typing import Any

import pytest
from multidict import CIMultiDict

from proxy.front.checks import (
    InputLimits,
    Refusal,
    check_modern,
    decode_header_value,
    origin_allowed,
)
from proxy.translate.capabilities import ClientCapabilities
from proxy.translate.request import ModernRequest
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import Request

MODERN = mcp.MODERN_VERSION
LIMITS = InputLimits(max_keys=3, max_bytes=200)
PV = mcp.META_PROTOCOL_VERSION
_ABSENT = object()


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def make(
    method: str = "tools/call",
    params: dict[str, Any] | None = None,
    *,
    meta: Any = _ABSENT,
    version: Any = MODERN,
    header_version: str | None = MODERN,
    header_method: str | object | None = _ABSENT,
    header_name: str | object | None = _ABSENT,
) -> tuple[Request, CIMultiDict[str]]:
    """A request and its headers, consistent unless told otherwise; a header given as None is omitted.

    Header names are lower-cased, as a client may send them: the lookups must be case-insensitive.
    """
    body: dict[str, Any] = dict(params if params is not None else _default_params(method))
    if meta is _ABSENT:
        meta = body.get("_meta", {PV: version})
    if meta is not None:
        body["_meta"] = meta
    headers: CIMultiDict[str] = CIMultiDict()
    if header_version is not None:
        headers["mcp-protocol-version"] = header_version
    if header_method is _ABSENT:
        headers["mcp-method"] = method
    elif isinstance(header_method, str):
        headers["mcp-method"] = header_method
    if header_name is _ABSENT:
        field = mcp.NAMED_METHODS.get(method)
        if field is not None and isinstance(body.get(field), str):
            headers["mcp-name"] = body[field]
    elif isinstance(header_name, str):
        headers["mcp-name"] = header_name
    return Request(1, method, body), headers


def _default_params(method: str) -> dict[str, Any]:
    field = mcp.NAMED_METHODS.get(method)
    if field == "uri":
        return {"uri": "file:///etc/app.json"}
    if field == "name":
        return {"name": "deploy", "arguments": {"env": "prod"}}
    return {}


def refused(req: Request, headers: Mapping[str, str], limits: InputLimits = LIMITS) -> Refusal:
    with pytest.raises(Refusal) as info:
        check_modern(req, headers, limits=limits)
    return info.value


# ---------------------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------------------

MISMATCH = jsonrpc.HEADER_MISMATCH
BAD_PARAMS = jsonrpc.INVALID_PARAMS


@pytest.mark.parametrize(
    ("kwargs", "status", "code", "fragment"),
    [
        pytest.param(
            {"header_version": None},
            400,
            MISMATCH,
            "Header mismatch: the MCP-Protocol-Version header is required",
            id="no-version-header",
        ),
        pytest.param(
            {"header_version": None, "meta": None},
            400,
            MISMATCH,
            "MCP-Protocol-Version header is required",
            id="no-version-header-nor-meta",
        ),
        pytest.param(
            {"meta": None},
            400,
            BAD_PARAMS,
            "params._meta['io.modelcontextprotocol/protocolVersion'] is required",
            id="no-meta",
        ),
        pytest.param(
            {"meta": {}},
            400,
            BAD_PARAMS,
            "protocolVersion'] is required on every request",
            id="meta-without-version",
        ),
        pytest.param({"meta": ["x"]}, 400, BAD_PARAMS, "protocolVersion'] is required", id="meta-array"),
        pytest.param(
            {"version": 20260728}, 400, BAD_PARAMS, "protocolVersion'] is required", id="meta-version-int"
        ),
        pytest.param(
            {"version": None}, 400, BAD_PARAMS, "protocolVersion'] is required", id="meta-version-null"
        ),
        pytest.param(
            {"version": "2025-11-25"},
            400,
            MISMATCH,
            "MCP-Protocol-Version header value '2026-07-28' does not match body value '2025-11-25'",
            id="version-mismatch",
        ),
        pytest.param(
            {"header_version": "2026-07-28 "},
            400,
            MISMATCH,
            "does not match body value",
            id="version-header-trailing-space",
        ),
        pytest.param(
            {"header_method": None}, 400, MISMATCH, "the Mcp-Method header is required", id="no-method-header"
        ),
        pytest.param(
            {"header_method": "tools/list"},
            400,
            MISMATCH,
            "Mcp-Method header value 'tools/list' does not match body value 'tools/call'",
            id="method-mismatch",
        ),
        pytest.param(
            {"header_method": "Tools/Call"},
            400,
            MISMATCH,
            "Mcp-Method header value 'Tools/Call'",
            id="method-value-case-sensitive",
        ),
        pytest.param(
            {"header_name": None},
            400,
            MISMATCH,
            "the Mcp-Name header is required for tools/call",
            id="no-name-header",
        ),
        pytest.param(
            {"header_name": "other"},
            400,
            MISMATCH,
            "Mcp-Name header value 'other' does not match body value 'deploy'",
            id="name-mismatch",
        ),
        pytest.param(
            {"header_name": "Deploy"},
            400,
            MISMATCH,
            "Mcp-Name header value 'Deploy'",
            id="name-value-case-sensitive",
        ),
        pytest.param(
            {"header_name": b64("other")},
            400,
            MISMATCH,
            "Mcp-Name header value 'other' does not match body value 'deploy'",
            id="name-base64-decoded-mismatch",
        ),
        pytest.param(
            {"header_name": "=?BASE64?ZGVwbG95?="},
            400,
            MISMATCH,
            "Mcp-Name header value '=?BASE64?ZGVwbG95?=' does not match",
            id="sentinel-is-case-sensitive",
        ),
        pytest.param(
            {"header_name": "=?base64?ZGVwbG95?="[:-1]},
            400,
            MISMATCH,
            "does not match body value",
            id="sentinel-without-suffix-is-literal",
        ),
        pytest.param(
            {"header_name": "=?base64?***?="},
            400,
            MISMATCH,
            "the Mcp-Name header has a malformed base64 value",
            id="base64-bad-alphabet",
        ),
        pytest.param(
            {"header_name": "=?base64?ZGVwbG95?="[:-3] + "?="},
            400,
            MISMATCH,
            "malformed base64 value",
            id="base64-bad-padding",
        ),
        pytest.param(
            {"header_name": "=?base64?ZGVw bG95?="},
            400,
            MISMATCH,
            "malformed base64 value",
            id="base64-inner-space",
        ),
        pytest.param(
            {"header_name": "=?base64?/w==?="}, 400, MISMATCH, "malformed base64 value", id="base64-not-utf8"
        ),
    ],
)
def test_header_and_version_refusals(kwargs: dict[str, Any], status: int, code: int, fragment: str) -> None:
    req, headers = make(**kwargs)
    refusal = refused(req, headers)
    assert refusal.status == status
    assert refusal.error.code == code
    assert fragment in refusal.error.message


@pytest.mark.parametrize("version", ["2025-11-25", "2024-11-05", "1900-01-01", "2026-07-28-draft", ""])
def test_unsupported_version(version: str) -> None:
    req, headers = make(version=version, header_version=version)
    refusal = refused(req, headers)
    assert refusal.status == 400
    assert refusal.error.code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION
    assert refusal.error.message == "Unsupported protocol version"
    assert refusal.error.data["requested"] == version
    assert MODERN in refusal.error.data["supported"]
    assert refusal.error.data["supported"][0] == MODERN


def test_unsupported_version_lists_only_what_the_front_speaks() -> None:
    req, headers = make(version="1900-01-01", header_version="1900-01-01")
    assert refused(req, headers).error.data["supported"] == list(mcp.MODERN_VERSIONS)


@pytest.mark.parametrize(
    ("method", "params", "fragment"),
    [
        pytest.param("tools/call", {}, "params.name must be a string", id="tools-call-no-name"),
        pytest.param("tools/call", {"name": 3}, "params.name must be a string", id="tools-call-int-name"),
        pytest.param(
            "prompts/get", {"name": None}, "params.name must be a string", id="prompts-get-null-name"
        ),
        pytest.param(
            "resources/read", {"name": "x"}, "params.uri must be a string", id="resources-read-no-uri"
        ),
        pytest.param(
            "resources/read", {"uri": ["u"]}, "params.uri must be a string", id="resources-read-array-uri"
        ),
    ],
)
def test_named_method_without_name(method: str, params: dict[str, Any], fragment: str) -> None:
    req, headers = make(method, params, header_name="x")
    refusal = refused(req, headers)
    assert (refusal.status, refusal.error.code) == (200, BAD_PARAMS)
    assert fragment in refusal.error.message


@pytest.mark.parametrize(
    ("method", "extra", "fragment"),
    [
        pytest.param(
            "tools/call", {"requestState": 5}, "params.requestState must be a string", id="state-int"
        ),
        pytest.param(
            "prompts/get",
            {"requestState": {"s": 1}},
            "params.requestState must be a string",
            id="state-object",
        ),
        pytest.param(
            "tools/call",
            {"inputResponses": []},
            "params.inputResponses must be an object",
            id="responses-array",
        ),
        pytest.param(
            "resources/read",
            {"inputResponses": "x"},
            "params.inputResponses must be an object",
            id="responses-string",
        ),
        pytest.param(
            "tools/call",
            {"inputResponses": {f"k{i}": {} for i in range(4)}},
            "params.inputResponses has 4 keys; at most 3",
            id="too-many-keys",
        ),
        pytest.param(
            "tools/call",
            {"inputResponses": {"k": {"action": "accept", "content": {"t": "x" * 200}}}},
            "bytes; at most 200",
            id="too-many-bytes",
        ),
        pytest.param(
            "tools/list",
            {"requestState": "s"},
            "tools/list does not take requestState or inputResponses",
            id="state-on-tools-list",
        ),
        pytest.param(
            "ping",
            {"inputResponses": {}},
            "ping does not take requestState or inputResponses",
            id="responses-on-ping",
        ),
        pytest.param(
            "completion/complete",
            {"requestState": ""},
            "completion/complete does not take",
            id="empty-state-on-completion",
        ),
        pytest.param(
            "tools/list",
            {"requestState": 1, "inputResponses": []},
            "tools/list does not take",
            id="non-mrtr-checked-before-types",
        ),
    ],
)
def test_mrtr_param_refusals(method: str, extra: dict[str, Any], fragment: str) -> None:
    req, headers = make(method, {**_default_params(method), **extra})
    refusal = refused(req, headers)
    assert (refusal.status, refusal.error.code) == (200, BAD_PARAMS)
    assert fragment in refusal.error.message


def test_too_many_bytes_reports_the_size() -> None:
    responses = {"k": "é" * 100}  # 200 bytes of UTF-8 in the value, 100 characters
    req, headers = make(params={"name": "deploy", "inputResponses": responses})
    refusal = refused(req, headers)
    assert refusal.error.message == "params.inputResponses is 208 bytes; at most 200"


def test_refusal_is_an_exception_carrying_status_and_error() -> None:
    refusal = Refusal(403, jsonrpc.ErrorObject(jsonrpc.INVALID_REQUEST, "no"))
    assert isinstance(refusal, Exception)
    assert (refusal.status, refusal.error.code) == (403, jsonrpc.INVALID_REQUEST)


# ---------------------------------------------------------------------------------------------------------
# Success and the upstream split
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "header_name"),
    [
        pytest.param("tools/call", {"name": "deploy"}, "deploy", id="tools-call"),
        pytest.param("prompts/get", {"name": "greet"}, "greet", id="prompts-get"),
        pytest.param("resources/read", {"uri": "file:///a b.txt"}, "file:///a b.txt", id="resources-read"),
        pytest.param(
            "tools/call", {"name": "Hello, 世界"}, "=?base64?SGVsbG8sIOS4lueVjA==?=", id="base64-non-ascii"
        ),
        pytest.param("tools/call", {"name": " padded "}, "=?base64?IHBhZGRlZCA=?=", id="base64-padded"),
        pytest.param(
            "tools/call", {"name": "line1\nline2"}, "=?base64?bGluZTEKbGluZTI=?=", id="base64-newline"
        ),
        pytest.param(
            "tools/call",
            {"name": "=?base64?literal?="},
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=",
            id="base64-literal-sentinel",
        ),
        pytest.param("tools/call", {"name": "deploy"}, b64("deploy"), id="base64-of-plain-ascii"),
        pytest.param("tools/call", {"name": ""}, "", id="empty-name"),
        pytest.param("tools/list", {}, None, id="tools-list-no-name-header"),
        pytest.param("tools/list", {"cursor": "c"}, "ignored", id="tools-list-name-header-ignored"),
        pytest.param("ping", {}, None, id="ping"),
        pytest.param("server/discover", {}, None, id="server-discover"),
        pytest.param("some/unknown", {}, None, id="unknown-method-passes-checks"),
    ],
)
def test_accepted(method: str, params: dict[str, Any], header_name: str | None) -> None:
    req, headers = make(method, params, header_name=header_name)
    out = check_modern(req, headers, limits=LIMITS)
    assert isinstance(out, ModernRequest)
    assert out.request is req
    assert out.upstream_params == params
    assert out.request_state is None
    assert out.input_responses == {}


def test_plain_dict_headers_with_canonical_names() -> None:
    req = Request(1, "tools/call", {"name": "x", "_meta": {PV: MODERN}})
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "x"}
    assert check_modern(req, headers, limits=LIMITS).upstream_params == {"name": "x"}


def test_header_names_are_case_insensitive() -> None:
    req = Request(1, "tools/call", {"name": "x", "_meta": {PV: MODERN}})
    headers = CIMultiDict({"MCP-PROTOCOL-VERSION": MODERN, "MCP-METHOD": "tools/call", "mcp-NAME": "x"})
    assert check_modern(req, headers, limits=LIMITS).upstream_params == {"name": "x"}


def test_split_of_a_retry() -> None:
    caps = {"elicitation": {"form": {}}, "sampling": {}}
    info = {"name": "ExampleClient", "version": "1.0.0"}
    params = {
        "name": "deploy",
        "arguments": {"env": "prod"},
        "requestState": "opaque-state",
        "inputResponses": {"elicit-1": {"action": "accept", "content": {"ok": True}}},
        "_meta": {
            PV: MODERN,
            mcp.META_CLIENT_INFO: info,
            mcp.META_CLIENT_CAPABILITIES: caps,
            "io.modelcontextprotocol/somethingNew": 1,
            "progressToken": "p-1",
            "com.example/trace": "t",
        },
    }
    req, headers = make(params=params)
    out = check_modern(req, headers, limits=LIMITS)
    assert out.upstream_params == {
        "name": "deploy",
        "arguments": {"env": "prod"},
        "_meta": {"progressToken": "p-1", "com.example/trace": "t"},
    }
    assert out.request_state == "opaque-state"
    assert out.input_responses == {"elicit-1": {"action": "accept", "content": {"ok": True}}}
    assert out.capabilities == ClientCapabilities(elicitation_form=True, sampling=True)
    assert out.client_info == info
    assert req.params["_meta"][PV] == MODERN, "the request itself is not modified"
    assert "requestState" in req.params


def test_upstream_meta_dropped_when_only_modern_keys() -> None:
    req, headers = make(params={"name": "deploy"}, meta={PV: MODERN, mcp.META_CLIENT_INFO: {"name": "c"}})
    out = check_modern(req, headers, limits=LIMITS)
    assert "_meta" not in out.upstream_params
    assert out.capabilities == ClientCapabilities()


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        pytest.param({"name": "c", "version": "1"}, {"name": "c", "version": "1"}, id="object"),
        pytest.param("c", {}, id="string"),
        pytest.param(None, {}, id="null"),
    ],
)
def test_client_info(info: Any, expected: dict[str, Any]) -> None:
    req, headers = make(params={"name": "deploy"}, meta={PV: MODERN, mcp.META_CLIENT_INFO: info})
    assert check_modern(req, headers, limits=LIMITS).client_info == expected


@pytest.mark.parametrize(
    ("extra", "state", "responses"),
    [
        pytest.param({"requestState": "s"}, "s", {}, id="state-only"),
        pytest.param({"requestState": ""}, "", {}, id="empty-state"),
        pytest.param({"inputResponses": {"a": {}}}, None, {"a": {}}, id="responses-only"),
        pytest.param({"requestState": None, "inputResponses": None}, None, {}, id="nulls-are-absent"),
        pytest.param(
            {"inputResponses": {"a": 1, "b": 2, "c": 3}},
            None,
            {"a": 1, "b": 2, "c": 3},
            id="exactly-max-keys",
        ),
        pytest.param({"inputResponses": {"k": "x" * 192}}, None, {"k": "x" * 192}, id="exactly-max-bytes"),
    ],
)
def test_mrtr_params_accepted(extra: dict[str, Any], state: str | None, responses: dict[str, Any]) -> None:
    req, headers = make(params={"name": "deploy", **extra})
    out = check_modern(req, headers, limits=LIMITS)
    assert (out.request_state, dict(out.input_responses)) == (state, responses)
    assert out.upstream_params == {"name": "deploy"}


def test_nulls_on_non_mrtr_method_are_absent() -> None:
    req, headers = make("tools/list", {"requestState": None, "inputResponses": None})
    out = check_modern(req, headers, limits=LIMITS)
    assert out.upstream_params == {}
    assert (out.request_state, out.input_responses) == (None, {})


# ---------------------------------------------------------------------------------------------------------
# The Tasks extension (SEP-2663): Mcp-Name carries the task id; tasks/update carries inputResponses
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_tasks_methods_mirror_the_task_id_in_mcp_name(method: str) -> None:
    req, headers = make(method, {"taskId": "t-1"})
    assert check_modern(req, headers, limits=LIMITS).upstream_params == {"taskId": "t-1"}
    wrong = refused(*make(method, {"taskId": "t-1"}, header_name="t-2"))
    assert (wrong.status, wrong.error.code) == (400, MISMATCH)
    missing = refused(*make(method, {"taskId": "t-1"}, header_name=None))
    assert (missing.status, missing.error.code) == (400, MISMATCH)
    not_a_string = refused(*make(method, {"taskId": 7}, header_name="7"))
    assert (not_a_string.status, not_a_string.error.code) == (200, BAD_PARAMS)


def test_tasks_update_takes_input_responses_and_their_limits() -> None:
    req, headers = make("tasks/update", {"taskId": "t", "inputResponses": {"elicit-1": {"action": "cancel"}}})
    out = check_modern(req, headers, limits=LIMITS)
    assert (out.request_state, dict(out.input_responses)) == (None, {"elicit-1": {"action": "cancel"}})
    too_many = {"taskId": "t", "inputResponses": {"a": 1, "b": 2, "c": 3, "d": 4}}
    assert "at most 3" in refused(*make("tasks/update", too_many)).error.message
    with_state = refused(*make("tasks/update", {"taskId": "t", "inputResponses": {}, "requestState": "s"}))
    assert with_state.error.message == "tasks/update does not take requestState or inputResponses"
    on_get = refused(*make("tasks/get", {"taskId": "t", "inputResponses": {}}))
    assert on_get.error.code == BAD_PARAMS


def test_the_removed_task_param_of_tools_call_never_goes_upstream() -> None:
    req, headers = make("tools/call", {"name": "deploy", "task": {"ttl": 60000, "pollInterval": 100}})
    assert check_modern(req, headers, limits=LIMITS).upstream_params == {"name": "deploy"}
    req, headers = make("prompts/get", {"name": "greet", "task": "kept"})  # only tools/call had it
    assert check_modern(req, headers, limits=LIMITS).upstream_params == {"name": "greet", "task": "kept"}


# ---------------------------------------------------------------------------------------------------------
# decode_header_value
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("plain", "plain", id="plain"),
        pytest.param("", "", id="empty"),
        pytest.param("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界", id="non-ascii"),
        pytest.param("=?base64??=", "", id="encoded-empty"),
        pytest.param("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?=", id="encoded-sentinel"),
        pytest.param("=?Base64?SGk=?=", "=?Base64?SGk=?=", id="wrong-case-is-literal"),
        pytest.param("=?base64?SGk=", "=?base64?SGk=", id="no-suffix-is-literal"),
        pytest.param("x=?base64?SGk=?=", "x=?base64?SGk=?=", id="prefix-not-at-start-is-literal"),
        pytest.param("=?base64?SGk?=", None, id="missing-padding"),
        pytest.param("=?base64?S?Gk=?=", None, id="bad-character"),
        pytest.param("=?base64?gA==?=", None, id="invalid-utf8"),
    ],
)
def test_decode_header_value(raw: str, expected: str | None) -> None:
    assert decode_header_value(raw) == expected


@pytest.mark.parametrize(
    "raw", ["=?base64?é?=", "=?base64?SGk\udcff?="], ids=["non-ascii", "surrogate-escape"]
)
def test_non_ascii_base64_is_malformed_not_a_crash(raw: str) -> None:
    assert decode_header_value(raw) is None
    req, headers = make(header_name=raw)
    refusal = refused(req, headers)
    assert (refusal.status, refusal.error.code) == (400, MISMATCH)


def test_overlapping_sentinel_is_malformed() -> None:
    assert decode_header_value("=?base64?=") is None


def test_input_responses_with_lone_surrogate_do_not_crash() -> None:
    msg = jsonrpc.decode(
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy",'
        b'"inputResponses":{"k":"\\ud800"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}'
    )
    assert isinstance(msg, Request)
    _, headers = make()
    with contextlib.suppress(Refusal):
        check_modern(msg, headers, limits=LIMITS)


# ---------------------------------------------------------------------------------------------------------
# origin_allowed
# ---------------------------------------------------------------------------------------------------------

CONFIGURED = frozenset({"https://app.example.com", "null"})


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        pytest.param(None, "127.0.0.1:8080", True, id="no-origin"),
        pytest.param(None, None, True, id="no-origin-no-host"),
        pytest.param("https://app.example.com", "127.0.0.1:8080", True, id="configured"),
        pytest.param("null", "127.0.0.1:8080", True, id="configured-null"),
        pytest.param("https://app.example.com:443", "127.0.0.1:8080", False, id="configured-is-exact-string"),
        pytest.param("http://127.0.0.1:8080", "127.0.0.1:8080", True, id="same-host-http"),
        pytest.param("https://127.0.0.1:8080", "127.0.0.1:8080", True, id="same-host-https"),
        pytest.param("http://localhost:8080", "localhost:8080", True, id="same-host-localhost"),
        pytest.param("http://[::1]:8080", "[::1]:8080", True, id="same-host-ipv6"),
        pytest.param("http://evil.example", "127.0.0.1:8080", False, id="other-host"),
        pytest.param("http://127.0.0.1", "127.0.0.1:8080", False, id="port-differs"),
        pytest.param("http://127.0.0.1:9090", "127.0.0.1:8080", False, id="other-port"),
        pytest.param("ftp://127.0.0.1:8080", "127.0.0.1:8080", False, id="other-scheme"),
        pytest.param("file://", "127.0.0.1:8080", False, id="file"),
        pytest.param("http://127.0.0.1:8080", None, False, id="no-host"),
        pytest.param("http://user@127.0.0.1:8080", "127.0.0.1:8080", False, id="userinfo"),
        pytest.param("127.0.0.1:8080", "127.0.0.1:8080", False, id="no-scheme"),
    ],
)
def test_origin_allowed(origin: str | None, host: str | None, allowed: bool) -> None:
    assert origin_allowed(origin, host, CONFIGURED) is allowed


@pytest.mark.parametrize("origin", ["null", "https://app.example.com"])
def test_origin_not_configured(origin: str) -> None:
    assert origin_allowed(origin, "127.0.0.1:8080", frozenset()) is False


def test_origin_dns_rebinding_is_refused() -> None:
    assert origin_allowed("http://attacker.example:8080", "attacker.example:8080", frozenset()) is False


@pytest.mark.parametrize("method", ["tools/call", "tools/list", "server/discover"])
def test_the_log_level_opt_in_is_read_and_kept_from_upstream(method: str) -> None:
    meta = {PV: MODERN, mcp.META_LOG_LEVEL: "warning", "progressToken": 3}
    req, headers = make(method, {**_default_params(method), "_meta": meta})
    out = check_modern(req, headers, limits=LIMITS)
    assert out.log_level == "warning"
    assert out.upstream_params.get("_meta") == {"progressToken": 3}  # the opt-in itself never goes upstream
    req, headers = make(method)
    assert check_modern(req, headers, limits=LIMITS).log_level is None


@pytest.mark.parametrize("level", ["verbose", "WARNING", "", 3, ["info"]])
def test_an_unknown_log_level_is_invalid_params(level: Any) -> None:
    req, headers = make(params={"name": "x", "_meta": {PV: MODERN, mcp.META_LOG_LEVEL: level}})
    refusal = refused(req, headers)
    assert (refusal.status, refusal.error.code) == (200, BAD_PARAMS)
    assert refusal.error.message == (
        "params._meta['io.modelcontextprotocol/logLevel'] must be one of "
        "debug, info, notice, warning, error, critical, alert, emergency"
    )
