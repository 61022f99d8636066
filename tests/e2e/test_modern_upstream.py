"""The native relay (proxy/front/modern/relay/native.py) on the wire: a 2026-07-28 client's requests to a
2026-07-28 upstream (FastMCP 4.2.3, two eras; the mcp 2.3.0 SDK's own server, modern only) go upstream as
they came and the upstream's own `input_required` comes back; the retry goes upstream too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from oauth_keys import SigningKey, claims, jwks
from waiting import eventually

from e2e.harness import RawClient, accept_name, running_proxy
from e2e.oauth_peers import jwks_server
from proxy.config import AuthConfig, FrontConfig, UpstreamConfig, UpstreamCredential
from proxy.handle import HandleCodec, KeyRing
from proxy.handle.relay_state import open_relay_state, seal_relay_state
from proxy.process.appstate import CODEC, ERAS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}


def start(kind: str) -> Any:
    return peers.start_fastmcp4() if kind == "fastmcp4" else peers.start_mcp2_server()


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=["fastmcp4", "mcp2"])
async def upstream_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with start(request.param) as url:
        yield url


@pytest_asyncio.fixture(loop_scope="session")
async def client(upstream_url: str, request: pytest.FixtureRequest) -> AsyncIterator[RawClient]:
    kind = request.node.callspec.params["upstream_url"]
    async with running_proxy(upstream_url) as proxy, aiohttp.ClientSession() as http:
        yield RawClient(proxy.url, http)
        # FastMCP 4 answers a legacy initialize too: two eras ("both"); the mcp 2.3.0 server only 2026-07-28
        assert proxy.app[ERAS].describe() == {"default": "both" if kind == "fastmcp4" else "modern"}
        assert proxy.parked == 0 and proxy.live == 0  # nothing of a relayed call lives in the proxy


async def test_discover_and_lists_come_from_the_upstream(client: RawClient) -> None:
    discover = await client.request("server/discover")
    assert discover.status == 200
    assert discover.result["supportedVersions"] == ["2026-07-28"]
    assert discover.result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] in (
        "fastmcp4-fixture",
        "mcp2-fixture",
    )
    tools = await client.request("tools/list")
    names = {t["name"] for t in tools.result["tools"]}
    assert {"echo", "guard_name", "guard_two"} <= names
    assert {"ttlMs", "cacheScope"} <= tools.result.keys()  # the upstream's caching hints, passed through


async def test_native_one_round(client: RawClient) -> None:
    first = await client.call("guard_name")
    assert first.result["resultType"] == "input_required"
    assert first.result["inputRequests"]["name"]["method"] == "elicitation/create"
    retry = await client.call("guard_name", inputResponses={"name": accept_name("Ada")}, **_state(first))
    assert retry.result["content"][0]["text"] == "hello:Ada"
    declined = await client.call("guard_name", inputResponses={"name": {"action": "decline"}})
    assert declined.result["content"][0]["text"] == "declined"


async def test_native_two_rounds_carry_the_servers_state(client: RawClient) -> None:
    first = await client.call("guard_two")
    assert "first" in first.result["inputRequests"] and first.result["requestState"]
    second = await client.retry(first, {"first": accept_name("X")}, "guard_two")
    assert "second" in second.result["inputRequests"]
    done = await client.retry(second, {"second": accept_name("Y")}, "guard_two")
    assert done.result["content"][0]["text"] == "two:X+Y"


async def test_bad_request_state_gets_the_upstreams_own_error(client: RawClient) -> None:
    """The upstream's state travels untouched here (the client's credentials would go upstream), so the
    upstream judges a forged one: its own error and message, not the proxy's."""
    forged = await client.call("guard_two", inputResponses={"first": accept_name()}, requestState="v1.forged")
    assert forged.error["code"] == -32602
    assert forged.error["message"] != "Invalid requestState"  # the proxy's wording for its own handles
    assert "requestState" in forged.error["message"]


async def test_progress_and_logs_of_each_round_reach_the_client(client: RawClient) -> None:
    meta = {"progressToken": "p1", "io.modelcontextprotocol/logLevel": "info"}
    first = await call_with_meta(client, "guard_progress", {"steps": 2}, meta)
    assert [n["params"]["progress"] for n in first.notifications if n["method"].endswith("progress")] == [
        1,
        2,
    ]
    retry = await call_with_meta(
        client,
        "guard_progress",
        {"steps": 2},
        meta,
        inputResponses={"name": accept_name("P")},
        **_state(first),
    )
    assert retry.result["content"][0]["text"] == "progress:P"
    logs = [
        n["params"]["data"]
        for r in (first, retry)
        for n in r.notifications
        if n["method"] == "notifications/message"
    ]
    assert [str(d.get("msg", d)) if isinstance(d, dict) else d for d in logs] == ["before", "after"], logs
    assert [n["params"]["progress"] for n in retry.notifications if n["method"].endswith("progress")] == [
        3,
        4,
    ]


