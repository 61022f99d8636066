"""The scale-out suite against a second legacy server nobody here wrote: server-everything (TypeScript SDK,
Streamable HTTP with an in-memory event store) behind 3 replicas and real nginx (issue 16).

server-everything's tools cannot count their own runs (FastMCP's fixture can: test_cluster_keys.py), so a
recording relay between the replicas and the server counts what reached it: every flow must cost exactly
one upstream `tools/call`, and every elicitation answer must arrive once. Its tools answer at once after an
elicitation answer, so "the owner dies after taking a forwarded retry" is staged by the relay holding the
upstream's result back until the owner is dead (the upstream is resumable: the survivor takes over); a
round cut by drain is staged with trigger-long-running-operation."""

from __future__ import annotations

import asyncio
import collections
import signal
from typing import Any

import aiohttp
import peers
import pytest
from waiting import eventually

from e2e.harness import EVERYTHING_FORM, RawClient, Reply
from e2e.recording import Recording, recording_relay
from e2e.replicas import (
    all_replicas,
    cluster,
    flows_until,
    kid,
    log_lines,
    readyz,
    round_robin,
    url_of,
)
from proxy.handle import generate_key_b64

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

TOOL = "trigger-elicitation-request"
CAPS = {"elicitation": {}}
CLIENTS, PARKED, STAGGER_S = 3, 4, 1.0


def answer(name: str) -> dict[str, Any]:
    """A complete, valid answer to server-everything's elicitation form, under `name`."""
    return {"action": "accept", "content": {**EVERYTHING_FORM, "name": name}}


def text_of(reply: Reply) -> str:
    return " ".join(part.get("text", "") for part in reply.body.get("result", {}).get("content", []))


async def flow(client: RawClient, name: str) -> str:
    """One elicitation round and its answer; "ok" or what went wrong."""
    first = await client.call(TOOL)
    if first.body.get("result", {}).get("resultType") != "input_required":
        return f"first: {first.status} {first.body}"
    (key,) = first.result["inputRequests"]
    final = await client.retry(first, {key: answer(name)}, TOOL)
    return "ok" if f"- Name: {name}" in text_of(final) else f"end: {final.status} {final.body}"


async def park(client: RawClient, count: int) -> list[Reply]:
    firsts = list(await asyncio.gather(*(client.call(TOOL) for _ in range(count))))
    assert all(f.result["resultType"] == "input_required" for f in firsts), [f.body for f in firsts]
    return firsts


async def resume_all(client: RawClient, firsts: list[Reply], tag: str) -> list[bool]:
    replies = await asyncio.gather(
        *(
            client.retry(f, {next(iter(f.result["inputRequests"])): answer(f"{tag}{i}")}, TOOL)
            for i, f in enumerate(firsts)
        )
    )
    return [f"- Name: {tag}{i}" in text_of(r) for i, r in enumerate(replies)]


def ran_twice(relay: Recording, flows_started: int) -> tuple[int, int]:
    """(upstream tools/call count - flows started, elicitation answers delivered more than once)."""
    calls = len(relay.posts("tools/call"))
    answers = collections.Counter(
        s.message["result"]["content"]["name"]
        for s in relay.posts("response")
        if isinstance(s.message.get("result"), dict) and "content" in s.message["result"]
    )
    return calls - flows_started, sum(1 for n in answers.values() if n > 1)


async def test_rolling_rotation_on_server_everything_loses_no_flow() -> None:
    """The documented two-step rotation rolled across 3 replicas (a Secret reaching pods 1 s apart) with
    flows running through plain round robin and calls parked under each key: no flow fails, every parked
    call resumes, and the upstream saw each call and each answer exactly once."""
    old, new = generate_key_b64(), generate_key_b64()
    async with (
        peers.start_server_everything() as everything,
        recording_relay(everything) as relay,
        cluster(relay.url, 3, keys={"0-current": old}, peer_ports=True) as group,
        round_robin(group.replicas) as lb,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(lb, http, capabilities=CAPS)
        parked = await park(client, PARKED)
        stop, tally = asyncio.Event(), collections.Counter[str]()
        runners = [asyncio.create_task(flows_until(stop, flow, client, i, tally)) for i in range(CLIENTS)]
        try:
            for i in range(3):  # step 1: the new key reaches each replica as `next` (unseal only)
                group.write_keys(i, {"0-current": old, "2-next": new})
                await asyncio.sleep(STAGGER_S)  # the scenario: a rollout staggered across replicas
            await eventually(
                lambda: all_replicas(http, group, lambda k: kid(new) in [x["key_id"] for x in k["keys"]]),
                "every replica to hold the next key",
            )
            parked += await park(client, PARKED)
            for i in range(3):  # step 2: promoted
                group.write_keys(i, {"0-current": new, "1-previous": old})
                await asyncio.sleep(STAGGER_S)  # the scenario: a rollout staggered across replicas
            await eventually(
                lambda: all_replicas(http, group, lambda k: k["sealing"] == kid(new)), "sealing anew"
            )
            parked += await park(client, PARKED)
            await asyncio.sleep(STAGGER_S)  # the scenario: a rollout staggered across replicas
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*runners), 60)
        resumed = await resume_all(client, parked, "p")
        extra_calls, twice = ran_twice(relay, tally["ok"] + tally["failed"] + len(parked))
        print(f"server-everything rotation: flows {dict(tally)}; parked {len(parked)}; ran twice {twice}")
        assert tally["failed"] == 0, dict(tally)
        assert tally["ok"] > 0
        assert resumed == [True] * len(parked)
        assert (extra_calls, twice) == (0, 0)
        assert not [
            line for r in group.replicas for line in log_lines(r) if line.get("outcome") == "handle_rejected"
        ]


