"""What each bad request gets from the front, on the wire: HTTP status and JSON-RPC error.

These requests are refused before anything goes upstream, so the configured upstream is a closed port.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from e2e.harness import RawClient, RunningProxy, running_proxy

from proxy.config import FrontConfig

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy() -> AsyncIterator[RunningProxy]:
    front = FrontConfig(
        allowed_origins=("https://app.example",),
        max_body_bytes=4096,
        max_input_responses=2,
        max_input_response_bytes=200,
    )
    async with running_proxy(f"http://127.0.0.1:{peers.closed_port()}/mcp", front=front) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def client(proxy: RunningProxy) -> AsyncIterator[RawClient]:
    async with aiohttp.ClientSession() as http:
        yield RawClient(proxy.url, http)


async def raw_post(client: RawClient, data: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    hdrs = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
    async with client.http.post(client.url, data=data, headers=hdrs) as resp:
        body = await resp.read()
        return resp.status, json.loads(body) if body else None


def call_body(client: RawClient, **params: Any) -> dict[str, Any]:
    return client.body("tools/call", {"name": "echo", "arguments": {"text": "x"}, **params})


async def test_not_json_is_a_parse_error(client: RawClient) -> None:
    status, body = await raw_post(client, b"{not json")
    assert status == 400
    assert body["error"]["code"] == -32700
    assert body["id"] is None


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "batches are not supported"),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, '"jsonrpc" member must be exactly "2.0"'),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, '"id" member must be a string or an integer'),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, '"method" member must be a non-empty string'),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, '"params" member must be an object'),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, "Missing Mcp-Session-Id"),  # a legacy client's answer
        ("just a string", "must be a JSON object"),
    ],
    ids=["batch", "bad-version", "bool-id", "method-not-string", "params-array", "a-response", "scalar"],
)
async def test_invalid_jsonrpc_is_invalid_request(client: RawClient, payload: object, fragment: str) -> None:
    status, body = await raw_post(client, json.dumps(payload).encode())
    assert status == 400
    assert body["error"]["code"] == -32600
    assert fragment in body["error"]["message"]


async def test_notification_is_accepted_with_202(client: RawClient) -> None:
    status, body = await raw_post(client, b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}')
    assert (status, body) == (202, None)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"MCP-Protocol-Version": None}, "MCP-Protocol-Version header is required"),
        ({"MCP-Protocol-Version": "2025-11-25"}, "does not match body value '2026-07-28'"),
        ({"Mcp-Method": None}, "Mcp-Method header is required"),
        (
            {"Mcp-Method": "tools/list"},
            "Mcp-Method header value 'tools/list' does not match body value 'tools/call'",
        ),
        ({"Mcp-Name": None}, "Mcp-Name header is required for tools/call"),
        ({"Mcp-Name": "other"}, "Mcp-Name header value 'other' does not match body value 'echo'"),
        ({"Mcp-Name": "=?base64?!!!?="}, "malformed base64"),
    ],
    ids=[
        "no-version",
        "version-mismatch",
        "no-method",
        "method-mismatch",
        "no-name",
        "name-mismatch",
        "bad-b64",
    ],
)
async def test_header_body_mismatch(client: RawClient, change: dict[str, str | None], fragment: str) -> None:
    body = call_body(client)
    headers = client.headers(body)
    for name, value in change.items():
        headers.pop(name, None)
        if value is not None:
            headers[name] = value
    reply = await client.send(body, headers)
    assert reply.status == 400
    assert reply.error["code"] == -32020
    assert fragment in reply.error["message"]


async def test_base64_name_header_is_decoded_before_comparing(client: RawClient) -> None:
    body = client.body("tools/call", {"name": "héllo wörld", "arguments": {}})
    headers = client.headers(body)
    headers["Mcp-Name"] = "=?base64?" + base64.b64encode("héllo wörld".encode()).decode() + "?="
    reply = await client.send(body, headers)
    assert reply.status == 200  # passes the front; fails only upstream (the port is closed)
    assert reply.error["code"] == -31001


async def test_unsupported_version(client: RawClient) -> None:
    body = client.body("tools/list")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
    headers = {**client.headers(body), "MCP-Protocol-Version": "2099-01-01"}
    reply = await client.send(body, headers)
    assert reply.status == 400
    assert reply.error["code"] == -32022
    assert reply.error["data"]["requested"] == "2099-01-01"
    assert "2026-07-28" in reply.error["data"]["supported"]


async def test_initialize_opens_a_legacy_session_with_the_upstream(client: RawClient) -> None:
    """`initialize` is a legacy client: it is relayed to the upstream (closed here, so 502, clearly)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    status, reply = await raw_post(client, json.dumps(body).encode())
    assert status == 502
    assert reply["error"] == {
        "code": -32600,
        "message": "Upstream 'default' unavailable (details in the proxy log under this request's "
        "X-Request-Id)",
    }