def _state(reply: Any) -> dict[str, Any]:
    state = reply.result.get("requestState")
    return {"requestState": state} if state is not None else {}


async def call_with_meta(
    client: RawClient, name: str, args: dict[str, Any], meta: dict[str, Any], **extra: Any
) -> Any:
    body = client.body("tools/call", {"name": name, "arguments": args, **extra})
    body["params"]["_meta"].update(meta)
    return await client.send(body)


async def test_state_is_bound_to_the_principal_where_the_upstream_cannot_tell_users_apart(
    upstream_url: str,
) -> None:
    """No client credential goes upstream (forward_headers: []): the upstream's requestState would be a
    bearer token. The proxy wraps it, bound to the principal; replayed by another user it is refused, and
    the upstream never sees it."""
    upstream = UpstreamConfig(name="default", url=upstream_url, forward_headers=())
    async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
        alice = RawClient(proxy.url, http, authorization="Bearer alice")
        mallory = RawClient(proxy.url, http, authorization="Bearer mallory")
        first = await alice.call("guard_two")
        wrapped = first.result["requestState"]
        inner = open_relay_state(proxy.app[CODEC], wrapped, time.time())  # the proxy's handle (format 4)
        assert inner.state.startswith("v1.") and inner.state not in wrapped  # the server's, sealed inside
        answers = {"first": accept_name("X")}
        replayed = await mallory.call("guard_two", inputResponses=answers, requestState=wrapped)
        assert replayed.error == {"code": -32602, "message": "Invalid requestState"}
        other_tool = await alice.call("guard_name", inputResponses=answers, requestState=wrapped)
        assert other_tool.error["message"] == "Invalid requestState"
        second = await alice.retry(first, answers, "guard_two")
        assert "second" in second.result["inputRequests"]
        done = await alice.retry(second, {"second": accept_name("Y")}, "guard_two")
        assert done.result["content"][0]["text"] == "two:X+Y"
        forged = await alice.call("guard_two", inputResponses=answers, requestState="v1.forged")
        assert forged.error["message"] == "Invalid requestState"  # not a handle of ours: never sent upstream
        elsewhere = seal_relay_state(HandleCodec(KeyRing.ephemeral()), inner)  # a key this replica lacks
        unheld = await alice.call("guard_two", inputResponses=answers, requestState=elsewhere)
        assert (unheld.status, unheld.error["code"]) == (503, -31012)  # another replica may hold it


async def test_a_mixed_gateway_serves_every_era_and_shows_each_upstreams_era(fastmcp_url: str) -> None:
    """FastMCP 1.30 (legacy), FastMCP 4.2.3 (two eras), the mcp 2.3.0 server (modern only) and a stdio
    FastMCP 1.30 child behind one proxy: a 2026-07-28 client gets mid-call input from the first three, the
    legacy one through the proxy's MRTR (a parked call) and the other two natively; /readyz and /metrics
    say which era each upstream is."""
    async with peers.start_fastmcp4() as two, peers.start_mcp2_server() as modern:
        stdio = UpstreamConfig(
            name="local",
            command=str(peers.legacy_python()),
            args=(str(peers.legacy_fastmcp_script()), "--transport", "stdio"),
            transport="stdio",
        )
        extra = (UpstreamConfig(name="two", url=two), UpstreamConfig(name="modern", url=modern), stdio)
        async with (
            running_proxy(fastmcp_url, names=("legacy",), extra=extra) as proxy,
            aiohttp.ClientSession() as http,
        ):
            base = proxy.url.removesuffix("/mcp")
            eras = {"legacy": "legacy", "two": "both", "modern": "modern", "local": "legacy"}

            async def probed() -> bool:  # stdio: probed on a child of its own, which may outlast a /readyz
                async with http.get(f"{base}/readyz") as resp:
                    return bool((await resp.json())["upstream_eras"] == eras)

            await eventually(probed, f"/readyz to show the eras {eras}", every_s=0.25)
            legacy = RawClient(f"{base}/servers/legacy/mcp", http)
            first = await legacy.call("ask_name")
            assert first.result["resultType"] == "input_required" and proxy.parked == 1  # the proxy's MRTR
            done = await legacy.retry(
                first, {next(iter(first.result["inputRequests"])): accept_name("L")}, "ask_name"
            )
            assert done.result["content"][0]["text"] == "accept:L"
            for route, tool in (("two", "guard_name"), ("modern", "guard_name")):
                client = RawClient(f"{base}/servers/{route}/mcp", http)
                asked = await client.call(tool)
                assert asked.result["inputRequests"]["name"]["method"] == "elicitation/create"
                answered = await client.call(tool, inputResponses={"name": accept_name(route)})
                assert answered.result["content"][0]["text"] == f"hello:{route}"
            local = RawClient(f"{base}/servers/local/mcp", http)
            assert (await local.call("echo", {"text": "stdio"})).result["content"][0]["text"] == "stdio"
            assert proxy.parked == 0
            async with http.get(f"{base}/metrics") as resp:
                metrics = await resp.text()
            for name, era in eras.items():
                assert f'mrtr_proxy_upstream_era{{era="{era}",upstream="{name}"}} 1.0' in metrics