async def test_a_wrong_key_replica_in_front_of_server_everything_loses_no_healthy_call() -> None:
    good, wrong = generate_key_b64(), generate_key_b64()
    keys = [{"0-current": good}, {"0-current": good}, {"0-current": wrong}]
    async with (
        peers.start_server_everything() as everything,
        recording_relay(everything) as relay,
        cluster(relay.url, 3, keys=keys, peer_ports=True, replica={"peer_check_s": 1}) as group,
        aiohttp.ClientSession() as http,
    ):
        odd = group.replicas[2]

        async def odd_refused() -> bool:
            status, body = await readyz(http, odd)
            return status == 503 and body["status"] == "key_mismatch"

        await eventually(odd_refused, "the odd replica to refuse readiness")
        parked = await park(RawClient(url_of(group.replicas[0]), http, capabilities=CAPS), PARKED)
        parked += await park(RawClient(url_of(group.replicas[1]), http, capabilities=CAPS), PARKED)
        async with round_robin(group.replicas, next_upstream=True) as lb:
            client = RawClient(lb, http, capabilities=CAPS)
            resumed = await resume_all(client, parked, "h")
            flows = await asyncio.gather(*(flow(client, f"n{i}") for i in range(CLIENTS * 3)))
        extra_calls, twice = ran_twice(relay, len(parked) + len(flows))
        tally = dict(collections.Counter(flows))
        print(f"server-everything wrong key: resumed {sum(resumed)}/{len(parked)}; flows {tally}")
        assert resumed == [True] * len(parked)
        assert flows == ["ok"] * len(flows)
        assert (extra_calls, twice) == (0, 0)
        assert any(line.get("event") == "handle.key_not_held" for line in log_lines(odd)), (
            "nothing reached it"
        )


async def test_drain_cutting_a_running_round_on_server_everything_says_the_replica_shut_down() -> None:
    """A long operation still running when the drain grace ends: the client is told the replica shut down
    (-31011, not an upstream failure), the upstream is told to cancel, and the process exits cleanly."""
    async with (
        peers.start_server_everything() as everything,
        recording_relay(everything) as relay,
        cluster(relay.url, 1, calls={"drain_grace_s": 1}) as group,
        aiohttp.ClientSession() as http,
    ):
        replica = group.replicas[0]
        client = RawClient(url_of(replica), http, capabilities=CAPS)
        running = asyncio.create_task(
            client.call("trigger-long-running-operation", {"duration": 30, "steps": 30})
        )

        async def reached() -> bool:
            return bool(relay.posts("tools/call"))

        await eventually(reached, "the call to reach the upstream")
        replica.process.send_signal(signal.SIGTERM)
        reply = await asyncio.wait_for(running, 30)
        assert await asyncio.wait_for(replica.process.wait(), 30) == 0
        assert reply.error["code"] == -31011, reply.body
        assert reply.error["message"].startswith("This proxy replica shut down while the call was running")
        assert len(relay.posts("notifications/cancelled")) == 1  # the upstream was told


async def test_owner_dies_after_taking_a_forwarded_retry_on_server_everything() -> None:
    """server-everything keeps an event store, so it is resumable: the owner takes a forwarded retry,
    delivers the answer upstream and dies before the result (held back by the relay) reaches it; the
    survivor takes the call over and the client gets the tool's real result — one tools/call, the answer
    delivered once, never "start over"."""
    async with (
        peers.start_server_everything() as everything,
        recording_relay(everything) as relay,
        cluster(relay.url, 2, peer_ports=True) as group,
        aiohttp.ClientSession() as http,
    ):
        owner, other = group.replicas
        first = await RawClient(url_of(owner), http, capabilities=CAPS).call(TOOL)
        assert first.result["resultType"] == "input_required", first.body
        (key,) = first.result["inputRequests"]
        relay.flowing.clear()  # the upstream's result will not reach the owner
        survivor = RawClient(url_of(other), http, capabilities=CAPS)
        retry = asyncio.create_task(survivor.retry(first, {key: answer("Taken")}, TOOL))

        async def delivered() -> bool:
            return bool(relay.posts("response"))

        # The survivor has not met the upstream yet: it forwards the retry at once, without probing the
        # upstream's era first (a probe would wait here on the held-back relay until initialize_s passed).
        await eventually(delivered, "the owner to deliver the forwarded answer upstream", 10)
        probes = [s for s in relay.sent if s.message and s.message.get("method") == "server/discover"]
        assert len(probes) == 1, "only the owner probed the era (for its first call)"
        owner.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(owner.process.wait(), 10)
        relay.flowing.set()
        reply = await asyncio.wait_for(retry, 60)
        extra_calls, answered_twice = ran_twice(relay, 1)
        print(
            f"server-everything owner died: tool ran twice {extra_calls}; answer sent twice {answered_twice}"
        )
        assert "start over" not in str(reply.body)
        assert "- Name: Taken" in text_of(reply), reply.body
        assert any(line.get("event") == "call.taken_over" for line in log_lines(other))
        assert extra_calls == 0  # one upstream tools/call: the tool ran once
        # The survivor cannot know the owner delivered the answer, so it delivers it again on the same
        # session (docs/scale-out.md: "an input delivered twice is answered twice: the upstream ignores the
        # second" — a JSON-RPC response to a request id already answered), then resumes the stream.
        assert answered_twice == 1
        resumes = [s for s in relay.sent if s.method == "GET" and s.headers.get("last-event-id")]
        assert len(resumes) == 1, "the survivor resumed the owner's stream from its last event id"
