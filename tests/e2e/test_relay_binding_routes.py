"""Issue 41 finding 1: whether a 2026-07-28 upstream's `requestState` and task ids are bound to the principal
is decided by what the route a request came by sends upstream (proxy/routes/binding.py), not by the
upstream's own configuration. Two users with real tokens (validate mode: signed by a key the test's JWKS
endpoint serves; pass-through: their own bearer tokens), a real proxy, and the scripted 2026-07-28 upstream
(tests/e2e/modern_scripted.py: the Tasks extension and a tool that asks, which no installed peer serves at
2026-07-28). Each attack is the issue's: Bob reads Alice's task, cancels it, updates it, completes Alice's
call with his own answer; each is refused with the clear JSON-RPC error and never reaches the upstream,
while Alice's own flow goes on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from oauth_keys import SigningKey, claims, jwks

from e2e.harness import ALL_CAPS, RawClient, RunningProxy, running_proxy
from e2e.modern_scripted import TASKS, ScriptedModern, big_state, scripted_modern
from e2e.oauth_peers import jwks_server
from e2e.test_modern_upstream_tasks import listen
from proxy.config import AuthConfig, RouteConfig, RouteMember, UpstreamConfig, UpstreamCredential
from proxy.handle.relay_state import open_relay_state
from proxy.handle.relay_task import open_relay_task
from proxy.process.appstate import CODEC
from proxy.wire.sse import SSEDecoder

pytestmark = pytest.mark.asyncio(loop_scope="session")

ISSUER = "https://as.example.test"
RESOURCE = "https://mcp.example.test/servers/team/mcp"
SERVICE = "svc-credential"
CAPS = {**ALL_CAPS, "extensions": {TASKS: {}}}
NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}
BAD_STATE = {"code": -32602, "message": "Invalid requestState"}
ANSWER = {"name": {"action": "accept", "content": {"name": "Alice"}}}
BOBS = {"name": {"action": "accept", "content": {"name": "Bob"}}}


@dataclass
class Team:
    proxy: RunningProxy
    upstream: ScriptedModern
    url: str  # the route's (or the upstream's own) endpoint
    http: aiohttp.ClientSession
    tokens: dict[str, str]

    def client(self, who: str) -> RawClient:
        auth = f"Bearer {self.tokens[who]}"
        return RawClient(self.url, self.http, capabilities=dict(CAPS), authorization=auth)


def validate(keys_url: str, source: str, file: Path | None = None) -> AuthConfig:
    return AuthConfig(
        mode="validate",
        public_url=RESOURCE,
        authorization_servers=(ISSUER,),
        jwks_url=keys_url,
        upstream_credential=UpstreamCredential(source=source, file=file),  # type: ignore[arg-type]
    )


@contextlib.asynccontextmanager
async def team(tmp_path: Path, *, route: str, member: str = "default") -> AsyncIterator[Team]:
    """The scripted upstream `mod` behind the route `team` (prefix `mod__`), whose auth is `route`:
    `validate-file` (the service credential goes to every member), `pass-through`; the member's own
    auth is `member`: `default` (pass-through, the client's Authorization forwarded, so its own route
    binds nothing) or `validate-silent` (validate with the client's token on its own route, nothing
    forwarded besides)."""
    key = SigningKey("k1")
    secret = tmp_path / "service-token"
    secret.write_text(SERVICE + "\n")
    async with contextlib.AsyncExitStack() as stack:
        upstream = await stack.enter_async_context(scripted_modern())
        keys = await stack.enter_async_context(jwks_server())
        keys.document = jwks(key)
        if member == "default":
            mod = UpstreamConfig(name="mod", url=upstream.url, era="modern")
        else:
            own = validate(keys.url, "client_token")
            mod = UpstreamConfig(name="mod", url=upstream.url, era="modern", forward_headers=(), auth=own)
        if route == "validate-file":
            tokens = {
                who: key.mint(claims(iss=ISSUER, aud=RESOURCE, sub=who, ttl=600)) for who in ("alice", "bob")
            }
            auth = validate(keys.url, "file", secret)
        else:
            tokens = {"alice": "alice-own-token", "bob": "bob-own-token"}
            auth = AuthConfig()
        routed = RouteConfig("team", (RouteMember("mod"),), prefix_mode="always", auth=auth)
        proxy = await stack.enter_async_context(running_proxy(mod, names=("mod",), routes=(routed,)))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        yield Team(proxy, upstream, proxy.url.replace("/mcp", "/servers/team/mcp"), http, tokens)


async def attack(t: Team, prefix: str, what: str) -> None:
    """The issue's sequence, each of Bob's steps refused, Alice's flow intact: on her task (`tasks`) or
    on her call's round (`state`)."""
    alice, bob = t.client("alice"), t.client("bob")
    if what == "state":
        await attack_state(t, prefix, alice, bob)
        return
    created = await alice.call(f"{prefix}job", {"text": "alice's secret"})
    handle = created.result["taskId"]
    assert created.result["resultType"] == "task"
    seen = len(t.upstream.seen)
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        params = {"taskId": handle, **({"inputResponses": {}} if method == "tasks/update" else {})}
        stolen = await bob.request(method, params)
        assert stolen.error == NOT_FOUND, method
        guessed = await bob.request(method, {**params, "taskId": "task-1"})  # the upstream's own id
        assert guessed.error == NOT_FOUND, method
    result = await bob.request("tasks/result", {"taskId": handle})
    assert result.error["code"] == -32601 and "cannot tell users apart" in result.error["message"]
    assert len(t.upstream.seen) == seen  # not one of Bob's requests reached the upstream
    task = open_relay_task(t.proxy.app[CODEC], handle, time.time())  # never the upstream's raw id
    assert (task.upstream, task.task) == ("mod", "task-1") and handle != "task-1"
    got = await alice.request("tasks/get", {"taskId": handle})
    assert got.result["status"] == "completed" and got.result["taskId"] == handle
    assert got.result["result"]["content"][0]["text"] == "job:alice's secret"
    cancelled = await alice.request("tasks/cancel", {"taskId": handle})
    assert cancelled.result["status"] == "cancelled" and cancelled.result["taskId"] == handle


