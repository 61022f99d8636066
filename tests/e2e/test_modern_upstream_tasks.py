"""The Tasks extension (SEP-2663) through the native relay (front/modern/relay/tasks.py), against a scripted
2026-07-28 upstream (tests/e2e/modern_scripted.py): no installed peer serves `tasks/*` at 2026-07-28
(FastMCP 4.2.3 needs the separate `fastmcp-tasks` package, the mcp 2.3.0 SDK's server has none). And a bound
relay's large upstream requestState (handle/relay_state.py), which the same upstream makes to measure.

Where the upstream cannot tell users apart, its task id is bound to the principal: another user who learns
the client's task id gets the extension's own "Task not found" and the upstream never hears of it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from e2e.harness import ALL_CAPS, RawClient, running_proxy
from e2e.modern_scripted import TASKS, ScriptedModern, big_state, scripted_modern
from proxy.config import RouteConfig, RouteMember, UpstreamConfig
from proxy.handle import HandleCodec, KeyRing
from proxy.handle.relay_state import MAX_STATE_CHARS, open_relay_state
from proxy.handle.relay_task import RelayTask, open_relay_task, seal_relay_task
from proxy.process.appstate import CODEC
from proxy.wire.sse import SSEDecoder

pytestmark = pytest.mark.asyncio(loop_scope="session")

CAPS = {**ALL_CAPS, "extensions": {TASKS: {}}}
NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}


@pytest_asyncio.fixture(loop_scope="session")
async def upstream() -> AsyncIterator[ScriptedModern]:
    async with scripted_modern() as server:
        yield server


def client(url: str, http: aiohttp.ClientSession, who: str) -> RawClient:
    return RawClient(url, http, capabilities=dict(CAPS), authorization=f"Bearer {who}")


async def test_a_bound_upstreams_task_id_is_the_owners_alone(upstream: ScriptedModern) -> None:
    """No client credential goes upstream (forward_headers: []): Alice's task comes back under a sealed
    handle; Mallory replaying it (tasks/get, tasks/update, tasks/cancel) or guessing the upstream's own id
    gets "Task not found"; Alice gets the real data, under the same handle."""
    config = UpstreamConfig(name="default", url=upstream.url, forward_headers=(), era="modern")
    async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
        alice, mallory = client(proxy.url, http, "alice"), client(proxy.url, http, "mallory")
        created = await alice.call("job", {"text": "secret"})
        handle = created.result["taskId"]
        assert created.result["resultType"] == "task" and created.result["status"] == "working"
        inner = open_relay_task(proxy.app[CODEC], handle, time.time())  # the proxy's handle (format 8)
        assert inner.task == "task-1" and "task-1" not in handle
        assert 60 <= inner.expires_at - time.time() <= 60 + 61  # the task's ttlMs, and a minute's grace
        seen = len(upstream.seen)
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            stolen = await mallory.request(method, {"taskId": handle})
            assert stolen.error == NOT_FOUND, method
        guessed = await mallory.request("tasks/get", {"taskId": "task-1"})
        assert guessed.error == NOT_FOUND
        assert len(upstream.seen) == seen  # none of them reached the upstream
        got = await alice.request("tasks/get", {"taskId": handle})
        assert got.result["status"] == "completed" and got.result["taskId"] == handle
        assert got.result["result"]["content"][0]["text"] == "job:secret"
        assert (await alice.request("tasks/update", {"taskId": handle, "inputResponses": {}})).result == {
            "resultType": "complete"
        }
        cancelled = await alice.request("tasks/cancel", {"taskId": handle})
        assert cancelled.result["status"] == "cancelled" and cancelled.result["taskId"] == handle
        assert upstream.task_ids_seen() == ["task-1"] * 3  # the upstream's own id, Mcp-Name checked too
        elsewhere = seal_relay_task(HandleCodec(KeyRing.ephemeral()), inner)  # a key this replica lacks
        unheld = await alice.request("tasks/get", {"taskId": elsewhere})
        assert (unheld.status, unheld.error["code"]) == (503, -31012)  # another replica may hold it
        expired = seal_relay_task(proxy.app[CODEC], RelayTask("default", inner.principal, "task-1", 1))
        late = await alice.request("tasks/get", {"taskId": expired})
        assert late.error == {"code": -32602, "message": "Failed to retrieve task: Task has expired"}


async def test_tasks_list_is_refused_where_the_upstream_cannot_scope_it(upstream: ScriptedModern) -> None:
    """The upstream would list every user's tasks (it cannot tell them apart): on a bound upstream the
    proxy refuses tasks/list (and any tasks/* method SEP-2663 does not define) with -32601."""
    config = UpstreamConfig(name="default", url=upstream.url, forward_headers=(), era="modern")
    async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
        alice = client(proxy.url, http, "alice")
        await alice.call("job", {"text": "a"})
        listed = await alice.request("tasks/list")
        assert listed.status == 404 and listed.error["code"] == -32601
        assert "cannot tell users apart" in listed.error["message"]
        result = await alice.request("tasks/result", {"taskId": "task-1"})
        assert result.error["code"] == -32601
        assert not any(m["method"] in ("tasks/list", "tasks/result") for m in upstream.seen)


async def test_listen_shows_a_listener_only_its_own_tasks(upstream: ScriptedModern) -> None:
    """subscriptions/listen taskIds take the handles; the careless upstream then tells of every task it
    holds, and only the listener's own reaches it, under its handle. Another's handle in taskIds: refused."""
    config = UpstreamConfig(name="default", url=upstream.url, forward_headers=(), era="modern")
    async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
        alice, bob = client(proxy.url, http, "alice"), client(proxy.url, http, "bob")
        mine = (await alice.call("job", {"text": "alice's"})).result["taskId"]
        theirs = (await bob.call("job", {"text": "bob's"})).result["taskId"]
        notes = await listen(alice, [mine])
        assert notes[0]["method"] == "notifications/subscriptions/acknowledged"
        assert notes[0]["params"]["notifications"]["taskIds"] == [mine]
        told = [n["params"] for n in notes if n["method"] == "notifications/tasks"]
        assert [(t["taskId"], t["result"]["content"][0]["text"]) for t in told] == [(mine, "job:alice's")]
        refused = await alice.request("subscriptions/listen", {"notifications": {"taskIds": [mine, theirs]}})
        assert refused.error == NOT_FOUND


async def test_an_upstream_that_tells_users_apart_keeps_its_own_task_ids(upstream: ScriptedModern) -> None:
    """The client's own credential goes upstream (the default forward_headers): the upstream binds its
    tasks itself, and every tasks/* passes untouched (tasks/list included)."""
    config = UpstreamConfig(name="default", url=upstream.url, era="modern")
    async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
        alice = client(proxy.url, http, "alice")
        created = await alice.call("job", {"text": "plain"})
        assert created.result["taskId"] == "task-1"
        got = await alice.request("tasks/get", {"taskId": "task-1"})
        assert got.result["result"]["content"][0]["text"] == "job:plain"
        assert [t["taskId"] for t in (await alice.request("tasks/list")).result["tasks"]] == ["task-1"]


async def listen(who: RawClient, task_ids: list[str]) -> list[dict[str, Any]]:
    body = who.body("subscriptions/listen", {"notifications": {"taskIds": task_ids}})
    async with who.http.post(who.url, json=body, headers=who.headers(body)) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        async with asyncio.timeout(10):
            raw = await resp.read()  # the scripted upstream ends its stream after its notifications
    messages = [json.loads(e.data) for e in SSEDecoder().feed(raw) if e.data.strip()]
    return [m for m in messages if "method" in m]


async def test_a_bound_relay_carries_a_large_upstream_state_and_refuses_one_beyond_its_max(
    upstream: ScriptedModern,
) -> None:
    """A 20 KB requestState (random, as a sealed SDK state: nothing to deflate) is bound and relayed, and
    the upstream gets it back intact; one beyond MAX_STATE_CHARS gets a clear error, not a broken handle."""
    config = UpstreamConfig(name="default", url=upstream.url, forward_headers=(), era="modern")
    async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
        alice, mallory = client(proxy.url, http, "alice"), client(proxy.url, http, "mallory")
        first = await alice.call("big", {"size": 20_000})
        wrapped = first.result["requestState"]
        assert open_relay_state(proxy.app[CODEC], wrapped, time.time()).state == big_state(20_000)
        answers = {"name": {"action": "accept", "content": {"name": "Ada"}}}
        stolen = await mallory.call("big", {"size": 20_000}, inputResponses=answers, requestState=wrapped)
        assert stolen.error == {"code": -32602, "message": "Invalid requestState"}
        done = await alice.call("big", {"size": 20_000}, inputResponses=answers, requestState=wrapped)
        assert done.result["content"][0]["text"] == "big:Ada:20000"
        over = await alice.call("big", {"size": MAX_STATE_CHARS + 1})
        assert over.error == {
            "code": -31001,
            "message": "Upstream 'default' gave a requestState the proxy cannot bind to you (requestState "
            f"of {MAX_STATE_CHARS + 1} characters; at most {MAX_STATE_CHARS})",
        }


async def test_an_aggregated_route_sends_a_bound_task_to_the_upstream_that_issued_it() -> None:
    """Two bound modern upstreams behind one route: a task of the second member comes back under its
    handle, which names that member, so the route's tasks/get reaches it (not the route's first member),
    and another principal still gets "Task not found"."""
    async with scripted_modern() as one, scripted_modern() as two:
        members = (
            UpstreamConfig(name="one", url=one.url, forward_headers=(), era="modern"),
            UpstreamConfig(name="two", url=two.url, forward_headers=(), era="modern"),
        )
        route = RouteConfig("both", (RouteMember("one"), RouteMember("two")))
        async with (
            running_proxy(members[0], names=("one",), extra=members[1:], routes=(route,)) as proxy,
            aiohttp.ClientSession() as http,
        ):
            url = proxy.url.replace("/mcp", "/servers/both/mcp")
            alice, mallory = client(url, http, "alice"), client(url, http, "mallory")
            handle = (await alice.call("two__job", {"text": "second"})).result["taskId"]
            assert two.tasks and not one.tasks
            got = await alice.request("tasks/get", {"taskId": handle})
            assert got.result["taskId"] == handle
            assert got.result["result"]["content"][0]["text"] == "job:second"
            assert (await mallory.request("tasks/get", {"taskId": handle})).error == NOT_FOUND
            assert not one.task_ids_seen()
