"""The peer route between real replicas: for peers only, never a second driver of one call, and after a
failure the client is told what really happened (issue 14 finding 4, issue 16 items 3 and 4)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import peers
import pytest
from waiting import eventually

from e2e.harness import RawClient, Reply, accept_name, running_proxy
from e2e.replicas import cluster, log_lines, url_of
from proxy.config import FrontConfig
from proxy.handle import KeyRing, generate_key_b64, parse_key
from proxy.handle.peer_auth import PEER_AUTH, sign
from proxy.process.app import STATE

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

KEY = generate_key_b64()


async def outcomes(client: RawClient) -> list[str]:
    text = (await client.call("outcomes")).result["content"][0]["text"]
    return [o for o in str(text).split(",") if o]


def ring_of(key_b64: str) -> KeyRing:
    return KeyRing([parse_key(key_b64, "test")])


async def post_peer(
    http: aiohttp.ClientSession,
    port: int,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    signed_as: str | None = None,
) -> Reply:
    """POST to a replica's peer route, unsigned or signed (as a replica holding KEY would)."""
    data = json.dumps(body).encode()
    path = "/_mrtr/forward/mcp"
    hdrs = dict(headers)
    if signed_as is not None:
        hdrs["X-Mrtr-Forwarded-By"] = signed_as
        hdrs[PEER_AUTH] = sign(
            ring_of(KEY), method="POST", path=path, body=data, forwarded_by=signed_as, now=_now()
        )
    async with http.post(f"http://127.0.0.1:{port}{path}", data=data, headers=hdrs) as resp:
        raw = await resp.read()
        parsed = json.loads(raw) if resp.content_type == "application/json" else _last_sse(raw)
        return Reply(resp.status, parsed, resp.headers)


def _last_sse(raw: bytes) -> dict[str, Any]:
    datas = [line[5:].strip() for line in raw.decode().splitlines() if line.startswith("data:")]
    return json.loads(datas[-1]) if datas else {}


def _now() -> float:
    return time.time()


async def test_the_peer_route_refuses_strangers_and_one_handle_is_driven_once(fastmcp_url: str) -> None:
    async with (
        cluster(fastmcp_url, 2, keys={"0-current": KEY}, peer_ports=True) as group,
        aiohttp.ClientSession() as http,
    ):
        owner, other = group.replicas
        owner_peer, other_peer = group.peer_ports
        assert owner_peer is not None and other_peer is not None
        client = RawClient(url_of(owner), http)
        before = await outcomes(client)
        first = await client.call("ask_name")
        assert first.result["resultType"] == "input_required", first.body
        retry = client.body(
            "tools/call",
            {
                "name": "ask_name",
                "arguments": {},
                "inputResponses": {"elicit-1": accept_name("Once")},
                "requestState": first.result["requestState"],
            },
        )
        headers = client.headers(retry)

        # A stranger on the peer port: refused before anything is looked at, on either replica.
        for port in (owner_peer, other_peer):
            stranger = await post_peer(
                http, port, retry, {**headers, "X-Mrtr-Forwarded-By": f"127.0.0.1:{owner_peer}"}
            )
            assert stranger.status == 401
            assert stranger.error == {
                "code": -32600,
                "message": "Peer authentication failed (the peer route is for replicas)",
            }
        # The public port does not serve the peer route at all.
        async with http.post(f"http://127.0.0.1:{other.port}/_mrtr/forward/mcp", json=retry) as resp:
            assert resp.status == 404

        # The attack of issue 14: the same round-1 handle at once to the owner's /mcp and to the other
        # replica's peer route — here even signed, as a confused peer would — is driven by the owner only.
        direct, sideways = await asyncio.gather(
            client.send(retry, headers),
            post_peer(http, other_peer, retry, headers, signed_as=f"127.0.0.1:{owner_peer}"),
        )
        assert direct.result["content"][0]["text"] == "accept:Once", direct.body
        assert sideways.status == 200
        assert sideways.error == {"code": -32602, "message": "Invalid requestState"}
        after = await outcomes(client)
        assert after[len(before) :] == ["accept:Once"]  # the answer reached the upstream once
        refusals = [line for line in log_lines(other) if line.get("reason") == "not_owner"]
        assert len(refusals) == 1
        assert any(line.get("event") == "peer.auth_failed" for line in log_lines(owner))


async def park_and_forward(
    group: Any, http: aiohttp.ClientSession, name: str, after_s: float
) -> tuple[RawClient, asyncio.Task[Reply]]:
    """Park work_then_ask on replica 0, then send its retry to replica 1 (forwarded to the owner)."""
    owner, other = group.replicas
    first = await RawClient(url_of(owner), http).call("work_then_ask", {"delay_s": 0, "after_s": after_s})
    assert first.result["resultType"] == "input_required", first.body
    survivor = RawClient(url_of(other), http)
    retry = asyncio.create_task(
        survivor.retry(
            first, {"elicit-1": accept_name(name)}, "work_then_ask", {"delay_s": 0, "after_s": after_s}
        )
    )
    return survivor, retry


