"""What the planner (front/planner.py) tells the plan of a request: which requests take the native relay,
and which never wait on an era probe."""

from __future__ import annotations

import os
from typing import Any

import aiohttp

from proxy.config import UpstreamConfig
from proxy.front.plan import Job, RouteKind, UpstreamEra, needs_era, plan
from proxy.front.planner import Planner
from proxy.handle import HandleCodec, KeyRing, formats, token_version
from proxy.handle.relay_task import RelayTask, seal_relay_task
from proxy.tasks.ids import TaskClaims, seal_task_id
from proxy.translate.capabilities import ClientCapabilities
from proxy.translate.request import ModernRequest
from proxy.upstream.era import EraBook
from proxy.wire import jsonrpc


def modern(method: str, params: dict[str, Any], state: str | None = None) -> ModernRequest:
    return ModernRequest(jsonrpc.Request(1, method, params), None, ClientCapabilities(), None, state, {})


def test_the_proxys_own_task_ids_and_legacy_tools_do_not_take_the_relay() -> None:
    """A `legacy_tools` call of a modern upstream is the proxy's (its MRTR over a legacy session), and may
    become the proxy's own task (format 3): its tasks/* are the proxy's to serve (proxy/tasks), never sent to
    the upstream; any other task id, any other tool, is relayed."""
    up = UpstreamConfig(name="a", url="http://x/", era="modern", legacy_tools=("ask",))
    codec = HandleCodec(KeyRing.ephemeral())
    planner = Planner({"a": up}, EraBook({"a": up}, {}), codec, relay=True)
    own = seal_task_id(codec, TaskClaims("a", "k", "127.0.0.1:1", "w", 0, 10))
    theirs = seal_relay_task(codec, RelayTask("a", "w", "task-1", 10))

    def job(req: ModernRequest) -> Job:
        return planner.modern("a", req, RouteKind.OWN)[1]

    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        assert job(modern(method, {"taskId": own})) is Job.ADAPT
        assert job(modern(method, {"taskId": theirs})) is Job.RELAY
        assert job(modern(method, {"taskId": "task-1"})) is Job.RELAY
    assert job(modern("tools/call", {"name": "ask"})) is Job.ADAPT
    assert job(modern("tools/call", {"name": "other"})) is Job.RELAY
    assert job(modern("tools/call", {"name": "other"})) is Job.RELAY  # (kept: the same plan again)
    assert planner.modern("a", modern("tools/call", {"name": "other"}), RouteKind.OWN, legacy_way=True)[
        1
    ] is (
        Job.ADAPT  # the mirror's two-era tool, the legacy way
    )
    assert job(modern("ping", {})) is Job.ADAPT


async def test_a_retry_of_a_parked_call_is_never_probed_for() -> None:
    """A replica that has not met the upstream yet takes a retry carrying the proxy's own handle of a
    parked call the legacy way (forwarded to its owner, or taken over) without probing the upstream's era:
    such a call is parked on a legacy session whatever the upstream speaks. Anything else — a token that
    only looks like one (version byte 1, not sealed by these keys), a handle of another proxy's keys, a
    modern server's own requestState — is probed for as any request."""
    up = UpstreamConfig(name="a", url="http://127.0.0.1:9/mcp")  # era auto; nothing listens there
    codec = HandleCodec(KeyRing.ephemeral())
    async with aiohttp.ClientSession() as http:
        eras = EraBook({"a": up}, {"a": http})
        planner = Planner({"a": up}, eras, codec, relay=True)

        async def planned(state: str) -> Job:
            s, job = planner.modern("a", modern("tools/call", {"name": "t"}, state), RouteKind.OWN)
            if s.era is UpstreamEra.UNKNOWN and needs_era(s):  # as the pipeline does
                s = await planner.probed(s, "a", ())
                assert s.era is UpstreamEra.LEGACY  # nothing answers: taken as legacy
                job = plan(s)
            return job

        ours = codec.ring.seal(b"claims", version=formats.CALL_HANDLE)
        assert await planned(ours) is Job.ADAPT
        assert eras.probes == 0
        others = HandleCodec(KeyRing.ephemeral()).ring.seal(b"claims", version=formats.CALL_HANDLE)
        lookalike = "AQ" + ours[2:-8] + "A" * 8
        assert token_version(lookalike) == formats.CALL_HANDLE
        for token in (others, lookalike, "server-state-" + os.urandom(8).hex()):
            before = eras.probes  # a probe nothing answers decides nothing: the next request probes again
            assert await planned(token) is Job.ADAPT
            assert eras.probes == before + 1