async def attack_state(t: Team, prefix: str, alice: RawClient, bob: RawClient) -> None:
    seen = len(t.upstream.seen)
    first = await alice.call(f"{prefix}big", {"size": 64})
    wrapped = first.result["requestState"]
    stolen = await bob.call(f"{prefix}big", {"size": 64}, inputResponses=BOBS, requestState=wrapped)
    assert stolen.error == BAD_STATE
    assert len(t.upstream.seen) == seen + 1  # Alice's first round only
    assert wrapped != big_state(64)  # sealed, not the upstream's own
    assert open_relay_state(t.proxy.app[CODEC], wrapped, time.time()).state == big_state(64)
    done = await alice.call(f"{prefix}big", {"size": 64}, inputResponses=ANSWER, requestState=wrapped)
    assert done.result["content"][0]["text"] == "big:Alice:64"
    assert t.upstream.seen[-1]["params"]["requestState"] == big_state(64)  # unwrapped on the way up


@pytest.mark.parametrize("what", ["tasks", "state"])
@pytest.mark.parametrize("member", ["default", "validate-silent"])
async def test_a_validate_route_with_a_service_credential_binds_its_member(
    tmp_path: Path, what: str, member: str
) -> None:
    """The issue's case: the route sends the service credential, so the member cannot tell Alice from Bob,
    whatever its own route would send it (its default settings: the client's Authorization; validate
    mode with the client's token)."""
    async with team(tmp_path, route="validate-file", member=member) as t:
        await attack(t, "mod__", what)


@pytest.mark.parametrize("what", ["tasks", "state"])
async def test_a_pass_through_route_binds_a_member_it_sends_nothing_of_the_clients(
    tmp_path: Path, what: str
) -> None:
    """The member validates with the client's token on its own route (bound there: no), forwards no
    client header besides; on a pass-through route nothing of the client's reaches it: bound."""
    async with team(tmp_path, route="pass-through", member="validate-silent") as t:
        await attack(t, "mod__", what)


