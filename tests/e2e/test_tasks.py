"""The Tasks extension (SEP-2663) in front of FastMCP 1.30: legacy calls answered with tasks, on the wire.

A legacy tool that elicits runs as a task: working → input_required → tasks/update → working → completed;
cancel mid-way reaches the upstream; partial updates; the after_ms policy composes MRTR rounds with a task;
forced tools need the extension (-32021); task ids are bound to their principal and expire with their TTL.
The TypeScript ext-tasks client drives a task end to end in tests/e2e/test_tasks_ts.py.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import ALL_CAPS, RawClient, Reply, RunningProxy, accept_name, running_proxy
from e2e.replicas import log_lines, replica_set, url_of
from proxy.config import TasksConfig
from proxy.process.app import TASKS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

TASKS_EXT = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {**ALL_CAPS, "extensions": {TASKS_EXT: {}}}
TERMINAL = ("completed", "failed", "cancelled")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def always(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    async with running_proxy(fastmcp_url, tasks=TasksConfig(policy="always", poll_interval_ms=50)) as proxy:
        yield proxy


def tasks_client(url: str, http: aiohttp.ClientSession, **kwargs: Any) -> RawClient:
    return RawClient(url, http, capabilities=dict(WITH_TASKS), **kwargs)


async def get(client: RawClient, task_id: str) -> dict[str, Any]:
    reply = await client.request("tasks/get", {"taskId": task_id})
    assert reply.status == 200, reply.body
    return reply.result


async def wait_for(client: RawClient, task_id: str, *statuses: str, limit_s: float = 10.0) -> dict[str, Any]:
    """Poll tasks/get (bounded) until the task has one of `statuses`; a task ended otherwise fails at once."""

    async def reached() -> dict[str, Any] | None:
        task = await get(client, task_id)
        assert task["status"] in statuses or task["status"] not in TERMINAL, task
        return task if task["status"] in statuses else None

    return await eventually(reached, f"task {task_id} to be {' or '.join(statuses)}", limit_s)


async def plain_text(client: RawClient, tool: str) -> str:
    """A tool's text, called WITHOUT the extension (so never as a task)."""
    plain = RawClient(client.url, client.http, authorization=client.authorization)
    text: str = (await plain.call(tool)).result["content"][0]["text"]
    return text


def created(reply: Reply) -> dict[str, Any]:
    result = reply.result
    assert result["resultType"] == "task", result
    assert not {"result", "error", "inputRequests", "requestState"} & result.keys(), result
    return result


