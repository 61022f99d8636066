"""A request the proxy sent to a 2026-07-28 upstream that then failed: the client is told the call failed and
was not re-run — never that the upstream was "unavailable", which says nothing ran and invites the client to
call again (calls/wording.relayed_failure). The scripted upstream (tests/e2e/modern_scripted.py) begins an
event stream for `drop` and closes the connection without an answer, as a server that died mid-call; the
native relay (a 2026-07-28 client) and the mirror (a legacy client) word it as the call service does for a
legacy upstream, the tool ran once, and the next call works. "Unavailable" stays for what never ran: no
connection to the upstream at all."""

from __future__ import annotations

from typing import Any

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, running_proxy
from e2e.modern_scripted import scripted_modern
from e2e.test_mirror import RawLegacy
from proxy.config import UpstreamConfig

pytestmark = pytest.mark.asyncio(loop_scope="session")

DIED = {
    "code": -31001,
    "message": "Upstream failed during the call (the connection to it failed); it was not re-run",
}
UNAVAILABLE = {
    "code": -31001,
    "message": "Upstream 'default' unavailable (details in the proxy log under this request's X-Request-Id)",
}


def _drops(seen: list[dict[str, Any]]) -> int:
    return sum(1 for m in seen if m["method"] == "tools/call" and m["params"]["name"] == "drop")


async def test_a_relayed_call_whose_upstream_dies_mid_answer_failed_and_ran_once() -> None:
    async with scripted_modern() as upstream:
        config = UpstreamConfig(name="default", url=upstream.url, era="modern")
        async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
            client = RawClient(proxy.url, http)
            died = await client.call("drop")
            assert died.status == 200 and died.error == DIED, died.body
            assert _drops(upstream.seen) == 1  # sent once, never again
            again = await client.call("job", {"text": "after"})
            assert again.result["resultType"] == "task", again.body


async def test_a_legacy_clients_call_through_the_mirror_is_worded_the_same() -> None:
    async with scripted_modern() as upstream:
        config = UpstreamConfig(name="default", url=upstream.url, era="modern")
        async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
            legacy = RawLegacy(proxy.url, http)
            await legacy.initialize({})
            status, messages = await legacy.call("drop")
            assert status == 200 and messages[-1]["error"] == DIED, messages
            assert _drops(upstream.seen) == 1


async def test_an_upstream_nothing_listens_on_is_unavailable() -> None:
    """Nothing reached it, so nothing ran: the one case worded "unavailable"."""
    port = peers.closed_port()
    config = UpstreamConfig(name="default", url=f"http://127.0.0.1:{port}/mcp", era="modern")
    async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
        refused = await RawClient(proxy.url, http).call("echo", {"text": "hi"})
        assert refused.error == UNAVAILABLE, refused.body