async def test_unknown_method_is_404(client: RawClient) -> None:
    reply = await client.request("tools/frobnicate")
    assert reply.status == 404
    assert reply.error == {"code": -32601, "message": "Method not found: tools/frobnicate"}


@pytest.mark.parametrize(
    ("origin", "status"),
    [("https://evil.example", 403), ("https://app.example", 200), (None, 200)],
    ids=["foreign", "allowed", "absent"],
)
async def test_origin(client: RawClient, origin: str | None, status: int) -> None:
    body = client.body("ping")
    headers = client.headers(body)
    if origin:
        headers["Origin"] = origin
    reply = await client.send(body, headers)
    assert reply.status == status
    if status == 403:
        assert reply.error["message"] == "Origin not allowed"
    else:
        assert reply.result == {"resultType": "complete"}


async def test_body_too_large_is_413(client: RawClient) -> None:
    body = call_body(client)
    body["params"]["arguments"]["text"] = "x" * 5000
    reply = await client.send(body)
    assert reply.status == 413
    assert reply.error == {"code": -32600, "message": "Request body too large"}


@pytest.mark.parametrize("verb", ["GET", "DELETE", "PUT"])
async def test_only_post(client: RawClient, verb: str) -> None:
    async with client.http.request(verb, client.url) as resp:
        assert resp.status == 405
        assert resp.headers["Allow"] == "POST"


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"requestState": 42}, "params.requestState must be a string"),
        ({"inputResponses": [1]}, "params.inputResponses must be an object"),
        ({"inputResponses": {"a": {}, "b": {}, "c": {}}}, "has 3 keys; at most 2"),
        ({"inputResponses": {"a": {"x": "y" * 300}}}, "bytes; at most 200"),
    ],
    ids=["state-not-string", "responses-not-object", "too-many-keys", "too-many-bytes"],
)
async def test_mrtr_params_are_checked(client: RawClient, params: dict[str, Any], fragment: str) -> None:
    reply = await client.send(call_body(client, **params))
    assert reply.status == 200
    assert reply.error["code"] == -32602
    assert fragment in reply.error["message"]


async def test_mrtr_params_only_on_mrtr_methods(client: RawClient) -> None:
    reply = await client.request("tools/list", {"requestState": "x"})
    assert reply.error == {
        "code": -32602,
        "message": "tools/list does not take requestState or inputResponses",
    }


async def test_ping_and_sse_only_clients(client: RawClient) -> None:
    body = client.body("ping")
    headers = {**client.headers(body), "Accept": "text/event-stream"}
    async with client.http.post(client.url, json=body, headers=headers) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert resp.headers["X-Accel-Buffering"] == "no"
        text = await resp.text()
    assert text.startswith("data: ")
    assert json.loads(text.removeprefix("data: ").strip()) == {
        "jsonrpc": "2.0",
        "id": body["id"],
        "result": {"resultType": "complete"},
    }


async def test_upstream_down_is_a_clear_error(client: RawClient) -> None:
    reply = await client.call("echo", {"text": "x"})
    assert reply.error["code"] == -31001
    assert "unavailable" in reply.error["message"]
    assert (await client.request("tools/list")).error["code"] == -31001
    assert (await client.request("server/discover")).error["code"] == -31001


async def test_a_large_body_arriving_in_pieces_is_read_whole(client: RawClient) -> None:
    """Regression: a single read() returned only what had arrived, so big bodies failed with -32700."""
    body = call_body(client)
    body["params"]["arguments"]["text"] = "x" * 3000  # under the 4096-byte limit of this fixture

    async def trickle() -> Any:
        data = json.dumps(body).encode()
        for i in range(0, len(data), 500):
            yield data[i : i + 500]
            await asyncio.sleep(0.01)  # the scenario: a client that trickles its body

    async with client.http.post(client.url, data=trickle(), headers=client.headers(body)) as resp:
        reply = await resp.json()
    assert reply["error"]["code"] == -31001  # parsed and checked; only the (closed) upstream failed


async def test_readyz_is_503_when_no_upstream_is_reachable(client: RawClient) -> None:
    async with client.http.get(client.url.replace("/mcp", "/readyz")) as resp:
        assert resp.status == 503
        assert (await resp.json())["upstreams"] == {"default": "unreachable"}
    async with client.http.get(client.url.replace("/mcp", "/healthz")) as resp:
        assert resp.status == 200  # alive all the same: restarting it would not help