async def test_discover_advertises_the_extension(always: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        caps = (await tasks_client(always.url, http).request("server/discover")).result["capabilities"]
    assert caps["extensions"] == {TASKS_EXT: {}}
    assert "tasks" not in caps  # never the 2025-11-25 experimental capability
    assert "tools" in caps


async def test_a_task_that_elicits_working_input_required_update_completed(always: RunningProxy) -> None:
    live_before = always.live  # the module's proxy: what this test leaves
    async with aiohttp.ClientSession() as http:
        client = tasks_client(always.url, http)
        task = created(await client.call("work_then_ask", {"delay_s": 0.6, "after_s": 0.6}))
        task_id = task["taskId"]
        assert task["status"] == "working"
        assert task["ttlMs"] == 3600000 and task["pollIntervalMs"] == 50
        assert task["createdAt"].endswith("Z") and task["lastUpdatedAt"].endswith("Z")
        assert (await get(client, task_id))["status"] == "working"  # durably created, still working

        asking = await wait_for(client, task_id, "input_required")
        assert list(asking["inputRequests"]) == ["elicit-1"]
        request = asking["inputRequests"]["elicit-1"]
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "What is your name?"
        assert asking["resultType"] == "complete"
        assert (await get(client, task_id))["inputRequests"] == asking["inputRequests"]  # a stable snapshot

        ack = await client.request(
            "tasks/update",
            {"taskId": task_id, "inputResponses": {"elicit-1": accept_name("Ada"), "never-asked": {}}},
        )
        assert ack.result == {"resultType": "complete"}
        after = await get(client, task_id)
        assert after["status"] == "working" and "inputRequests" not in after

        done = await wait_for(client, task_id, *TERMINAL)
        assert done["status"] == "completed", done
        assert done["result"]["content"][0]["text"] == "worked:accept:Ada"
        assert done["result"]["resultType"] == "complete"
        # An answered key is ignored from now on; the finished task stays readable.
        again = await client.request(
            "tasks/update", {"taskId": task_id, "inputResponses": {"elicit-1": accept_name("Eve")}}
        )
        assert again.result == {"resultType": "complete"}
        assert (await get(client, task_id))["result"] == done["result"]
    assert always.live == live_before


async def test_cancel_a_running_task_cancels_it_upstream(always: RunningProxy) -> None:
    live_before = always.live  # the module's proxy: what this test leaves
    async with aiohttp.ClientSession() as http:
        client = tasks_client(always.url, http)
        before = await plain_text(client, "side_effects")
        task_id = created(await client.call("slow_count", {"delay_s": 1.5}))["taskId"]
        await eventually(lambda: always.live > live_before, "the task's call to run in the proxy", 10)
        ack = await client.request("tasks/cancel", {"taskId": task_id})
        assert ack.result == {"resultType": "complete"}
        cancelled = await get(client, task_id)
        assert cancelled["status"] == "cancelled"
        assert always.live == live_before
        await asyncio.sleep(
            1.6
        )  # a negative check: past the tool's sleep, had it not been cancelled it would have counted
        assert await plain_text(client, "side_effects") == before
        # Cancelling a finished task is the same empty ack, and changes nothing.
        assert (await client.request("tasks/cancel", {"taskId": task_id})).result == {
            "resultType": "complete"
        }
        assert (await get(client, task_id))["status"] == "cancelled"


async def test_cancel_while_input_is_required(always: RunningProxy) -> None:
    live_before = always.live  # the module's proxy: what this test leaves
    async with aiohttp.ClientSession() as http:
        client = tasks_client(always.url, http)
        task_id = created(await client.call("ask_name"))["taskId"]
        await wait_for(client, task_id, "input_required")
        await client.request("tasks/cancel", {"taskId": task_id})
        assert (await get(client, task_id))["status"] == "cancelled"
        # The parked legacy elicitation was answered `cancel`: the tool finished with that answer.

        async def finished() -> bool:
            return (await plain_text(client, "outcomes")).split(",")[-1] == "cancel"

        await eventually(finished, "the tool to finish with the `cancel` answer")
    assert always.live == live_before


async def test_partial_update_leaves_the_other_request_outstanding(always: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = tasks_client(always.url, http)
        task_id = created(await client.call("ask_two_at_once"))["taskId"]
        asking = await wait_for(client, task_id, "input_required")
        assert sorted(asking["inputRequests"]) == ["elicit-1", "elicit-2"]
        first, second = sorted(asking["inputRequests"])
        await client.request("tasks/update", {"taskId": task_id, "inputResponses": {first: accept_name()}})
        left = await get(client, task_id)
        assert left["status"] == "input_required"
        assert list(left["inputRequests"]) == [second]
        color = {"action": "accept", "content": {"color": "blue"}}
        await client.request("tasks/update", {"taskId": task_id, "inputResponses": {second: color}})
        done = await wait_for(client, task_id, *TERMINAL)
    assert done["result"]["content"][0]["text"] == "accept:Alice|accept:blue"


async def test_a_malformed_answer_is_refused_and_delivers_nothing(always: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = tasks_client(always.url, http)
        task_id = created(await client.call("ask_name"))["taskId"]
        await wait_for(client, task_id, "input_required")
        bad = await client.request(
            "tasks/update", {"taskId": task_id, "inputResponses": {"elicit-1": {"action": "maybe"}}}
        )
        assert bad.error["code"] == -32602 and "elicit-1" in bad.error["message"]
        assert (await get(client, task_id))["status"] == "input_required"
        await client.request(
            "tasks/update", {"taskId": task_id, "inputResponses": {"elicit-1": accept_name()}}
        )
        done = await wait_for(client, task_id, *TERMINAL)
    assert done["result"]["content"][0]["text"] == "accept:Alice"


async def test_tool_error_completes_and_protocol_error_fails(fastmcp_url: str) -> None:
    tasks = TasksConfig(policy="always")
    async with (
        running_proxy(fastmcp_url, tasks=tasks, call_timeout_s=0.5) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = tasks_client(proxy.url, http)
        tool_error = created(await client.call("add", {"a": "x", "b": 1}))["taskId"]
        done = await wait_for(client, tool_error, *TERMINAL)
        assert done["status"] == "completed" and done["result"]["isError"] is True
        silent = created(await client.call("slow_echo", {"text": "late", "delay_s": 2}))["taskId"]
        failed = await wait_for(client, silent, *TERMINAL)
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"]["code"] == -31004  # the upstream did not answer within calls.call_timeout_s
    assert failed["statusMessage"] == failed["error"]["message"]


async def test_after_ms_keeps_fast_calls_and_input_rounds_synchronous(fastmcp_url: str) -> None:
    """MRTR first, then a task: a tool that asks at once gets an input_required round; once the retry runs
    past after_ms, the client gets the task (SEP-2663: MRTR exchanges resolved before the task exists)."""
    tasks = TasksConfig(policy="after_ms", after_ms=300)
    async with running_proxy(fastmcp_url, tasks=tasks) as proxy, aiohttp.ClientSession() as http:
        client = tasks_client(proxy.url, http)
        fast = await client.call("echo", {"text": "now"})
        assert fast.result["resultType"] == "complete"
        arguments = {"delay_s": 0, "after_s": 1.0}
        first = await client.call("work_then_ask", arguments)
        assert first.result["resultType"] == "input_required" and "taskId" not in first.result
        second = await client.retry(first, {"elicit-1": accept_name("Bo")}, "work_then_ask", arguments)
        task = created(second)
        done = await wait_for(client, task["taskId"], *TERMINAL)
        assert done["result"]["content"][0]["text"] == "worked:accept:Bo"
        slow = created(await client.call("slow_echo", {"text": "later", "delay_s": 0.8}))
        assert (await wait_for(client, slow["taskId"], *TERMINAL))["result"]["content"][0]["text"] == "later"


async def test_on_elicit_turns_the_first_question_into_a_task(fastmcp_url: str) -> None:
    async with (
        running_proxy(fastmcp_url, tasks=TasksConfig(policy="on_elicit")) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = tasks_client(proxy.url, http)
        assert (await client.call("echo", {"text": "x"})).result["resultType"] == "complete"
        task = created(await client.call("ask_name"))
        assert task["status"] == "input_required"
        asking = await get(client, task["taskId"])
        assert list(asking["inputRequests"]) == ["elicit-1"]
        update = {"taskId": task["taskId"], "inputResponses": {"elicit-1": accept_name()}}
        await client.request("tasks/update", update)
        done = await wait_for(client, task["taskId"], *TERMINAL)
    assert done["result"]["content"][0]["text"] == "accept:Alice"


async def test_a_client_without_the_extension_never_gets_a_task(always: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        plain = RawClient(always.url, http)
        assert (await plain.call("echo", {"text": "x"})).result["resultType"] == "complete"
        asking = await plain.call("ask_name")
        assert asking.result["resultType"] == "input_required"
        assert (await plain.retry(asking, {"elicit-1": accept_name()}, "ask_name")).result["resultType"] == (
            "complete"
        )
        task_id = created(await tasks_client(always.url, http).call("echo", {"text": "y"}))["taskId"]
        for method, extra in (
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {}}),
            ("tasks/cancel", {}),
        ):
            refused = await plain.request(method, {"taskId": task_id, **extra})
            assert refused.error["code"] == -32021, method
            assert refused.error["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXT: {}}}}


async def test_forced_tools_need_the_extension(fastmcp_url: str) -> None:
    tasks = TasksConfig(policy="never", tools=("slow_echo",))
    async with running_proxy(fastmcp_url, tasks=tasks) as proxy, aiohttp.ClientSession() as http:
        refused = await RawClient(proxy.url, http).call("slow_echo", {"text": "x", "delay_s": 0})
        assert refused.error["code"] == -32021
        assert refused.error["data"]["requiredCapabilities"]["extensions"] == {TASKS_EXT: {}}
        client = tasks_client(proxy.url, http)
        assert (await client.call("echo", {"text": "x"})).result["resultType"] == "complete"  # policy never
        task = created(await client.call("slow_echo", {"text": "x", "delay_s": 0}))
        assert (await wait_for(client, task["taskId"], *TERMINAL))["status"] == "completed"


async def test_task_ids_are_bound_and_unguessable(always: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        owner = tasks_client(always.url, http, authorization="Bearer alice")
        task_id = created(await owner.call("echo", {"text": "x"}))["taskId"]
        other = tasks_client(always.url, http, authorization="Bearer mallory")
        for method, extra in (("tasks/get", {}), ("tasks/cancel", {})):
            stolen = await other.request(method, {"taskId": task_id, **extra})
            assert stolen.error == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
        for bogus in ("nope", task_id[:-2] + ("AA" if not task_id.endswith("AA") else "BB")):
            assert (await owner.request("tasks/get", {"taskId": bogus})).error["code"] == -32602
        # A task id is not a requestState, and a requestState is not a task id (key ring format versions).
        plain = RawClient(always.url, http, authorization="Bearer alice")
        asking = await plain.call("ask_name")
        state = asking.result["requestState"]
        assert (await owner.request("tasks/get", {"taskId": state})).error["code"] == -32602
        mixed = await owner.call("ask_name", inputResponses={}, requestState=task_id)
        assert mixed.error == {"code": -32602, "message": "Invalid requestState"}
        await plain.retry(asking, {"elicit-1": accept_name()}, "ask_name")
        assert (await get(owner, task_id))["status"] in ("working", "completed")
        for removed in ("tasks/result", "tasks/list"):
            assert (await owner.request(removed, {})).error["code"] == -32601


async def test_a_finished_task_is_readable_until_its_ttl(fastmcp_url: str) -> None:
    tasks = TasksConfig(policy="always", ttl_ms=1500)
    async with running_proxy(fastmcp_url, tasks=tasks) as proxy, aiohttp.ClientSession() as http:
        client = tasks_client(proxy.url, http)
        task = created(await client.call("echo", {"text": "x"}))
        assert task["ttlMs"] == 1500
        assert (await wait_for(client, task["taskId"], *TERMINAL))["status"] == "completed"
        await asyncio.sleep(1.8)  # the scenario: past the task's 1.5 s TTL
        expired = await client.request("tasks/get", {"taskId": task["taskId"]})
        assert expired.error == {"code": -32602, "message": "Failed to retrieve task: Task has expired"}
        running = created(await client.call("slow_count", {"delay_s": 5}))
        # The TTL ends mid-call: the housekeeping (every 1 s) cancels it upstream and forgets the task.
        await eventually(
            lambda: proxy.live == 0 and len(proxy.app[TASKS]) == 0,
            "the expired task's call ended and forgotten",
        )
        assert (await client.request("tasks/get", {"taskId": running["taskId"]})).error["code"] == -32602
        assert proxy.live == 0
        assert len(proxy.app[TASKS]) == 0


async def test_any_replica_routes_tasks_to_their_owner(fastmcp_url: str) -> None:
    """A task id names its owner: tasks/* sent to another replica are forwarded there, as retries are."""
    calls = {"tasks": {"policy": "always", "poll_interval_ms": 50}}
    async with replica_set(fastmcp_url, 2, calls=calls) as (owner, other), aiohttp.ClientSession() as http:
        first, second = tasks_client(url_of(owner), http), tasks_client(url_of(other), http)
        task_id = created(await first.call("work_then_ask", {"delay_s": 0, "after_s": 0}))["taskId"]
        asking = await wait_for(second, task_id, "input_required")
        update = {"taskId": task_id, "inputResponses": {"elicit-1": accept_name("Cy")}}
        assert (await second.request("tasks/update", update)).result == {"resultType": "complete"}
        done = await wait_for(second, task_id, *TERMINAL)
        assert done["result"]["content"][0]["text"] == "worked:accept:Cy"
        assert list(asking["inputRequests"]) == ["elicit-1"]
        served = [line for line in log_lines(owner) if line.get("forwarded_by") and line.get("task")]
        assert {line["method"] for line in served} >= {"tasks/get", "tasks/update"}
        # The owner goes away: its tasks are gone with it, and the other replica says so.
        running = created(await first.call("slow_echo", {"text": "x", "delay_s": 30}))["taskId"]
        owner.process.send_signal(signal.SIGKILL)
        await owner.process.wait()
        lost = await second.request("tasks/get", {"taskId": running})
    assert lost.error["code"] == -32602
    assert "its proxy replica is gone" in lost.error["message"]
