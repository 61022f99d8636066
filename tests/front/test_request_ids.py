"""Request ids: taken from the client or made, logged on every line of the request, echoed, sent upstream;
and the call id on the canonical line, joining the rounds of one call."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import structlog
from e2e.harness import RawClient, Reply, accept_name, running_proxy
from e2e.recording import Recording, recording_relay

from proxy.config import FrontConfig
from proxy.front.request_ids import REQUEST_ID_HEADER, request_id
from proxy.observe import logs
from proxy.upstream.propagation import detach_from_request, propagated, propagating, with_propagated

GENERATED = re.compile(r"^[0-9a-f]{32}$")


# --- units: the id, and how it travels -----------------------------------------------------------


@pytest.mark.parametrize("given", ["abc", "req-1/2:3", "a" * 128, "with inner space", "~!@#$%^&*()"])
def test_a_sane_client_id_is_kept(given: str) -> None:
    assert request_id({REQUEST_ID_HEADER: given}) == given


@pytest.mark.parametrize("given", [None, "", "   ", "a" * 129, "tab\there", "é", "nul\x00", "new\nline"])
def test_otherwise_a_new_one_is_made(given: str | None) -> None:
    made = request_id({} if given is None else {REQUEST_ID_HEADER: given})
    assert GENERATED.match(made)
    assert made != request_id({})


def test_a_forked_child_makes_other_ids_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, request_id({}).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as child:
        assert GENERATED.match(made := child.read())
    assert made != request_id({})


def test_propagated_headers_replace_any_case() -> None:
    with propagating({"X-Request-Id": "r1", "traceparent": "tp"}):
        out = with_propagated({"x-request-id": "client", "Authorization": "a", "TraceParent": "old"})
    assert out == {"Authorization": "a", "X-Request-Id": "r1", "traceparent": "tp"}
    assert with_propagated({"A": "1"}) == {"A": "1"}  # outside a request: nothing added


async def test_tasks_started_in_a_request_carry_it_and_session_tasks_do_not() -> None:
    async def seen() -> tuple[dict[str, str], dict[str, Any]]:
        return dict(propagated()), structlog.contextvars.get_contextvars()

    async def session_task() -> tuple[dict[str, str], dict[str, Any]]:
        detach_from_request()
        return await seen()

    with propagating({"X-Request-Id": "r1"}), structlog.contextvars.bound_contextvars(request_id="r1"):
        inherited = asyncio.ensure_future(seen())
        detached = asyncio.ensure_future(session_task())
        assert await inherited == ({"X-Request-Id": "r1"}, {"request_id": "r1"})
        assert await detached == ({}, {})
        assert propagated() == {"X-Request-Id": "r1"}  # the request itself keeps them
    assert propagated() == {}


# --- end to end, through a relay that records what reached FastMCP ----------------------------------


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    logs.configure("debug", "json", stream)
    try:
        yield stream
    finally:
        structlog.contextvars.clear_contextvars()
        structlog.reset_defaults()


def log_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def request_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [line for line in log_lines(stream) if line["event"] == "request"]


@pytest_asyncio.fixture(loop_scope="session")
async def relay(fastmcp_url: str) -> AsyncIterator[Recording]:
    async with recording_relay(fastmcp_url) as recording:
        yield recording


async def call_with_id(client: RawClient, rid: str | None, name: str, **params: Any) -> Reply:
    body = client.body("tools/call", {"name": name, "arguments": params.pop("arguments", {}), **params})
    headers = client.headers(body)
    if rid is not None:
        headers[REQUEST_ID_HEADER] = rid
    return await client.send(body, headers)


@pytest.mark.peers
async def test_client_id_is_logged_echoed_and_reaches_the_upstream(
    relay: Recording, captured: io.StringIO
) -> None:
    async with running_proxy(relay.url) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        reply = await call_with_id(client, "client-req-42", "trace_headers")
    assert reply.headers[REQUEST_ID_HEADER] == "client-req-42"
    assert reply.result["content"][0]["text"].startswith("client-req-42|")  # what the tool's POST carried
    (line,) = request_lines(captured)
    assert line["request_id"] == "client-req-42"
    assert (line["method"], line["outcome"], line["round"]) == ("tools/call", "complete", 1)
    assert line["call"]  # even a call that completes at once is a call
    # Every line logged while the request was handled carries its id: here the session the call opened.
    (opened,) = [ln for ln in log_lines(captured) if ln["event"] == "pool.session_opened"]
    assert opened["request_id"] == "client-req-42"
    # The session's initialize went out for this request too; its standalone GET stream is the session's.
    assert relay.posts("initialize")[0].headers["x-request-id"] == "client-req-42"
    assert relay.posts("tools/call")[0].headers["x-request-id"] == "client-req-42"
    assert all("x-request-id" not in s.headers for s in relay.sent if s.method == "GET")


@pytest.mark.peers
@pytest.mark.parametrize("given", [None, "x" * 129, "tab\there"])
async def test_a_missing_or_bad_id_is_replaced(
    relay: Recording, captured: io.StringIO, given: str | None
) -> None:
    async with running_proxy(relay.url) as proxy, aiohttp.ClientSession() as http:
        reply = await call_with_id(RawClient(proxy.url, http), given, "trace_headers")
    made = reply.headers[REQUEST_ID_HEADER]
    assert GENERATED.match(made)
    assert reply.result["content"][0]["text"] == f"{made}|"  # no traceparent: tracing is off
    assert request_lines(captured)[0]["request_id"] == made


@pytest.mark.peers
async def test_rounds_of_one_call_share_its_call_id_and_each_sends_its_own_request_id(
    relay: Recording, captured: io.StringIO
) -> None:
    async with running_proxy(relay.url) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        first = await call_with_id(client, "round-1", "ask_name")
        assert first.result["resultType"] == "input_required"
        final = await call_with_id(
            client,
            "round-2",
            "ask_name",
            inputResponses={"elicit-1": accept_name("Ada")},
            requestState=first.result["requestState"],
        )
        assert final.result["content"][0]["text"] == "accept:Ada"
        body = client.body("tools/list")
        listed = await client.send(body, {**client.headers(body), REQUEST_ID_HEADER: "plain"})
        assert listed.headers[REQUEST_ID_HEADER] == "plain"
    one, two, plain = request_lines(captured)
    assert (one["request_id"], one["outcome"], one["round"]) == ("round-1", "input_required", 1)
    assert (two["request_id"], two["outcome"], two["round"]) == ("round-2", "complete", 2)
    assert one["call"] == two["call"]
    assert "call" not in plain and plain["request_id"] == "plain"
    # Upstream: the call's POST went out in round 1, the answer to its elicitation in round 2.
    (call_post,) = relay.posts("tools/call")
    (answer,) = relay.posts("response")
    assert call_post.headers["x-request-id"] == "round-1"
    assert answer.headers["x-request-id"] == "round-2"
    assert relay.posts("tools/list")[0].headers["x-request-id"] == "plain"


@pytest.mark.peers
async def test_a_streamed_answer_is_echoed_the_id_too(relay: Recording) -> None:
    async with (
        running_proxy(relay.url, front=FrontConfig(keepalive_s=0.05)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        reply = await call_with_id(
            RawClient(proxy.url, http), "streamed", "slow_echo", arguments={"text": "hi", "delay_s": 0.3}
        )
    assert reply.headers["Content-Type"].startswith("text/event-stream")  # keep-alives went first
    assert reply.headers[REQUEST_ID_HEADER] == "streamed"
    assert reply.result["content"][0]["text"] == "hi"
