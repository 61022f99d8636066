"""Every request in flight at shutdown, forwarded or not, gets an answer before the process exits (issue 16
finding 4: a retry forwarded to a draining replica just before its grace ended once got no answer at all).

Real processes: 2 replicas on FastMCP 1.30 without an event store. Calls are parked on the owner, the owner
gets SIGTERM, and their retries are then sent to the other replica (which forwards them to the owner) one
after another across the end of the grace: some reach the owner while it drains and are still running when
the grace ends, later ones reach an owner that has stopped or exited. Each must get a JSON-RPC answer that
says what happened, and no tool may run twice."""

from __future__ import annotations

import asyncio
import collections
import re
import signal

import aiohttp
import peers
import pytest
from waiting import eventually

from e2e.harness import RawClient, Reply, accept_name
from e2e.replicas import cluster, log_lines, url_of

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ARGS = {"delay_s": 0, "after_s": 30}  # after the answer the tool works 30 s: far past the grace
PARKED, GRACE_S, SPACING_S = 8, 2, 0.5
# What a client may honestly be told here: the replica shut down with its round running, or (the owner
# cancelled the parked call at the grace's end, or is gone) the call is lost and nothing ran.
HONEST = {-31011, -31002}


async def _resumed(http: aiohttp.ClientSession, replica: peers.PeerProcess) -> int:
    try:
        async with http.get(f"http://127.0.0.1:{replica.port}/metrics") as resp:
            text = await resp.text()
    except aiohttp.ClientError:
        return -1
    found = re.search(r'parked_call_age_seconds_count\{[^}]*end="resumed"[^}]*\} (\d+)', text)
    return int(found.group(1)) if found else 0


async def test_forwarded_retries_across_the_drains_end_are_all_answered() -> None:
    async with (
        peers.start_fastmcp() as url,
        cluster(url, 2, peer_ports=True, calls={"drain_grace_s": GRACE_S}) as group,
        aiohttp.ClientSession() as http,
    ):
        owner, other = group.replicas
        direct = RawClient(url_of(owner), http)
        firsts = list(await asyncio.gather(*(direct.call("work_then_ask", ARGS) for _ in range(PARKED))))
        assert all(f.result["resultType"] == "input_required" for f in firsts), [f.body for f in firsts]
        survivor = RawClient(url_of(other), http)

        def retry(i: int) -> asyncio.Task[Reply]:
            answers = {"elicit-1": accept_name(f"F{i}")}
            return asyncio.create_task(survivor.retry(firsts[i], answers, "work_then_ask", ARGS))

        owner.process.send_signal(signal.SIGTERM)
        # The first retry is forwarded to the draining owner and taken (its parked call resumes there) ...
        sent = [retry(0)]
        await eventually(
            lambda: _resumed_greater(http, owner), "the draining owner to take a forwarded retry", limit_s=30
        )
        # ... the rest follow across the grace's end and after it.
        for i in range(1, PARKED):
            await asyncio.sleep(SPACING_S)  # the scenario: retries spread across the grace's end
            sent.append(retry(i))
        replies = await asyncio.wait_for(asyncio.gather(*sent), 60)
        exit_code = await asyncio.wait_for(owner.process.wait(), 30)

        codes = [r.body.get("error", {}).get("code") for r in replies]
        tally = collections.Counter(codes)
        ran = [o for o in (await survivor.call("outcomes")).result["content"][0]["text"].split(",") if o]
        twice = sum(
            1 for n in collections.Counter(o for o in ran if o.startswith("accept:")).values() if n > 1
        )
        print(f"forwarded across the drain's end: answers {dict(tally)}; ran twice {twice}")
        assert all(code in HONEST for code in codes), [r.body for r in replies]  # no silence, no lie
        assert codes[0] == -31011, replies[0].body  # in flight on the owner when the grace ended
        assert (
            replies[0].error["message"].startswith("This proxy replica shut down while the call was running")
        )
        for reply in replies:
            assert "Upstream failed" not in reply.error["message"], reply.body
        assert twice == 0
        assert exit_code == 0
        events = [line.get("event") for line in log_lines(owner)]
        assert events.index("drain.finished") > events.index("drain.started")


async def _resumed_greater(http: aiohttp.ClientSession, replica: peers.PeerProcess) -> bool:
    return await _resumed(http, replica) >= 1