async def test_an_upstream_upgraded_in_place_is_served_natively_without_a_restart() -> None:
    """FastMCP 1.30 (legacy) is replaced on the same port by FastMCP 4.2.3 (two eras) while the proxy runs.
    The lost legacy session makes the proxy probe the era again, and from then on the server's native tools
    pass through (no restart, no configuration change)."""
    port = peers.free_port()
    async with running_proxy(f"http://127.0.0.1:{port}/mcp") as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        async with peers.start_fastmcp(port=port):
            assert (await client.call("echo", {"text": "before"})).result["content"][0]["text"] == "before"
            assert proxy.app[ERAS].describe() == {"default": "legacy"}
        async with peers.start_fastmcp4(port=port):
            answers = []
            for _ in range(5):  # bounded: the stale legacy session is found dead at its first use
                reply = await client.call("echo", {"text": "after"})
                answers.append(reply.body.get("result", reply.body.get("error")))
                if proxy.app[ERAS].describe() == {"default": "both"} and "result" in reply.body:
                    break
            # A call racing the discovery that the old session is gone gets the legacy path's -31001 (the
            # request was not re-run); at most that one, and every other is answered.
            failed = [a for a in answers if "code" in a]
            assert len(failed) <= 1 and all(a["code"] == -31001 for a in failed), answers
            assert answers[-1]["content"][0]["text"] == "after"
            assert proxy.app[ERAS].describe() == {"default": "both"}
            first = await client.call("guard_name")
            assert first.result["resultType"] == "input_required"  # the server's own, natively
            done = await client.call("guard_name", inputResponses={"name": accept_name("Up")})
            assert done.result["content"][0]["text"] == "hello:Up"


async def test_a_client_closing_its_stream_cancels_the_upstream_request() -> None:
    """2026-07-28 cancellation is closing the response stream: the proxy closes the upstream's in turn, and
    FastMCP 4 cancels the tool (its fixture counts the cancelled runs)."""
    async with (
        peers.start_fastmcp4() as url,
        running_proxy(url) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http)
        body = client.body("tools/call", {"name": "slow", "arguments": {"seconds": 20}})
        body["params"]["_meta"]["progressToken"] = "slow-1"
        async with http.post(proxy.url, json=body, headers=client.headers(body)) as resp:
            assert resp.content_type == "text/event-stream"
            first = await resp.content.readuntil(b"\n\n")  # the first progress event: the tool runs
            assert b"notifications/progress" in first

        async def counted() -> bool:  # the upstream notices the closed stream within moments
            return bool((await client.call("cancelled")).result["content"][0]["text"] == "1")

        await eventually(counted, "the upstream to count one cancelled call")


