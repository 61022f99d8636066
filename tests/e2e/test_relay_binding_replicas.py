"""Issue 41 finding 1 beyond one process: the binding a route decides (proxy/routes/binding.py) is the same
on every replica (real `mrtr-proxy serve` processes sharing one key ring, tests/e2e/replicas.py) and on the
mirror (a legacy client on the same route). The route is the issue's: validate mode sending a service
credential to a 2026-07-28 member on its default settings (the scripted upstream, e2e/modern_scripted.py).
Nothing of a relayed call lives in a replica, so no relayed request is forwarded between replicas: a handle
sealed by one replica is opened by another (the same ring) and held to the same principal there."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from oauth_keys import SigningKey, claims, jwks

from e2e.harness import ALL_CAPS, RawClient, running_proxy
from e2e.modern_scripted import TASKS, ScriptedModern, big_state, scripted_modern
from e2e.oauth_peers import jwks_server
from e2e.replicas import cluster
from e2e.test_mirror import ELICIT, RawLegacy
from proxy.config import AuthConfig, RouteConfig, RouteMember, UpstreamConfig, UpstreamCredential

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ISSUER = "https://as.example.test"
RESOURCE = "https://mcp.example.test/servers/team/mcp"
CAPS = {**ALL_CAPS, "extensions": {TASKS: {}}}
NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}
BAD_STATE = {"code": -32602, "message": "Invalid requestState"}


@dataclass
class Peers:
    upstream: ScriptedModern
    jwks_url: str
    secret: Path
    tokens: dict[str, str]


@contextlib.asynccontextmanager
async def peers_for(tmp_path: Path) -> AsyncIterator[Peers]:
    key = SigningKey("k1")
    secret = tmp_path / "service-token"
    secret.write_text("svc-credential\n")
    async with scripted_modern() as upstream, jwks_server() as keys:
        keys.document = jwks(key)
        tokens = {w: key.mint(claims(iss=ISSUER, aud=RESOURCE, sub=w, ttl=600)) for w in ("alice", "bob")}
        yield Peers(upstream, keys.url, secret, tokens)


def route_yaml(p: Peers) -> dict[str, Any]:
    auth = {
        "mode": "validate",
        "public_url": RESOURCE,
        "authorization_servers": [ISSUER],
        "jwks_url": p.jwks_url,
        "upstream_credential": {"source": "file", "file": str(p.secret)},
    }
    return {
        "upstreams": [{"name": "mod", "url": p.upstream.url, "era": "modern"}],
        "routes": [{"name": "team", "upstreams": ["mod"], "prefix_mode": "always", "auth": auth}],
    }


async def test_another_replica_holds_a_bound_handle_to_its_principal(tmp_path: Path) -> None:
    """Alice's task handle and requestState from replica 0: Bob at replica 1 reads, cancels, updates and
    completes nothing; Alice at replica 1 reads her task and completes her call there."""
    async with (
        peers_for(tmp_path) as p,
        cluster(p.upstream.url, 2, more=route_yaml(p)) as group,
        aiohttp.ClientSession() as http,
    ):
        urls = [f"http://127.0.0.1:{r.port}/servers/team/mcp" for r in group.replicas]

        def client(who: str, i: int) -> RawClient:
            auth = f"Bearer {p.tokens[who]}"
            return RawClient(urls[i], http, capabilities=dict(CAPS), authorization=auth)

        alice0, alice1, bob1 = client("alice", 0), client("alice", 1), client("bob", 1)
        handle = (await alice0.call("mod__job", {"text": "alice's"})).result["taskId"]
        first = await alice0.call("mod__big", {"size": 64})
        wrapped = first.result["requestState"]
        seen = len(p.upstream.seen)
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            assert (await bob1.request(method, {"taskId": handle})).error == NOT_FOUND, method
        bobs = {"name": {"action": "accept", "content": {"name": "Bob"}}}
        stolen = await bob1.call("mod__big", {"size": 64}, inputResponses=bobs, requestState=wrapped)
        assert stolen.error == BAD_STATE
        assert len(p.upstream.seen) == seen  # none of Bob's requests reached the upstream
        assert handle != "task-1" and wrapped != big_state(64)  # sealed, not the upstream's own
        got = await alice1.request("tasks/get", {"taskId": handle})
        assert got.result["result"]["content"][0]["text"] == "job:alice's"
        alices = {"name": {"action": "accept", "content": {"name": "Alice"}}}
        done = await alice1.call("mod__big", {"size": 64}, inputResponses=alices, requestState=wrapped)
        assert done.result["content"][0]["text"] == "big:Alice:64"


async def test_the_mirror_on_a_bound_route_completes_a_legacy_clients_call(tmp_path: Path) -> None:
    """A legacy client on the same route: the mirror's rounds take the route's decision (the state sealed
    and unwrapped for its principal), and the upstream gets its own requestState back with the answer."""
    async with peers_for(tmp_path) as p:
        auth = AuthConfig(
            mode="validate",
            public_url=RESOURCE,
            authorization_servers=(ISSUER,),
            jwks_url=p.jwks_url,
            upstream_credential=UpstreamCredential(source="file", file=p.secret),
        )
        mod = UpstreamConfig(name="mod", url=p.upstream.url, era="modern")
        route = RouteConfig("team", (RouteMember("mod"),), prefix_mode="always", auth=auth)
        async with (
            running_proxy(mod, names=("mod",), routes=(route,)) as proxy,
            aiohttp.ClientSession() as http,
        ):
            url = proxy.url.replace("/mcp", "/servers/team/mcp")
            alice = RawLegacy(url, http, authorization=f"Bearer {p.tokens['alice']}")
            await alice.initialize(ELICIT)

            def accept(_: dict[str, Any]) -> dict[str, Any]:
                return {"action": "accept", "content": {"name": "Alice"}}

            status, messages = await alice.call("mod__big", accept, arguments={"size": 64})
            assert status == 200, messages
            assert messages[0]["method"] == "elicitation/create"
            assert messages[-1]["result"]["content"][0]["text"] == "big:Alice:64"
            retried = [m for m in p.upstream.seen if "requestState" in m.get("params", {})]
            assert [m["params"]["requestState"] for m in retried] == [big_state(64)]