@pytest.mark.parametrize(
    ("resumable", "streaming"),
    [(True, False), (False, False), (True, True)],
    ids=["event-store", "no-event-store", "event-store-mid-stream"],
)
async def test_owner_dies_after_taking_a_forwarded_retry(resumable: bool, streaming: bool) -> None:
    """The owner took the forwarded input and died: on a resumable upstream the survivor takes the call
    over and it completes; otherwise the client is told the outcome is unknown — never "start over".
    mid-stream: the owner had started its SSE answer (keep-alive comments) when it died; the survivor's
    answer follows on the same stream."""
    front = {"keepalive_s": 0.3} if streaming else None
    async with (
        peers.start_fastmcp(event_store=resumable) as url,
        cluster(url, 2, peer_ports=True, front=front) as group,
        aiohttp.ClientSession() as http,
    ):
        owner, other = group.replicas
        survivor, retry = await park_and_forward(group, http, "Applied", after_s=4)
        # The owner takes the forwarded retry (its metrics count the parked call resumed), answers the
        # upstream with one POST, and the tool then works for 4 s: kill the owner in between.
        await eventually(_resumed_on(http, owner), "the owner to take the forwarded retry")
        # Not synchronisation (the owner has taken the retry, awaited above): the scenario kills the owner
        # part-way through the tool's 4 s of work; streaming, after a few keep-alives have gone out.
        await asyncio.sleep(1.0 if streaming else 0.5)
        owner.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(owner.process.wait(), 10)
        reply = await asyncio.wait_for(retry, 60)
        if resumable:
            assert reply.result["resultType"] == "complete", reply.body
            assert reply.result["content"][0]["text"] == "worked:accept:Applied"
            assert any(line.get("event") == "call.taken_over" for line in log_lines(other))
        else:
            assert reply.error["code"] == -31010, reply.body
            assert "may already have applied" in reply.error["message"]
            assert "start over" not in reply.error["message"]
        # Either way the tool ran once, to its end, with the answer the owner had delivered.
        await eventually(_async_outcome(survivor, "accept:Applied"), "the tool to finish upstream")
        assert (await outcomes(survivor)).count("accept:Applied") == 1
        lost = [line for line in log_lines(other) if line.get("owner_lost")]
        assert len(lost) == 1
        if streaming:  # the answer went on on the stream the owner had started
            assert lost[0]["owner_lost"].endswith("mid-answer"), lost
            assert reply.headers["Content-Type"].startswith("text/event-stream")


def _resumed_on(http: aiohttp.ClientSession, replica: peers.PeerProcess, count: int = 1) -> Any:
    async def check() -> bool:
        async with http.get(f"http://127.0.0.1:{replica.port}/metrics") as resp:
            text = await resp.text()
        pattern = rf'parked_call_age_seconds_count\{{[^}}]*end="resumed"[^}}]*\}} {count}\.0'
        return re.search(pattern, text) is not None

    return check


def _async_outcome(client: RawClient, outcome: str) -> Any:
    async def check() -> bool:
        return outcome in await outcomes(client)

    return check


async def test_drain_cutting_running_rounds_says_the_replica_shut_down() -> None:
    """SIGTERM while rounds run past the grace: each client — direct or through a peer — is told the
    replica shut down (not an upstream failure), before the process exits."""
    async with (
        peers.start_fastmcp() as url,
        cluster(url, 2, peer_ports=True, calls={"drain_grace_s": 1}) as group,
        aiohttp.ClientSession() as http,
    ):
        owner, _ = group.replicas
        direct_client = RawClient(url_of(owner), http)
        first = await direct_client.call("work_then_ask", {"delay_s": 0, "after_s": 30})
        direct = asyncio.create_task(
            direct_client.retry(
                first, {"elicit-1": accept_name("Cut")}, "work_then_ask", {"delay_s": 0, "after_s": 30}
            )
        )
        _, forwarded = await park_and_forward(group, http, "CutToo", after_s=30)
        # Both rounds are running on the owner once it has resumed both parked calls (the tool works 30 s).
        await eventually(_resumed_on(http, owner, 2), "the owner to resume both parked calls")
        owner.process.send_signal(signal.SIGTERM)
        replies = await asyncio.wait_for(asyncio.gather(direct, forwarded), 30)
        exit_code = await asyncio.wait_for(owner.process.wait(), 30)
        for reply in replies:
            assert reply.error["code"] == -31011, reply.body
            assert reply.error["message"].startswith(
                "This proxy replica shut down while the call was running"
            )
        assert exit_code == 0
        events = [line.get("event") for line in log_lines(owner)]
        assert events.index("drain.finished") > events.index("drain.started")


