"""Cancellation, owner forwarding and takeover of a call through an aggregated route, as on a single-upstream
route: a 2026-07-28 client's call to a legacy member (FastMCP 1.30, behind a recording relay so the test sees
what reached it) that elicits and is parked.

How a 2026-07-28 client cancels: over Streamable HTTP by closing the stream of a request still running (the
specification's "closing the SSE response stream is the cancellation signal"), and with the Tasks extension
by `tasks/cancel`; either way the proxy ends the call upstream with `notifications/cancelled` naming the
call's upstream request. A parked call between rounds has no running request: a `notifications/cancelled`
the client posts then names a request that completed (its `input_required`), which the specification says
to ignore; the call stays resumable and is reaped at `calls.parked_ttl_s`, on every route alike.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import NO_ROOTS_CAPS, RawClient, Reply, RunningProxy, accept_name, running_proxy
from e2e.recording import Recording, Sent, recording_relay
from e2e.replicas import cluster, log_lines, url_of
from e2e.test_aggregate import stdio, text_of
from e2e.test_tasks import TASKS_EXT, created, wait_for
from proxy.config import RouteConfig, RouteMember, TasksConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

WORK = {"delay_s": 0, "after_s": 30}  # work_then_ask: elicits at once, then works 30 s


@dataclass
class Setup:
    proxy: RunningProxy
    relay: Recording

    def client(self, http: aiohttp.ClientSession, **caps: Any) -> RawClient:
        url = self.proxy.url.replace("/mcp", "/servers/pair/mcp")
        return RawClient(url, http, capabilities={**NO_ROOTS_CAPS, **caps})


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pair(fastmcp_url: str) -> AsyncIterator[Setup]:
    """server-memory (stdio) first, FastMCP behind a recording relay second, on the route `pair`."""
    route = RouteConfig("pair", (RouteMember("memory"), RouteMember("fast")))
    async with (
        recording_relay(fastmcp_url) as relay,
        running_proxy(
            relay.url,
            names=("fast",),
            extra=(stdio("memory", peers.server_memory_entry()),),
            routes=(route,),
            tasks=TasksConfig(policy="always", poll_interval_ms=50),  # only for clients that declare it
        ) as proxy,
    ):
        relay.flowing.set()
        yield Setup(proxy, relay)


def calls_of(relay: Recording, tool: str) -> list[Sent]:
    return [s for s in relay.posts("tools/call") if s.message["params"]["name"] == tool]


def cancels_of(relay: Recording, call: Sent) -> list[Sent]:
    return [
        s
        for s in relay.posts("notifications/cancelled")
        if s.message["params"]["requestId"] == call.message["id"]
    ]


async def test_a_client_closing_its_resumed_rounds_stream_cancels_the_call_upstream(pair: Setup) -> None:
    async with aiohttp.ClientSession() as http:
        client = pair.client(http)
        first = await client.call("fast__work_then_ask", WORK)
        assert first.result["resultType"] == "input_required", first.body
        (call,) = calls_of(pair.relay, "work_then_ask")  # the member's own name upstream
        answers_before = len(pair.relay.posts("response"))
        (key,) = first.result["inputRequests"]
        resumed = asyncio.create_task(
            client.retry(first, {key: accept_name("Ada")}, "fast__work_then_ask", WORK)
        )
        await eventually(
            lambda: len(pair.relay.posts("response")) > answers_before, "the answer to reach upstream"
        )
        resumed.cancel()  # the client gives up on the running round: its connection closes
        with pytest.raises(asyncio.CancelledError):
            await resumed
        (cancel,) = await eventually(lambda: cancels_of(pair.relay, call), "notifications/cancelled upstream")
        assert cancel.message["params"]["reason"].endswith("the client went away")
        assert len(calls_of(pair.relay, "work_then_ask")) == 1  # ended, never re-run


async def test_tasks_cancel_of_a_task_parked_on_elicitation_cancels_it_upstream(pair: Setup) -> None:
    async with aiohttp.ClientSession() as http:
        client = pair.client(http, extensions={TASKS_EXT: {}})
        before = len(calls_of(pair.relay, "work_then_ask"))
        task = created(await client.call("fast__work_then_ask", WORK))
        asking = await wait_for(client, task["taskId"], "input_required")
        assert list(asking["inputRequests"]) == ["elicit-1"]
        call = calls_of(pair.relay, "work_then_ask")[before]
        ack = await client.request("tasks/cancel", {"taskId": task["taskId"]})
        assert "error" not in ack.body, ack.body
        await eventually(lambda: cancels_of(pair.relay, call), "notifications/cancelled upstream")
        done = await wait_for(client, task["taskId"], "cancelled")
        assert done["status"] == "cancelled"


async def test_a_notification_cancelled_for_a_parked_call_is_ignored_as_on_a_single_route(
    pair: Setup,
) -> None:
    """Both routes alike: 202, nothing sent upstream, and the call is still resumable."""
    async with aiohttp.ClientSession() as http:
        for route in ("pair", "fast"):
            client = RawClient(
                pair.proxy.url.replace("/mcp", f"/servers/{route}/mcp"),
                http,
                capabilities=dict(NO_ROOTS_CAPS),
            )
            tool = "fast__ask_name" if route == "pair" else "ask_name"
            first = await client.call(tool)
            (call,) = calls_of(pair.relay, "ask_name")[-1:]
            body = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": first.body["id"], "reason": "changed my mind"},
            }
            async with http.post(client.url, json=body, headers=client.headers(body)) as resp:
                assert resp.status == 202
            final = await client.retry(first, {"elicit-1": accept_name("Still")}, tool)
            assert text_of(final) == "accept:Still"
            assert not cancels_of(pair.relay, call)


async def park(client: RawClient, tool: str) -> Reply:
    first = await client.call(tool)
    assert first.result["resultType"] == "input_required", first.body
    return first


def lines_of(replica: peers.PeerProcess, event: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(replica) if line.get("event") == event]


def fleet_config(fast: str, everything: str) -> dict[str, Any]:
    return {
        "upstreams": [{"name": "everything", "url": everything}, {"name": "fast", "url": fast}],
        "routes": [{"name": "fleet", "default": True, "upstreams": ["everything", "fast"]}],
    }


async def test_a_retry_on_another_replica_is_forwarded_to_the_owner_on_the_aggregate() -> None:
    async with (
        peers.start_fastmcp() as fast,
        peers.start_server_everything() as everything,
        cluster(str(fast), 2, more=fleet_config(str(fast), str(everything))) as group,
        aiohttp.ClientSession() as http,
    ):
        owner, other = group.replicas
        first = await park(RawClient(url_of(owner), http, capabilities=dict(NO_ROOTS_CAPS)), "fast__ask_name")
        elsewhere = RawClient(url_of(other), http, capabilities=dict(NO_ROOTS_CAPS))
        final = await elsewhere.retry(first, {"elicit-1": accept_name("Fwd")}, "fast__ask_name")
        assert text_of(final) == "accept:Fwd"

        def served() -> list[dict[str, Any]]:
            return [
                line
                for line in lines_of(owner, "request")
                if line.get("forwarded_by") and line.get("tool") == "fast__ask_name"
            ]

        (line,) = await eventually(served, "the owner's line for the forwarded retry")
        assert line["route"] == "fleet" and line["upstream"] == "fast", line
        assert not lines_of(other, "call.taken_over")


async def test_owner_killed_the_survivor_takes_over_the_members_call() -> None:
    """FastMCP with an event store can resume its stream: the handle names the member upstream (`fast`,
    under its own tool name), so the survivor adopts the call there and the client gets the real result."""
    async with (
        peers.start_fastmcp(event_store=True) as fast,
        peers.start_server_everything() as everything,
        cluster(str(fast), 2, more=fleet_config(str(fast), str(everything))) as group,
        aiohttp.ClientSession() as http,
    ):
        owner, other = group.replicas
        first = await park(RawClient(url_of(owner), http, capabilities=dict(NO_ROOTS_CAPS)), "fast__ask_name")
        owner.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(owner.process.wait(), 10)
        survivor = RawClient(url_of(other), http, capabilities=dict(NO_ROOTS_CAPS))
        final = await survivor.retry(first, {"elicit-1": accept_name("Rescued")}, "fast__ask_name")
        assert final.status == 200 and text_of(final) == "accept:Rescued", final.body
        (taken,) = lines_of(other, "call.taken_over")
        assert taken["upstream"] == "fast", taken
