"""FastMCP 2.x (fastmcp 2.14.7) behind the proxy, raw 2026-07-28 client: progress across MRTR rounds, and
the per-request log-level opt-in (issue 15).

Each round is its own client request, so each round's notifications must carry that round's own
`progressToken` (or none, if that request gave none); `notifications/message` only reach a request that set
`io.modelcontextprotocol/logLevel`, at that level and above.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio

from e2e.harness import RawClient, Reply, RunningProxy, accept_name, running_proxy

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

LOG_LEVEL = "io.modelcontextprotocol/logLevel"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy() -> AsyncIterator[RunningProxy]:
    async with peers.start_fastmcp2() as url, running_proxy(url) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def client(proxy: RunningProxy) -> AsyncIterator[RawClient]:
    async with aiohttp.ClientSession() as http:
        yield RawClient(proxy.url, http)


async def call(
    client: RawClient, name: str, args: dict[str, Any], meta: dict[str, Any], **extra: Any
) -> Reply:
    body = client.body("tools/call", {"name": name, "arguments": args, **extra})
    body["params"]["_meta"].update(meta)
    return await client.send(body)


def progress(reply: Reply) -> list[tuple[Any, float, str]]:
    return [
        (n["params"].get("progressToken"), n["params"]["progress"], n["params"].get("message", ""))
        for n in reply.notifications
        if n["method"] == "notifications/progress"
    ]


def logs(reply: Reply) -> list[tuple[str, Any]]:
    return [
        (n["params"]["level"], n["params"]["data"])
        for n in reply.notifications
        if n["method"] == "notifications/message"
    ]


async def test_each_round_carries_its_own_progress_token(client: RawClient) -> None:
    args = {"steps": 2}
    first = await call(client, "progress_elicit_progress", args, {"progressToken": "round-1"})
    assert first.result["resultType"] == "input_required"
    assert progress(first) == [("round-1", 1, "step 1"), ("round-1", 2, "step 2")]
    state = first.result["requestState"]
    (key,) = first.result["inputRequests"]
    second = await call(
        client,
        "progress_elicit_progress",
        args,
        {"progressToken": 42},
        inputResponses={key: accept_name()},
        requestState=state,
    )
    assert second.result["content"][0]["text"] == "progress:accept:Alice"
    assert progress(second) == [(42, 3, "step 3"), (42, 4, "step 4")]


async def test_a_round_without_a_token_gets_no_progress(client: RawClient) -> None:
    args = {"steps": 1}
    first = await call(client, "progress_elicit_progress", args, {})
    assert progress(first) == []
    (key,) = first.result["inputRequests"]
    second = await call(
        client,
        "progress_elicit_progress",
        args,
        {"progressToken": "late"},
        inputResponses={key: accept_name()},
        requestState=first.result["requestState"],
    )
    assert second.result["content"][0]["text"] == "progress:accept:Alice"
    assert progress(second) == [("late", 2, "step 2")]


async def test_no_log_messages_without_the_opt_in(client: RawClient) -> None:
    reply = await call(client, "log_levels", {}, {})
    assert reply.result["content"][0]["text"] == "logged"
    assert logs(reply) == []


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("warning", ["warning", "error"]),
        ("debug", ["debug", "info", "warning", "error"]),
        ("error", ["error"]),
        ("info", ["info", "warning", "error"]),
    ],
)
async def test_the_opted_in_level_and_above(client: RawClient, level: str, expected: list[str]) -> None:
    """debug after warning: the upstream session's level is lowered again with logging/setLevel."""
    reply = await call(client, "log_levels", {}, {LOG_LEVEL: level})
    assert reply.result["content"][0]["text"] == "logged"
    assert [lvl for lvl, _ in logs(reply)] == expected
    assert [data["msg"] for _, data in logs(reply)] == expected  # FastMCP 2: {msg, extra}


async def test_each_round_has_its_own_log_level(client: RawClient) -> None:
    first = await call(client, "log_elicit_log", {}, {LOG_LEVEL: "info"})
    assert [(lvl, data["msg"]) for lvl, data in logs(first)] == [("info", "before")]
    (key,) = first.result["inputRequests"]
    second = await call(
        client,
        "log_elicit_log",
        {},
        {},
        inputResponses={key: accept_name()},
        requestState=first.result["requestState"],
    )
    assert second.result["content"][0]["text"] == "logged:accept:Alice"
    assert logs(second) == []


async def test_an_unknown_log_level_is_refused(client: RawClient, proxy: RunningProxy) -> None:
    live_before = proxy.live  # the module's proxy: what this test leaves
    reply = await call(client, "log_levels", {}, {LOG_LEVEL: "verbose"})
    assert reply.status == 200
    assert reply.error["code"] == -32602
    assert "io.modelcontextprotocol/logLevel" in reply.error["message"]
    assert "debug, info, notice" in reply.error["message"]
    assert proxy.live == live_before  # nothing started upstream