async def test_a_forwarded_retry_counts_against_the_clients_rate(fastmcp_url: str) -> None:
    """The peer route is no way around `front.rate_limit_per_s`: the owner counts forwarded retries too."""
    ring = ring_of(KEY)
    async with (
        running_proxy(
            fastmcp_url, ring=ring, front=FrontConfig(rate_limit_per_s=0.01, rate_burst=1)
        ) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http)
        body = client.body(
            "tools/call",
            {"name": "ask_name", "arguments": {}, "inputResponses": {}, "requestState": "A" * 64},
        )
        data = json.dumps(body).encode()
        path = "/_mrtr/forward/mcp"
        replies = []
        for _ in range(2):
            headers = {
                **client.headers(body),
                "X-Mrtr-Forwarded-By": "127.0.0.1:9",
                PEER_AUTH: sign(
                    ring, method="POST", path=path, body=data, forwarded_by="127.0.0.1:9", now=_now()
                ),
            }
            async with http.post(proxy.url.replace("/mcp", path), data=data, headers=headers) as resp:
                replies.append((resp.status, (await resp.json())["error"]["code"]))
        assert replies == [(200, -32602), (429, -31003)]


async def test_a_stopped_owner_says_it_did_not_process_a_forwarded_retry(fastmcp_url: str) -> None:
    """After its drain a replica answers a forwarded retry 503 `X-Mrtr-Not-Processed: 1` at once — not
    silence until it exits — so the forwarder knows nothing reached the call and handles it itself."""
    ring = ring_of(KEY)
    async with running_proxy(fastmcp_url, ring=ring) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        first = await client.call("ask_name")
        proxy.app[STATE].stopped = True
        body = client.body(
            "tools/call",
            {
                "name": "ask_name",
                "arguments": {},
                "inputResponses": {"elicit-1": accept_name("Late")},
                "requestState": first.result["requestState"],
            },
        )
        data = json.dumps(body).encode()
        path = "/_mrtr/forward/mcp"
        headers = {
            **client.headers(body),
            "X-Mrtr-Forwarded-By": "127.0.0.1:9",
            PEER_AUTH: sign(
                ring, method="POST", path=path, body=data, forwarded_by="127.0.0.1:9", now=_now()
            ),
        }
        async with http.post(proxy.url.replace("/mcp", path), data=data, headers=headers) as resp:
            assert resp.status == 503
            assert resp.headers["X-Mrtr-Not-Processed"] == "1"
            assert (await resp.json())["error"]["code"] == -31005
        assert proxy.parked == 1  # untouched


async def test_a_retry_for_an_owner_restarted_with_other_keys_is_said_lost_not_refused(
    fastmcp_url: str,
) -> None:
    """The call's owner restarted with another key at the same address: the forwarded retry's signature is
    refused there (401 `X-Mrtr-Peer-Refused`). The client is told its call is lost and was not re-run, and
    why — not the peer route's "Peer authentication failed", which is for strangers (issue 29 item 12)."""
    async with (
        cluster(fastmcp_url, 2, keys={"0-current": KEY}, peer_ports=True) as group,
        aiohttp.ClientSession() as http,
    ):
        owner, other = group.replicas
        first = await RawClient(url_of(owner), http).call("ask_name")
        assert first.result["resultType"] == "input_required", first.body
        await owner.stop()
        group.write_keys(0, {"0-current": generate_key_b64()})
        async with peers.run_peer("replica0-restarted", lambda _: owner.argv, port=owner.port) as restarted:
            survivor = RawClient(url_of(other), http)
            before = await outcomes(survivor)
            reply = await survivor.retry(first, {"elicit-1": accept_name("Twice")}, "ask_name")
            assert reply.status == 200, reply.body
            assert reply.error == {
                "code": -31002,
                "message": "The parked call is gone (the proxy replica that held it no longer accepts "
                "this replica: it restarted, or no longer shares this replica's keys); it was not re-run. "
                "Send the request again without requestState to start over.",
            }
            assert await outcomes(survivor) == before  # never re-run
            line = next(x for x in log_lines(other) if x.get("owner_refused"))
            assert (line["owner_refused"], line["outcome"]) == ("unknown_key", "failed:-31002"), line
            assert any(x.get("event") == "peer.owner_refused" for x in log_lines(other))
            assert any(x.get("event") == "peer.auth_failed" for x in log_lines(restarted))
            async with http.get(f"http://127.0.0.1:{other.port}/metrics") as resp:
                assert 'mrtr_proxy_peer_forwards_total{result="refused"} 1.0' in await resp.text()