async def test_the_upstreams_own_route_binds_by_its_own_auth(tmp_path: Path) -> None:
    """On the member's own route (its own auth: the client's Authorization forwarded) the same upstream's
    ids pass untouched: the upstream tells users apart itself. The route's decision does not leak here."""
    async with team(tmp_path, route="validate-file") as t:
        own = RawClient(
            t.proxy.url.replace("/mcp", "/servers/mod/mcp"),
            t.http,
            capabilities=dict(CAPS),
            authorization="Bearer alice-own",
        )
        created = await own.call("job", {"text": "x"})
        assert created.result["taskId"] == "task-1"
        first = await own.call("big", {"size": 64})
        assert first.result["requestState"] == big_state(64)


async def test_listen_task_ids_on_a_bound_own_route_show_only_the_owners_task(tmp_path: Path) -> None:
    """subscriptions/listen `taskIds` on the upstream's own route in validate mode with a service
    credential: Bob naming Alice's handle is refused; Alice hears only her task, under her handle."""
    key = SigningKey("k1")
    secret = tmp_path / "service-token"
    secret.write_text(SERVICE + "\n")
    resource = "https://mcp.example.test/servers/mod/mcp"
    async with contextlib.AsyncExitStack() as stack:
        upstream = await stack.enter_async_context(scripted_modern())
        keys = await stack.enter_async_context(jwks_server())
        keys.document = jwks(key)
        auth = AuthConfig(
            mode="validate",
            public_url=resource,
            authorization_servers=(ISSUER,),
            jwks_url=keys.url,
            upstream_credential=UpstreamCredential(source="file", file=secret),
        )
        mod = UpstreamConfig(name="mod", url=upstream.url, era="modern", auth=auth)
        proxy = await stack.enter_async_context(running_proxy(mod, names=("mod",)))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        tokens = {w: key.mint(claims(iss=ISSUER, aud=resource, sub=w, ttl=600)) for w in ("alice", "bob")}
        url = proxy.url.replace("/mcp", "/servers/mod/mcp")
        alice, bob = (
            RawClient(url, http, capabilities=dict(CAPS), authorization=f"Bearer {tokens[w]}")
            for w in ("alice", "bob")
        )
        mine = (await alice.call("job", {"text": "alice's"})).result["taskId"]
        theirs = (await bob.call("job", {"text": "bob's"})).result["taskId"]
        refused = await bob.request("subscriptions/listen", {"notifications": {"taskIds": [mine]}})
        assert refused.error == NOT_FOUND
        notes = await listen(alice, [mine])
        told = [n["params"] for n in notes if n["method"] == "notifications/tasks"]
        assert [(t["taskId"], t["result"]["content"][0]["text"]) for t in told] == [(mine, "job:alice's")]
        assert theirs not in str(notes)


async def first_event(who: RawClient, params: dict[str, Any]) -> dict[str, Any]:
    """The first message of a listen stream (its acknowledgement); the stream is then closed."""
    body = who.body("subscriptions/listen", params)
    async with who.http.post(who.url, json=body, headers=who.headers(body)) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        decoder = SSEDecoder()
        async with asyncio.timeout(10):
            async for chunk in resp.content.iter_any():
                for event in decoder.feed(chunk):
                    if event.data.strip():
                        return json.loads(event.data)  # type: ignore[no-any-return]
    raise AssertionError("the listen stream ended with no message")


async def test_listen_task_ids_on_a_bound_route_never_reach_another_users_task(tmp_path: Path) -> None:
    """On the aggregated route a listen's `taskIds` are served for the proxy's own tasks only: a modern
    member's task (Alice's handle, or the upstream's raw id) is acknowledged as not honored, for Bob and
    for Alice alike, and no listen naming it goes upstream: nothing of Alice's task reaches Bob."""
    async with team(tmp_path, route="validate-file") as t:
        alice, bob = t.client("alice"), t.client("bob")
        handle = (await alice.call("mod__job", {"text": "alice's"})).result["taskId"]
        for who in (bob, alice):
            for task_id in (handle, "task-1"):
                ack = await first_event(who, {"notifications": {"taskIds": [task_id]}})
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                assert ack["params"]["notifications"].get("taskIds", []) == []
        assert not any(m["method"] == "subscriptions/listen" for m in t.upstream.seen)
