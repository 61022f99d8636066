"""What the proxy learns about a two-era upstream's tools (upstream/tool_paths.py) is learned for every user
of the replica, so no user's words may teach it: a tool that reports its caller's input in its error (FastMCP
4.2.3 fixture `guard_or_say`, native when given no text) is called with the real refusal texts by one user;
another user's next call of it must still go natively (not the legacy way, where it would fail)."""

from __future__ import annotations

from typing import Any

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, running_proxy
from e2e.test_mirror import ELICIT, RawLegacy
from proxy.config import UpstreamConfig
from proxy.process.appstate import ERAS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(240)]

# FastMCP 4.2.3's real refusals (what `ask_name` answers at 2026-07-28, what `guard_name` answers on a legacy
# session), to be echoed by the attacker.
ELICIT_REFUSAL = "elicitation via server-initiated requests is unavailable on 2026-07-28 connections."
NATIVE_REFUSAL = (
    "Tool 'guard_or_say' returned an InputRequiredResult to request client input, but the multi-round-trip "
    "result type (SEP-2322) only exists at MCP 2026-07-28; this connection negotiated '2025-11-25'. Use "
    "ctx.elicit() for server-initiated input on handshake-era connections."
)
ATTACKS = [
    ELICIT_REFUSAL,  # the whole refusal, echoed: the same bytes as the real one
    f"no such city: {ELICIT_REFUSAL}",  # the refusal inside the tool's own error
    "Cannot send 'sampling/createMessage': this transport context has no back-channel for server-initiated "
    "requests.",
]


def text_of(reply: dict[str, Any]) -> str:
    return " ".join(str(c.get("text")) for c in (reply.get("result") or {}).get("content") or [])


async def test_one_users_echoed_refusal_teaches_nothing_to_another_users_call() -> None:
    async with (
        peers.start_fastmcp4() as url,
        running_proxy(UpstreamConfig(name="default", url=url)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        mallory = RawClient(proxy.url, http, authorization="Bearer mallory")
        for words in ATTACKS:
            echoed = await mallory.call("guard_or_say", {"text": words})
            assert echoed.result["isError"] is True and words in text_of(echoed.body), echoed.body
        # The same through the mirror, as a legacy client: the native-only refusal's words, echoed.
        legacy = RawLegacy(proxy.url, http, authorization="Bearer mallory")
        await legacy.initialize(ELICIT)
        _, said = await legacy.call("guard_or_say", arguments={"text": NATIVE_REFUSAL})
        assert said[-1]["result"]["isError"] is True, said
        assert proxy.app[ERAS].paths.learned() == {}
        # Alice's call goes natively, as going direct: the server's own question comes back.
        alice = RawClient(proxy.url, http, authorization="Bearer alice")
        first = await alice.call("guard_or_say", {"text": ""})
        assert first.result.get("resultType") == "input_required", first.body
        answers = {"name": {"action": "accept", "content": {"name": "Ada"}}}
        state = {"requestState": first.result["requestState"]} if "requestState" in first.result else {}
        done = await alice.call("guard_or_say", {"text": ""}, inputResponses=answers, **state)
        assert text_of(done.body) == "hello:Ada", done.body


async def listed(client: RawClient) -> list[str]:
    reply = await client.request("tools/list")
    return [str(t["name"]) for t in reply.result["tools"]]


async def test_what_was_learned_is_forgotten_when_the_tool_list_changes() -> None:
    """A tool learned either way (a 2026-07-28 client's refused inline tool; a legacy client's native-only
    tool) is forgotten once the upstream lists other tools, whichever client era lists them."""
    async with (
        peers.start_fastmcp4() as url,
        running_proxy(UpstreamConfig(name="default", url=url)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        paths = proxy.app[ERAS].paths
        modern = RawClient(proxy.url, http, authorization="Bearer alice")
        legacy = RawLegacy(proxy.url, http, authorization="Bearer bob")
        await legacy.initialize(ELICIT)
        for era, lister in (("2026-07-28", modern), ("legacy", legacy)):
            before = await (listed(modern) if lister is modern else legacy_listed(legacy))
            await modern.call("ask_name")  # refused at 2026-07-28: learned legacy
            await legacy.call("guard_name", lambda asked: {"action": "accept", "content": {"name": "A"}})
            assert paths.learned() == {"default": {"legacy": ["ask_name"], "native": ["guard_name"]}}, era
            await modern.call("add_tool", {"name": f"added_{era[:6]}"})
            after = await (listed(modern) if lister is modern else legacy_listed(legacy))
            assert len(after) == len(before) + 1
            assert paths.learned() == {}, era


async def legacy_listed(client: RawLegacy) -> list[str]:
    _, said = await client.call("", params={}, method="tools/list")
    return [str(t["name"]) for t in said[-1]["result"]["tools"]]