async def test_subscriptions_listen_passes_through(upstream_url: str) -> None:
    """The upstream's own subscriptions/listen: the mcp 2.3.0 server's stream (its acknowledgement first);
    FastMCP 4.2.3 has none, and its -32601 comes back as it is (404, as the binding says)."""
    async with running_proxy(upstream_url) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        discover = await client.request("server/discover")
        server = discover.result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
        body = client.body("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        async with http.post(proxy.url, json=body, headers=client.headers(body)) as resp:
            if server == "fastmcp4-fixture":
                assert resp.status == 404 and (await resp.json())["error"]["code"] == -32601
                return
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            async with asyncio.timeout(10):
                chunk = b""
                while b"notifications/subscriptions/acknowledged" not in chunk:
                    chunk = await resp.content.readuntil(b"\n\n")
                    assert chunk, "the stream ended before its acknowledgement"


async def test_legacy_tools_of_a_two_era_server_go_through_the_proxys_mrtr() -> None:
    """FastMCP 4.2.3 refuses ctx.elicit on a 2026-07-28 request; named in upstreams[].legacy_tools, such a
    tool is called over a legacy session and its elicitation becomes the proxy's input_required round,
    while the server's native tools still take the relay."""
    async with peers.start_fastmcp4() as url:
        upstream = UpstreamConfig(name="default", url=url, legacy_tools=("ask_name",))
        async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
            client = RawClient(proxy.url, http)
            first = await client.call("ask_name")
            assert first.result["resultType"] == "input_required" and proxy.parked == 1  # the proxy's round
            (key,) = first.result["inputRequests"]
            done = await client.retry(
                first, {key: {"action": "accept", "content": {"value": "Ada"}}}, "ask_name"
            )
            assert done.result["content"][0]["text"] == "accept:Ada"
            native = await client.call("guard_name")
            assert native.result["inputRequests"]["name"]["method"] == "elicitation/create"
            assert proxy.parked == 0  # the native round parks nothing
            assert proxy.app[ERAS].describe() == {"default": "both"}


async def test_validate_mode_with_a_service_credential_binds_the_state_to_the_verified_principal(
    tmp_path: Path,
) -> None:
    """auth.mode validate with a service credential upstream: the upstream sees one caller for every user,
    so the verified principal (the token's sub) is what the relayed state is bound to. Mallory, holding a
    valid token of her own, cannot resume Alice's call with Alice's requestState."""
    secret = tmp_path / "token"
    secret.write_text("svc-credential\n")
    async with peers.start_fastmcp4() as url, jwks_server() as keys:
        keys.document = jwks(KEY)
        auth = AuthConfig(
            mode="validate",
            public_url=RESOURCE,
            authorization_servers=(ISS,),
            jwks_url=keys.url,
            upstream_credential=UpstreamCredential(source="file", file=secret),
        )
        upstream = UpstreamConfig(name="default", url=url, auth=auth)
        async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
            alice = RawClient(proxy.url, http, authorization=f"Bearer {token('alice')}")
            mallory = RawClient(proxy.url, http, authorization=f"Bearer {token('mallory')}")
            first = await alice.call("guard_two")
            answers = {"first": accept_name("X")}
            stolen = await mallory.call(
                "guard_two", inputResponses=answers, requestState=first.result["requestState"]
            )
            assert stolen.error == {"code": -32602, "message": "Invalid requestState"}
            second = await alice.retry(first, answers, "guard_two")
            done = await alice.retry(second, {"second": accept_name("Y")}, "guard_two")
            assert done.result["content"][0]["text"] == "two:X+Y"


ISS = "https://as.example.test"
RESOURCE = "https://mcp.example.test/mcp"
KEY = SigningKey("k1")


def token(sub: str) -> str:
    return KEY.mint(claims(iss=ISS, aud=RESOURCE, sub=sub))


async def test_a_modern_upstream_replaced_by_a_legacy_one_is_found_out_at_the_next_request() -> None:
    """The other way: the mcp 2.3.0 server (modern only) replaced on its port by FastMCP 1.30. The next
    relayed request is answered the legacy way (400, no session): nothing was processed, so the proxy
    probes again and serves that same request the legacy way."""
    port = peers.free_port()
    async with running_proxy(f"http://127.0.0.1:{port}/mcp") as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        async with peers.start_mcp2_server(port=port):
            assert (await client.call("echo", {"text": "modern"})).result["content"][0]["text"] == "modern"
            assert proxy.app[ERAS].describe() == {"default": "modern"}
        async with peers.start_fastmcp(port=port):
            reply = await client.call("echo", {"text": "legacy"})
            assert reply.result["content"][0]["text"] == "legacy"
            assert proxy.app[ERAS].describe() == {"default": "legacy"}
            assert proxy.app[ERAS].probes == 2


async def test_rate_limits_apply_to_relayed_requests(upstream_url: str) -> None:
    front = FrontConfig(rate_limit_per_s=0.01, rate_burst=2)
    async with running_proxy(upstream_url, front=front) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http, authorization="Bearer one")
        assert [(await client.call("echo", {"text": "x"})).status for _ in range(3)] == [200, 200, 429]
