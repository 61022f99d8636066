"""A 2026-07-28 upstream's answer is bounded by `upstreams[].max_message_bytes` however it comes: the scripted
upstream (tests/e2e/modern_scripted.py) sends a decompression bomb, a few KB on the wire with a true
Content-Length that would inflate to many times the limit: the native relay asks for no encoding and refuses
it, inflating nothing."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from e2e.harness import RawClient, running_proxy
from e2e.hostile import Call, HostileServer, hostile_server, result
from e2e.modern_scripted import scripted_modern
from proxy.config import UpstreamConfig
from proxy.handle.relay_state import MAX_STATE_CHARS
from proxy.process.appstate import MIRROR

pytestmark = pytest.mark.asyncio(loop_scope="session")

LIMIT = 1 << 20
OVER_LIMIT = (
    "Upstream failed during the call (upstream sent a message larger than 1048576 bytes "
    "(upstreams[].max_message_bytes)); it was not re-run"
)
COMPRESSED = (
    "Upstream failed during the call (upstream answered with Content-Encoding 'gzip', which the proxy did "
    "not ask for (it sends Accept-Encoding identity); refused, nothing of it decoded); it was not re-run"
)


async def test_a_compressed_answer_is_refused_without_inflating_it_and_the_next_call_works() -> None:
    """The relay's POSTs ask for `Accept-Encoding: identity` (the lean client, lean_http.py); an upstream
    that compresses all the same gets its answer refused, small or a bomb, and nothing of it inflated."""
    async with scripted_modern() as upstream:
        config = UpstreamConfig(name="default", url=upstream.url, era="modern", max_message_bytes=LIMIT)
        async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
            client = RawClient(proxy.url, http)
            for size in (1000, 64 * LIMIT):  # small, and ~64 KB on the wire that would be 64 MiB inflated
                refused = await client.call("bomb", {"size": size})
                assert refused.status == 200
                assert refused.error == {"code": -31001, "message": COMPRESSED}, str(refused.body)[:300]
            again = await client.call("job", {"text": "after"})  # the upstream and the proxy carry on
            assert again.result["resultType"] == "task", again.body


async def test_an_answer_over_the_limit_gets_the_same_error_from_a_legacy_and_a_modern_upstream() -> None:
    async def oversize(call: Call, server: HostileServer) -> web.StreamResponse:  # plain JSON, 2 MiB
        return web.json_response(result(call.id, "x" * (2 * LIMIT)))

    async with scripted_modern() as modern, hostile_server(oversize) as legacy:
        legacy_up = UpstreamConfig(name="legacy", url=legacy.url, era="legacy", max_message_bytes=LIMIT)
        modern_up = UpstreamConfig(name="modern", url=modern.url, era="modern", max_message_bytes=LIMIT)
        async with (
            running_proxy(legacy_up, names=("legacy",), extra=(modern_up,)) as proxy,
            aiohttp.ClientSession() as http,
        ):
            base = proxy.url.removesuffix("/mcp")
            through_session = await RawClient(f"{base}/servers/legacy/mcp", http).call("attack")
            relayed = await RawClient(f"{base}/servers/modern/mcp", http).call("big", {"size": 2 * LIMIT})
            # The call service over a legacy session, and the native relay: one error, naming the limit.
            assert through_session.error == {"code": -31001, "message": OVER_LIMIT}, through_session.body
            assert relayed.error == {"code": -31001, "message": OVER_LIMIT}, str(relayed.body)[:300]


async def test_a_relayed_call_the_upstream_never_answers_fails_at_its_deadline() -> None:
    """calls.call_timeout_s bounds a relayed call (upstream/deadline.py: one timer per loop; 2.5 s is long
    enough to be held on its board rather than asyncio.timeout's); the next call is unaffected."""
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        msg = await request.json()
        if msg["params"].get("name") == "never":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(30):  # until the proxy hangs up (bounded)
                    await release.wait()
        answer = {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}
        return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": answer})

    app = web.Application()
    app.router.add_post("/mcp", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        config = UpstreamConfig(name="default", url=str(server.make_url("/mcp")), era="modern")
        async with running_proxy(config, call_timeout_s=2.5) as proxy, aiohttp.ClientSession() as http:
            client = RawClient(proxy.url, http)
            late = await asyncio.wait_for(client.call("never"), 30)
            assert late.error == {"code": -31004, "message": "Upstream 'default' did not answer within 2.5s"}
            assert (await client.call("echo")).result["content"][0]["text"] == "ok"
    finally:
        release.set()
        await server.close()


async def test_a_legacy_client_of_a_modern_upstream_hears_a_refused_answer_as_a_call_that_ran() -> None:
    """The mirror (a legacy client, a 2026-07-28 upstream) words an answer it refuses — compressed, or over
    the limit — as the relay does: the call ran upstream and was not re-run; never "unavailable", which
    would read as nothing having happened and invite the client to call again."""
    from e2e.test_mirror import ELICIT, RawLegacy

    async with scripted_modern() as upstream:
        config = UpstreamConfig(name="default", url=upstream.url, era="modern", max_message_bytes=LIMIT)
        async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
            client = RawLegacy(proxy.url, http)
            await client.initialize(ELICIT)
            for arguments, said in (({"size": 1000}, COMPRESSED), ({"size": 64 * LIMIT}, COMPRESSED)):
                status, messages = await client.call("bomb", arguments=arguments)
                assert status == 200 and messages[-1]["error"] == {"code": -31001, "message": said}, messages
            status, messages = await client.call("big", arguments={"size": 2 * LIMIT})
            assert messages[-1]["error"] == {"code": -31001, "message": OVER_LIMIT}, str(messages)[:300]
            status, messages = await client.call("job", arguments={"text": "after"})
            assert status == 200 and "error" not in messages[-1], messages


async def test_the_mirror_holds_no_requeststate_over_the_bound_a_legacy_client_is_told_why() -> None:
    """Issue 41 #4: the mirror held whatever `requestState` a 2026-07-28 upstream sent, for as long as its
    legacy client took to answer (2 MiB a call here, 256 calls an address). It now holds at most what the
    native relay seals (MAX_STATE_CHARS): a state at the bound goes round as before; one over it ends the
    call with -31001 before anything is asked of the client, and nothing is retried upstream."""
    from e2e.test_mirror import ELICIT, RawLegacy, accept_ada

    async with scripted_modern() as upstream:
        config = UpstreamConfig(name="default", url=upstream.url, era="modern")  # default 16 MiB messages
        # parked_ttl_s: how long a round waits for the client's answers (here none comes, were one asked)
        async with running_proxy(config, parked_ttl_s=5) as proxy, aiohttp.ClientSession() as http:
            client = RawLegacy(proxy.url, http)
            await client.initialize(ELICIT)
            status, messages = await client.call("big", accept_ada, arguments={"size": MAX_STATE_CHARS})
            assert (
                status == 200 and messages[-1]["result"]["content"][0]["text"] == f"big:Ada:{MAX_STATE_CHARS}"
            )
            asked: list[dict[str, Any]] = []
            for size in (MAX_STATE_CHARS + 1, 2 * LIMIT):
                status, messages = await client.call("big", asked.append, arguments={"size": size})
                assert status == 200 and messages == [messages[-1]], str(messages)[:300]  # nothing asked
                assert messages[-1]["error"] == {
                    "code": -31001,
                    "message": "Upstream failed during the call (it asked for input with a requestState of "
                    f"{size} characters; the proxy holds at most {MAX_STATE_CHARS}); the call was ended "
                    "and not retried upstream",
                }
            assert asked == []
            retried = [
                m["params"]["arguments"]["size"] for m in upstream.seen if "requestState" in m["params"]
            ]
            assert retried == [MAX_STATE_CHARS]  # only the call within the bound went round again
            assert len(proxy.app[MIRROR].calls) == 0  # the mirror's calls: none left
