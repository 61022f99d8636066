"""Property tests and a bounded fuzz run of the front: whatever arrives, the answer is never a 500.

The budget is fixed (hypothesis `max_examples`), so CI time stays bounded. Requests that pass the front go to
an upstream on a closed port and come back as a clear -31001, so every input is answered.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from e2e.harness import RunningProxy, running_proxy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from proxy.front.checks import InputLimits, Refusal, check_modern
from proxy.wire import jsonrpc

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
methods = st.sampled_from(
    [
        "tools/call",
        "prompts/get",
        "resources/read",
        "tools/list",
        "ping",
        "server/discover",
        "initialize",
        "x",
    ]
)
header_values = st.one_of(
    st.none(),
    st.sampled_from(["2026-07-28", "2025-11-25", "tools/call", "=?base64?eA==?="]),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str]]:
    method = draw(methods)
    params: dict[str, Any] = draw(
        st.dictionaries(
            st.sampled_from(["name", "uri", "arguments", "requestState", "inputResponses", "_meta", "other"]),
            json_values,
            max_size=5,
        )
    )
    if draw(st.booleans()):
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": draw(header_values),
            "io.modelcontextprotocol/clientCapabilities": draw(json_values),
        }
    body = {
        "jsonrpc": "2.0",
        "id": draw(st.integers() | st.text(max_size=5)),
        "method": method,
        "params": params,
    }
    headers = {}
    for name in ("MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"):
        value = draw(header_values)
        if value is not None:
            headers[name] = value
    return body, headers


@given(requests())
@settings(max_examples=400, deadline=None)
def test_check_modern_only_refuses(case: tuple[dict[str, Any], dict[str, str]]) -> None:
    body, headers = case
    msg = jsonrpc.parse_message(body)
    assert isinstance(msg, jsonrpc.Request)
    try:
        checked = check_modern(msg, CIMultiDict(headers), limits=InputLimits(64, 262144))
    except Refusal as refusal:
        assert refusal.status in (200, 400)
        assert refusal.error.code in (-32020, -32022, -32602)
        return
    assert "requestState" not in checked.upstream_params
    assert "inputResponses" not in checked.upstream_params


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy() -> AsyncIterator[RunningProxy]:
    async with running_proxy(f"http://127.0.0.1:{peers.closed_port()}/mcp") as running:
        yield running


@given(
    body=st.one_of(
        st.binary(max_size=200),
        json_values.map(lambda v: json.dumps(v).encode()),
        requests().map(lambda c: json.dumps(c[0]).encode()),
    ),
    headers=st.dictionaries(
        st.sampled_from(
            [
                "MCP-Protocol-Version",
                "Mcp-Method",
                "Mcp-Name",
                "Accept",
                "Origin",
                "Content-Type",
                "Authorization",
            ]
        ),
        header_values.filter(lambda v: v is not None),
        max_size=5,
    ),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.asyncio(loop_scope="session")
async def test_front_never_answers_500(proxy: RunningProxy, body: bytes, headers: dict[str, str]) -> None:
    async with aiohttp.ClientSession() as http, http.post(proxy.url, data=body, headers=headers) as resp:
        payload = await resp.read()
        # 502: a legacy-looking request relayed to the (closed) upstream. Never a 500.
        assert resp.status in (200, 202, 400, 403, 404, 413, 429, 502), (resp.status, payload[:300])
        if resp.status != 202:
            reply = json.loads(payload)
            assert "result" in reply or isinstance(reply["error"]["code"], int)
