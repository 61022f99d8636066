"""No secret reaches the logs during a full elicitation flow: tokens, keys, handles, elicited content."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import structlog

from e2e.harness import RawClient, running_proxy
from proxy import logs
from proxy.config import KeysConfig
from proxy.handle import generate_key_b64

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    logs.configure("debug", "json", stream)
    try:
        yield stream
    finally:
        structlog.reset_defaults()


async def test_full_flow_logs_no_secret(fastmcp_url: str, captured: io.StringIO, tmp_path: Path) -> None:
    key = generate_key_b64()
    (tmp_path / "key").write_text(key)
    token = "Bearer tok-SECRET-4242"
    elicited = "Elicited-SECRET-9731"
    async with (
        running_proxy(fastmcp_url, keys=KeysConfig(dirs=(tmp_path,))) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, authorization=token)
        first = await client.call("ask_name")
        state = first.result["requestState"]
        bad = await client.call("ask_name", requestState=state[:-4], inputResponses={"elicit-1": {}})
        assert bad.error["code"] == -32602
        final = await client.retry(
            first, {"elicit-1": {"action": "accept", "content": {"name": elicited}}}, "ask_name"
        )
        assert elicited in final.result["content"][0]["text"]

    text = captured.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]
    assert any(line.get("outcome") == "input_required" for line in lines)  # the canonical request lines
    assert any(line.get("outcome") == "handle_rejected" and line.get("reason") for line in lines)
    for secret in (token, "tok-SECRET-4242", elicited, state, state[:40], key):
        assert secret not in text, f"{secret[:12]}… leaked into the logs"
