"""Aggregated routes with real peers: FastMCP 1.30 (legacy, elicits; its lists paginated here),
server-everything (elicitation, sampling), server-memory and server-filesystem (stdio) behind one route,
driven by a raw 2026-07-28 client, mcp 2.3.0's client (2026-07-28 and auto) and the TypeScript client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from oauth_keys import SigningKey, claims, jwks
from structlog.testing import capture_logs
from waiting import eventually

from e2e.harness import EVERYTHING_FORM, NO_ROOTS_CAPS, RawClient, RunningProxy, accept_name, running_proxy
from e2e.oauth_peers import jwks_server
from e2e.replicas import cluster, log_lines, round_robin
from e2e.test_listen import listening
from e2e.test_mirror import RawLegacy, accept_ada
from e2e.test_tasks import WITH_TASKS, created, wait_for
from proxy.config import AuthConfig, RouteConfig, RouteMember, TasksConfig, ToolPolicy, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

MODERN_DRIVER = Path(__file__).parent / "clients" / "modern_client.py"
TS_DRIVER = Path(__file__).parent.parent / "interop" / "clients" / "ts_client.mjs"
LEGACY_DRIVER = Path(__file__).parent / "clients" / "legacy_mirror_client.py"
MEMBERS = ("fast", "everything", "memory", "files")


def stdio(name: str, entry: Path, *args: str) -> UpstreamConfig:
    return UpstreamConfig(
        name=name, transport="stdio", command=str(peers.node_bin()), args=(str(entry), *args)
    )


@dataclass
class Fleet:
    proxy: RunningProxy
    http: aiohttp.ClientSession
    files: Path

    def client(self, route: str, **kw: Any) -> RawClient:
        """A raw client of `route`, without roots (server-everything would ask for them before each call)."""
        url = self.proxy.url.replace("/mcp", f"/servers/{route}/mcp")
        return RawClient(url, self.http, capabilities=dict(NO_ROOTS_CAPS), **kw)

    async def readyz(self) -> dict[str, Any]:
        async with self.http.get(self.proxy.url.replace("/mcp", "/readyz")) as resp:
            return await resp.json()  # type: ignore[no-any-return]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fleet(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Fleet]:
    peers.require_peers({"server-memory": peers.server_memory_entry(), "fs": peers.server_filesystem_entry()})
    files = tmp_path_factory.mktemp("fleet-files").resolve()
    (files / "notes.txt").write_text("aggregated hello\n")
    memory_file = tmp_path_factory.mktemp("memory") / "memory.jsonl"
    memory = replace(stdio("memory", peers.server_memory_entry()), env={"MEMORY_FILE_PATH": str(memory_file)})
    routes = (
        RouteConfig("fleet", tuple(RouteMember(m) for m in MEMBERS)),
        RouteConfig("bare", (RouteMember("fast"), RouteMember("everything")), prefix_mode="never"),
        RouteConfig("reversed", (RouteMember("everything"), RouteMember("fast"))),
        RouteConfig(
            "policy",
            (RouteMember("fast"), RouteMember("everything", tools=ToolPolicy(allow=("echo", "get-sum")))),
            tools=ToolPolicy(deny=("fast__ask_*",)),
        ),
    )
    async with (
        peers.start_fastmcp(page_size=10) as fast,
        peers.start_server_everything() as everything,
        running_proxy(
            fast,
            names=("fast",),
            extra=(
                UpstreamConfig(name="everything", url=str(everything)),
                memory,
                stdio("files", peers.server_filesystem_entry(), str(files)),
            ),
            routes=routes,
        ) as proxy,
        aiohttp.ClientSession() as http,
    ):
        yield Fleet(proxy, http, files)


async def all_names(
    client: RawClient, method: str = "tools/list", kind: str = "tools"
) -> tuple[list[str], int]:
    """Every page of a list: the names (or URIs) in order, and how many pages it took."""
    names: list[str] = []
    params: dict[str, Any] = {}
    for pages in range(1, 101):
        reply = await client.request(method, params)
        names += [item.get("name") or item.get("uri") for item in reply.result[kind]]
        if "nextCursor" not in reply.result:
            return names, pages
        params = {"cursor": reply.result["nextCursor"]}
    raise AssertionError("more than 100 pages")


async def shorter_than(client: RawClient, before: list[str]) -> list[str] | None:
    """The aggregated list when it has fewer tools than `before` (for eventually)."""
    names, _ = await all_names(client)
    return names if len(names) < len(before) else None


async def same_as(client: RawClient, before: list[str]) -> list[str] | None:
    names, _ = await all_names(client)
    return names if names == before else None


def text_of(reply: Any) -> str:
    return " ".join(part.get("text", "") for part in reply.result["content"])


async def test_merged_list_is_every_tool_of_every_upstream_prefixed_in_route_order(fleet: Fleet) -> None:
    expected: list[str] = []
    for member in MEMBERS:  # each upstream alone, on its own route
        own, _ = await all_names(fleet.client(member))
        expected += [f"{member}__{name}" for name in own]
    merged, pages = await all_names(fleet.client("fleet"))
    assert merged == expected
    assert pages > 3  # FastMCP's tools come 10 a page here: the proxy's cursor walks through them, then on
    assert {n.split("__")[0] for n in merged} == set(MEMBERS)


async def test_every_upstream_reached_under_its_prefixed_name_with_the_right_data(fleet: Fleet) -> None:
    client = fleet.client("fleet")
    assert text_of(await client.call("fast__echo", {"text": "via fleet"})) == "via fleet"
    assert text_of(await client.call("fast__add", {"a": 2, "b": 40})) == "42"
    assert "hi there" in text_of(await client.call("everything__echo", {"message": "hi there"}))
    assert "5" in text_of(await client.call("everything__get-sum", {"a": 2, "b": 3}))
    entity = {"name": "proxy", "entityType": "software", "observations": ["aggregates"]}
    created = await client.call("memory__create_entities", {"entities": [entity]})
    assert "proxy" in text_of(created)
    assert "aggregates" in text_of(await client.call("memory__read_graph"))
    allowed = text_of(await client.call("files__list_allowed_directories"))
    assert str(fleet.files) in allowed
    read = await client.call("files__read_text_file", {"path": str(fleet.files / "notes.txt")})
    assert "aggregated hello" in text_of(read)


async def test_elicitation_prompts_and_resources_through_the_aggregate(fleet: Fleet) -> None:
    client = fleet.client("fleet")
    first = await client.call("fast__ask_name")
    assert first.result["resultType"] == "input_required"
    final = await client.retry(first, {"elicit-1": accept_name("Agg")}, "fast__ask_name")
    assert text_of(final) == "accept:Agg"
    asked = await client.call("everything__trigger-elicitation-request")
    (key,) = asked.result["inputRequests"]
    answered = await client.retry(
        asked,
        {key: {"action": "accept", "content": EVERYTHING_FORM}},
        "everything__trigger-elicitation-request",
    )
    assert "Ann" in text_of(answered)
    prompt = await client.request("prompts/get", {"name": "fast__greeting_prompt"})
    (key,) = prompt.result["inputRequests"]
    greeted = await client.request(
        "prompts/get",
        {
            "name": "fast__greeting_prompt",
            "inputResponses": {key: accept_name("Pat")},
            "requestState": prompt.result["requestState"],
        },
    )
    assert greeted.result["messages"][0]["content"]["text"] == "Hello, Pat!"
    memory = await client.request("resources/read", {"uri": "memory://knowledge-graph"})
    assert memory.result["contents"][0]["uri"] == "memory://knowledge-graph"
    doc = await client.request("resources/read", {"uri": "demo://resource/dynamic/text/7"})  # a template
    assert "7" in doc.result["contents"][0]["text"]
    unknown = await client.request("resources/read", {"uri": "nowhere://x"})
    assert unknown.error == {
        "code": -32602,
        "message": "Resource not found: no upstream of this route lists 'nowhere://x'",
    }
    missing = await client.call("fast__no_such_tool")
    assert "Unknown tool" in text_of(missing)  # a prefix the route knows: FastMCP's own answer
    stray = await client.call("nobody__echo")
    assert stray.error == {"code": -32602, "message": "Unknown tool: 'nobody__echo'"}


async def test_discover_describes_the_aggregate(fleet: Fleet) -> None:
    reply = await fleet.client("fleet").request("server/discover")
    result = reply.result
    assert {"tools", "prompts", "resources"} <= set(result["capabilities"])
    assert result["instructions"].startswith("## everything\n")  # FastMCP and the stdio servers give none
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mrtr-proxy route fleet"


async def test_the_cursor_is_the_proxys_own_and_cannot_be_forged(fleet: Fleet) -> None:
    client = fleet.client("fleet")
    first = (await client.request("tools/list")).result
    cursor = first["nextCursor"]
    assert cursor != "10" and "10" not in json.dumps(cursor)[:3]
    for bad in ("10", cursor[:-2] + "AA", 7):
        reply = await client.request("tools/list", {"cursor": bad})
        assert reply.error == {"code": -32602, "message": "Invalid cursor"}
    elsewhere = await fleet.client("policy").request("tools/list", {"cursor": cursor})
    assert elsewhere.error == {"code": -32602, "message": "Invalid cursor"}  # made for another route
    other_list = await client.request("prompts/list", {"cursor": cursor})
    assert other_list.error["message"] == "Invalid cursor"


async def test_a_name_clash_under_never_goes_to_the_first_upstream_and_is_reported(fleet: Fleet) -> None:
    client = fleet.client("bare")
    with capture_logs() as logs:
        names, _ = await all_names(client)
    assert names.count("echo") == 1
    assert "ask_name" in names and "get-sum" in names  # bare names from both
    assert text_of(await client.call("echo", {"text": "first wins"})) == "first wins"  # FastMCP's echo
    clash = [e for e in logs if e["event"] == "route.name_clash"]
    assert clash and (clash[0]["kept"], clash[0]["dropped"], clash[0]["name"]) == (
        "fast",
        "everything",
        "echo",
    )
    ready = await fleet.readyz()
    assert (
        "tool 'echo' is listed by 'fast' and 'everything'; 'fast' keeps it"
        in ready["routes"]["bare"]["clashes"]
    )


async def test_allow_and_deny_filter_lists_and_refuse_by_name(fleet: Fleet) -> None:
    client = fleet.client("policy", authorization="Bearer team-a")
    names, _ = await all_names(client)
    assert not [n for n in names if n.startswith("fast__ask_")]
    assert "fast__echo" in names
    assert [n for n in names if n.startswith("everything__")] == ["everything__echo", "everything__get-sum"]
    with capture_logs() as logs:
        denied = await client.call("fast__ask_name")
        outside = await client.call("everything__get-env")
    for reply, tool in ((denied, "fast__ask_name"), (outside, "everything__get-env")):
        assert reply.status == 200
        assert reply.error == {"code": -32602, "message": f"Tool {tool!r} is not available on this route"}
    refused = [e for e in logs if e["event"] == "route.tool_refused"]
    assert [(e["tool"], e["reason"]) for e in refused] == [
        ("fast__ask_name", "denied"),
        ("everything__get-env", "not_allowed"),
    ]
    assert all(e["principal"] and e["principal"] != "anonymous" for e in refused)
    assert "Bearer team-a" not in json.dumps(refused)  # the principal is a digest, never the credential
    unruled = await fleet.client("fleet").call("fast__ask_name")  # the same upstream, a route without rules
    assert unruled.result["resultType"] == "input_required"


async def test_list_changed_from_one_upstream_reaches_the_aggregates_listener(fleet: Fleet) -> None:
    client = fleet.client("fleet")
    async with listening(client, {"toolsListChanged": True}) as stream:
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        assert int(text_of(await client.call("fast__change_tools"))) >= 2
        note = await stream.next()
        assert note["method"] == "notifications/tools/list_changed"


async def test_a_resource_subscription_goes_to_the_upstream_that_listed_the_uri(fleet: Fleet) -> None:
    client = fleet.client("reversed")  # server-everything first: it takes subscriptions too
    uri = "fixture://secret"  # FastMCP's
    async with listening(client, {"resourceSubscriptions": [uri]}) as stream:
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"resourceSubscriptions": [uri]}
        assert text_of(await client.call("fast__subscribed", {"uri": uri})) == "1"
        assert text_of(await client.call("fast__touch_resource", {"uri": uri})) == "1"
        update = await stream.next()
        assert update["method"] == "notifications/resources/updated" and update["params"]["uri"] == uri


async def test_a_legacy_client_gets_the_aggregate_from_the_mirror(fleet: Fleet) -> None:
    """A raw legacy client: a mirror session on the route, the merged list under prefixed names with the
    proxy's cursor, a legacy member's elicitation asked inline on the call's stream, the route's policy."""
    legacy = RawLegacy(fleet.client("fleet").url, fleet.http)
    await legacy.initialize({"elicitation": {}})
    names: list[str] = []
    cursor: dict[str, Any] = {}
    for _ in range(100):
        _, (page,) = await legacy.call("", method="tools/list", params=cursor)
        assert "resultType" not in page["result"]  # what a legacy client does not know is stripped
        names += [t["name"] for t in page["result"]["tools"]]
        if "nextCursor" not in page["result"]:
            break
        cursor = {"cursor": page["result"]["nextCursor"]}
    assert {"fast__ask_name", "everything__get-sum", "memory__read_graph"} <= set(names)
    status, messages = await legacy.call("fast__ask_name", accept_ada)
    assert status == 200 and messages[0]["method"] == "elicitation/create"
    assert messages[-1]["result"]["content"][0]["text"] == "accept:Ada"
    _, (summed,) = await legacy.call("everything__get-sum", arguments={"a": 2, "b": 3})
    assert "5" in summed["result"]["content"][0]["text"]
    policy = RawLegacy(fleet.client("policy").url, fleet.http)
    await policy.initialize({})
    _, (refused,) = await policy.call("fast__ask_name")
    assert refused["error"]["code"] == -32602 and "fast__ask_name" in refused["error"]["message"]
    policy.headers["Mcp-Session-Id"] = legacy.headers["Mcp-Session-Id"]  # another route's session
    status, _ = await policy.call("everything__echo", arguments={"message": "hi"})
    assert status == 404


MODERN_PLAN: list[dict[str, Any]] = [
    {"id": "list", "kind": "list_tools_all", "name": ""},
    {"id": "fast-ask", "kind": "tool", "name": "fast__ask_name", "elicit": "accept"},
    {"id": "every-sum", "kind": "tool", "name": "everything__get-sum", "args": {"a": 1, "b": 2}},
    {"id": "memory", "kind": "tool", "name": "memory__read_graph"},
    {"id": "files", "kind": "tool", "name": "files__list_allowed_directories"},
    {"id": "prompt", "kind": "prompt", "name": "fast__greeting_prompt"},
    {"id": "resource", "kind": "resource", "name": "fixture://secret"},
]


async def check_plan(steps: dict[str, dict[str, Any]], fleet: Fleet) -> None:
    for step in steps.values():
        assert "error" not in step, steps
    full = RawClient(fleet.client("fleet").url, fleet.http)  # every capability, as the clients declare them
    expected, _ = await all_names(full)  # (server-everything lists sampling and roots tools only then)
    assert steps["list"]["text"].split(",") == expected  # every page, in route order
    assert steps["fast-ask"]["text"] == "accept:Alice" and steps["fast-ask"]["seen"] == ["elicit:form"]
    assert "3" in steps["every-sum"]["text"]
    assert "entities" in steps["memory"]["text"]
    assert str(fleet.files) in steps["files"]["text"]
    assert steps["prompt"]["text"] == "Hello, Alice!"
    assert steps["resource"]["text"] == "fixture:s3cr3t"


@pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
async def test_mcp_2_3_0_client(fleet: Fleet, mode: str) -> None:
    url = fleet.client("fleet").url
    run = await peers.run_once(
        [str(peers.client_python()), str(MODERN_DRIVER), url, json.dumps(MODERN_PLAN), mode], limit_s=90
    )
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    results = json.loads(run.stdout)
    assert results.pop("_protocol_version") == "2026-07-28"
    assert results["list"]["pages"] > 3  # it followed the proxy's cursor
    await check_plan(results, fleet)


async def test_typescript_client(fleet: Fleet) -> None:
    url = fleet.client("fleet").url
    run = await peers.run_once(
        [str(peers.node_bin()), str(TS_DRIVER), url, "pinned", json.dumps(MODERN_PLAN)], limit_s=90
    )
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert "connectError" not in out, out
    assert out["client"]["protocolVersion"] == "2026-07-28"
    await check_plan(out["steps"], fleet)  # (the TS client follows nextCursor inside listTools itself)


async def test_one_upstream_killed_mid_run_then_back() -> None:
    port = peers.free_port()
    memory = stdio("memory", peers.server_memory_entry())
    route = RouteConfig(
        "pair", (RouteMember("fast"), RouteMember("memory")), list_timeout_s=5, list_cache_ms=500
    )
    async with contextlib.AsyncExitStack() as stack:
        fast = await stack.enter_async_context(peers.start_fastmcp(port=port))
        proxy = await stack.enter_async_context(
            running_proxy(fast, names=("fast",), extra=(memory,), routes=(route,))
        )
        http = await stack.enter_async_context(aiohttp.ClientSession())
        client = RawClient(proxy.url.replace("/mcp", "/servers/pair/mcp"), http)
        before, _ = await all_names(client)
        assert "fast__echo" in before and "memory__read_graph" in before
        parked = await client.call("fast__ask_name")  # parked on fast when it dies
        fast.peer.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(fast.peer.process.wait(), 10)
        with capture_logs() as logs:
            # Its cached pages are given until list_cache_ms (0.5 s) has passed.
            during = await eventually(
                lambda: shorter_than(client, before), "the list to leave the dead upstream out"
            )
        assert during == [n for n in before if n.startswith("memory__")]  # the list shrinks, still answers
        assert any(e["event"] == "route.upstream_left_out" and e["upstream"] == "fast" for e in logs)
        assert "entities" in text_of(await client.call("memory__read_graph"))  # the others keep working
        dead = await client.call("fast__echo", {"text": "x"})
        assert dead.error["code"] == -31001 and "'fast'" in dead.error["message"]
        lost = await client.retry(parked, {"elicit-1": accept_name()}, "fast__ask_name")
        assert "error" in lost.body
        async with http.get(proxy.url.replace("/mcp", "/readyz")) as resp:
            ready = await resp.json()
        assert ready["routes"]["pair"]["upstreams"]["fast"].startswith("left out of lists (unavailable")
        assert ready["routes"]["pair"]["upstreams"]["memory"] == "listed"
        async with http.get(proxy.url.replace("/mcp", "/metrics")) as resp:
            metrics = await resp.text()
        assert 'mrtr_proxy_route_left_out_total{reason="unavailable",route="pair",upstream="fast"}' in metrics
        assert (
            'mrtr_proxy_route_left_out_total{reason="unavailable",route="pair",upstream="fast"} 0.0'
            not in metrics
        )
        async with peers.start_fastmcp(port=port):  # it comes back on the same address
            after = await eventually(lambda: same_as(client, before), "the list to grow back")
            assert after == before
            assert text_of(await client.call("fast__echo", {"text": "back"})) == "back"
            async with http.get(proxy.url.replace("/mcp", "/readyz")) as resp:
                assert (await resp.json())["routes"]["pair"]["upstreams"]["fast"] == "listed"


async def test_scope_and_claim_rules_per_tool_with_validate_mode_on_the_route(fastmcp_url: str) -> None:
    """One gateway, two teams: the same server's `add` only for tokens with the `math` scope, memory's delete
    tools only for tokens whose `groups` claim has `ops`."""
    key, iss, resource = (
        SigningKey("k1"),
        "https://as.example.test",
        "https://mcp.example.test/servers/team/mcp",
    )
    memory = stdio("memory", peers.server_memory_entry())
    async with contextlib.AsyncExitStack() as stack:
        keys = await stack.enter_async_context(jwks_server())
        keys.document = jwks(key)
        auth = AuthConfig(
            mode="validate", public_url=resource, authorization_servers=(iss,), jwks_url=keys.url
        )
        rules = ToolPolicy(
            require_scopes={"fast__add": ("math",)}, require_claims={"memory__delete_*": {"groups": ("ops",)}}
        )
        route = RouteConfig("team", (RouteMember("fast"), RouteMember("memory")), tools=rules, auth=auth)
        proxy = await stack.enter_async_context(
            running_proxy(fastmcp_url, names=("fast",), extra=(memory,), routes=(route,))
        )
        http = await stack.enter_async_context(aiohttp.ClientSession())
        url = proxy.url.replace("/mcp", "/servers/team/mcp")

        def team(scope: str, **extra: Any) -> RawClient:
            token = key.mint(claims(iss=iss, aud=resource, sub=f"user-{scope}", scope=scope, **extra))
            return RawClient(url, http, capabilities=dict(NO_ROOTS_CAPS), authorization=f"Bearer {token}")

        anonymous = await RawClient(url, http).request("tools/list")
        assert anonymous.status == 401 and "resource_metadata=" in anonymous.headers["WWW-Authenticate"]
        plain, math = team("mcp"), team("mcp math")
        plain_names, _ = await all_names(plain)
        math_names, _ = await all_names(math)
        assert "fast__add" not in plain_names and "fast__add" in math_names
        assert set(math_names) - set(plain_names) == {"fast__add"}
        with capture_logs() as logs:
            refused = await plain.call("fast__add", {"a": 1, "b": 2})
        assert refused.error == {
            "code": -32602,
            "message": "Tool 'fast__add' needs the scope math, which the access token lacks",
        }
        (line,) = [e for e in logs if e["event"] == "route.tool_refused"]
        assert line["reason"] == "insufficient_scope" and line["principal"] != "anonymous"
        assert text_of(await math.call("fast__add", {"a": 1, "b": 2})) == "3"
        assert text_of(await plain.call("fast__echo", {"text": "ok"})) == "ok"  # the rest is everyone's
        ops = team("mcp", groups=["staff", "ops"])
        ops_names, _ = await all_names(ops)
        deleting = {n for n in ops_names if n.startswith("memory__delete_")}
        assert deleting and not deleting & set(plain_names)  # by a claim: only the ops group sees them
        denied = await plain.call("memory__delete_entities", {"entityNames": ["x"]})
        why = "Tool 'memory__delete_entities' is not available to this access token (claim 'groups')"
        assert denied.error == {"code": -32602, "message": why}
        assert "error" not in (await ops.call("memory__delete_entities", {"entityNames": ["x"]})).body


async def test_progress_through_the_aggregate(fleet: Fleet) -> None:
    client = fleet.client("fleet")
    body = client.body("tools/call", {"name": "fast__progress_steps", "arguments": {"steps": 2}})
    body["params"]["_meta"]["progressToken"] = "agg-1"
    reply = await client.send(body)
    assert reply.result["resultType"] == "complete"
    tokens = [
        n["params"]["progressToken"] for n in reply.notifications if n["method"] == "notifications/progress"
    ]
    assert tokens == ["agg-1", "agg-1"]


async def test_a_task_on_an_aggregated_route(fastmcp_url: str) -> None:
    """tools/call as a task on the route; tasks/get and tasks/update find the upstream by the task id."""

    memory = stdio("memory", peers.server_memory_entry())
    route = RouteConfig("pair", (RouteMember("memory"), RouteMember("fast")))
    async with (
        running_proxy(
            fastmcp_url,
            names=("fast",),
            extra=(memory,),
            routes=(route,),
            tasks=TasksConfig(policy="always", poll_interval_ms=50),
        ) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(
            proxy.url.replace("/mcp", "/servers/pair/mcp"), http, capabilities=dict(WITH_TASKS)
        )
        task = created(await client.call("fast__work_then_ask", {"delay_s": 0.1, "after_s": 0.1}))
        asking = await wait_for(client, task["taskId"], "input_required")
        assert list(asking["inputRequests"]) == ["elicit-1"]
        ack = await client.request(
            "tasks/update", {"taskId": task["taskId"], "inputResponses": {"elicit-1": accept_name("Ada")}}
        )
        assert ack.result == {"resultType": "complete"}
        done = await wait_for(client, task["taskId"], "completed", "failed", "cancelled")
        assert done["result"]["content"][0]["text"] == "worked:accept:Ada"


async def test_three_replicas_behind_nginx_serve_the_aggregate() -> None:
    """Retries land on any replica (forwarded to the one holding the call); the list's cursor, sealed with the
    shared key, is continued by whichever replica the balancer picks."""

    async with peers.start_fastmcp(page_size=10) as fast, peers.start_server_everything() as everything:
        more = {
            "upstreams": [{"name": "fast", "url": str(fast)}, {"name": "everything", "url": str(everything)}],
            "routes": [{"name": "fleet", "default": True, "upstreams": ["fast", "everything"]}],
        }
        async with (
            cluster(str(fast), 3, more=more) as group,
            round_robin(group.replicas) as lb,
            aiohttp.ClientSession() as http,
        ):
            client = RawClient(lb, http, capabilities=dict(NO_ROOTS_CAPS))
            one = RawClient(
                f"http://127.0.0.1:{group.replicas[0].port}/mcp", http, capabilities=dict(NO_ROOTS_CAPS)
            )
            expected, _ = await all_names(one)
            for _ in range(3):  # each page may come from another replica
                names, pages = await all_names(client)
                assert names == expected and pages > 3

            async def flow(i: int) -> str:
                first = await client.call("fast__ask_name")
                final = await client.retry(first, {"elicit-1": accept_name(f"r{i}")}, "fast__ask_name")
                return text_of(final)

            results = await asyncio.gather(*(flow(i) for i in range(12)))
            assert results == [f"accept:r{i}" for i in range(12)]
            # A request's line is written just after its response.
            await eventually(
                lambda: any(
                    line.get("forwarded_by") and line.get("route") == "fleet"
                    for r in group.replicas
                    for line in log_lines(r)
                    if line.get("event") == "request"
                ),
                "a forwarded request line on the fleet route",
            )


@contextlib.asynccontextmanager
async def hanging_lists() -> AsyncIterator[str]:
    """A hostile legacy server: it initializes, then never answers a list (it holds the request open)."""

    async def mcp(request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405)
        msg = await request.json()
        if "id" not in msg:
            return web.Response(status=202)
        if msg["method"] == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hangs", "version": "1"},
            }
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        if msg["method"].endswith("/list"):
            await asyncio.sleep(60)  # longer than any list timeout; cut when the test's server closes
        error = {"code": -32601, "message": "Method not found"}
        return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "error": error})

    app = web.Application()
    app.router.add_route("*", "/mcp", mcp)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/mcp"))
    finally:
        await server.close()


async def test_a_slow_upstream_is_left_out_after_the_list_timeout(fastmcp_url: str) -> None:
    async with hanging_lists() as slow:
        route = RouteConfig("pair", (RouteMember("slow"), RouteMember("fast")), list_timeout_s=1)
        async with (
            running_proxy(
                fastmcp_url, names=("fast",), extra=(UpstreamConfig(name="slow", url=slow),), routes=(route,)
            ) as proxy,
            aiohttp.ClientSession() as http,
        ):
            client = RawClient(proxy.url.replace("/mcp", "/servers/pair/mcp"), http)
            with capture_logs() as logs:
                reply = await client.request("tools/list")
            names = [t["name"] for t in reply.result["tools"]]
            assert "fast__echo" in names and not [n for n in names if n.startswith("slow__")]
            left = [e for e in logs if e["event"] == "route.upstream_left_out"]
            assert [(e["upstream"], e["reason"]) for e in left] == [("slow", "timeout")]
            async with http.get(proxy.url.replace("/mcp", "/metrics")) as resp:
                metrics = await resp.text()
            assert (
                'mrtr_proxy_route_left_out_total{reason="timeout",route="pair",upstream="slow"} 1.0'
                in metrics
            )
            assert text_of(await client.call("fast__echo", {"text": "unaffected"})) == "unaffected"


async def test_completion_goes_to_the_upstream_of_the_prompt_or_template(fleet: Fleet) -> None:
    client = fleet.client("fleet")
    prompt = {"type": "ref/prompt", "name": "everything__completable-prompt"}
    done = await client.request(
        "completion/complete", {"ref": prompt, "argument": {"name": "department", "value": "S"}}
    )
    assert done.result["completion"]["values"] == ["Sales", "Support"]
    template = {"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"}
    done = await client.request(
        "completion/complete", {"ref": template, "argument": {"name": "resourceId", "value": "1"}}
    )
    assert done.result["completion"]["values"]  # server-everything's completer answered
    unknown = await client.request(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "nobody__x"}, "argument": {"name": "a", "value": ""}},
    )
    assert unknown.error == {"code": -32602, "message": "Unknown completion reference on this route"}


async def test_an_upstream_behind_a_route_only_cannot_be_called_around_its_policy(fastmcp_url: str) -> None:
    """`standalone: false`: the upstream's own route is gone, so the route's deny rule is the only way in."""
    fast = UpstreamConfig(name="fast", url=fastmcp_url, standalone=False)
    memory = stdio("memory", peers.server_memory_entry())
    route = RouteConfig(
        "gate",
        (RouteMember("fast"), RouteMember("memory")),
        default=True,
        tools=ToolPolicy(deny=("fast__ask_*",)),
    )
    async with (
        running_proxy(fast, names=("fast",), extra=(memory,), routes=(route,)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        around = RawClient(proxy.url.replace("/mcp", "/servers/fast/mcp"), http)
        assert (await around.request("tools/list")).status == 404
        client = RawClient(proxy.url, http, capabilities=dict(NO_ROOTS_CAPS))  # /mcp: the default route
        names, _ = await all_names(client)
        assert "fast__echo" in names and "memory__read_graph" in names and "fast__ask_name" not in names
        assert (await client.call("fast__ask_name")).error["code"] == -32602
        assert text_of(await client.call("fast__echo", {"text": "through the gate"})) == "through the gate"
        alone = RawClient(proxy.url.replace("/mcp", "/servers/memory/mcp"), http)
        assert "entities" in text_of(await alone.call("read_graph"))  # a standalone member keeps its route


async def test_typescript_client_in_legacy_mode(fleet: Fleet) -> None:
    """The TypeScript client at 2025-11-25 on the aggregate: the whole plan (a legacy upstream's elicitation
    inline on its stream, every member's tools, a prompt, a resource), through the mirror."""
    url = fleet.client("fleet").url
    run = await peers.run_once(
        [str(peers.node_bin()), str(TS_DRIVER), url, "legacy", json.dumps(MODERN_PLAN)], limit_s=90
    )
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert "connectError" not in out, out
    assert out["client"]["protocolVersion"] != "2026-07-28"
    await check_plan(out["steps"], fleet)


async def test_mcp_1_30_client_on_the_aggregate(fleet: Fleet) -> None:
    """mcp 1.30's ClientSession (legacy only): elicitation answered inline, every member under its name."""
    plan = [
        {"id": "ask", "name": "fast__ask_name", "elicit": "accept"},
        {"id": "sum", "name": "everything__get-sum", "args": {"a": 4, "b": 5}},
        {"id": "memory", "name": "memory__read_graph"},
        {"id": "files", "name": "files__list_allowed_directories"},
    ]
    run = await peers.run_once(
        [str(peers.legacy_python()), str(LEGACY_DRIVER), "mcp", fleet.client("fleet").url, json.dumps(plan)],
        limit_s=90,
    )
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    steps = json.loads(run.stdout)["steps"]
    assert steps["ask"]["text"] == "accept:Ada" and steps["ask"]["seen"] == ["elicit:form"], steps
    assert "9" in steps["sum"]["text"]
    assert "entities" in steps["memory"]["text"]
    assert str(fleet.files) in steps["files"]["text"]


async def test_a_host_name_routes_mcp_to_an_aggregated_route(fastmcp_url: str) -> None:
    memory = stdio("memory", peers.server_memory_entry())
    route = RouteConfig("fleet", (RouteMember("fast"), RouteMember("memory")), hosts=("fleet.mcp.example",))
    async with (
        running_proxy(fastmcp_url, names=("fast",), extra=(memory,), routes=(route,)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http)
        for host, first in (("fleet.mcp.example:8443", "fast__echo"), ("other.example", "echo")):
            body = client.body("tools/list")
            reply = await client.send(body, {**client.headers(body), "Host": host})
            assert reply.result["tools"][0]["name"] == first  # the route's names, else the first upstream's


@pytest.mark.parametrize("kind", ["fastmcp4", "mcp2"])
async def test_legacy_and_modern_upstreams_mix_in_one_route(fastmcp_url: str, kind: str) -> None:
    """FastMCP 1.30 (legacy) beside FastMCP 4.2.3 (two eras) or the mcp 2.3.0 server (2026-07-28 only): one
    list, one discover; a modern upstream's calls take the native relay under its own name (its own
    `input_required`, its requestState bound by the proxy), a legacy one's the MRTR way."""
    start = peers.start_fastmcp4() if kind == "fastmcp4" else peers.start_mcp2_server()
    route = RouteConfig("mix", (RouteMember("fast"), RouteMember("modern")))
    async with (
        start as modern,
        running_proxy(
            fastmcp_url,
            names=("fast",),
            extra=(UpstreamConfig(name="modern", url=str(modern)),),
            routes=(route,),
        ) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(
            proxy.url.replace("/mcp", "/servers/mix/mcp"), http, capabilities=dict(NO_ROOTS_CAPS)
        )
        names, _ = await all_names(client)
        assert {"fast__ask_name", "modern__echo", "modern__guard_name"} <= set(names)
        assert names.index("fast__echo") < names.index("modern__echo")  # route order
        discover = (await client.request("server/discover")).result
        assert {"tools", "prompts"} <= set(discover["capabilities"])
        first = await client.call("modern__guard_name")
        assert first.result["resultType"] == "input_required" and list(first.result["inputRequests"]) == [
            "name"
        ]
        state = {"requestState": first.result["requestState"]} if "requestState" in first.result else {}
        done = await client.call("modern__guard_name", inputResponses={"name": accept_name("Ada")}, **state)
        assert text_of(done) == "hello:Ada"
        asked = await client.call("fast__ask_name")
        final = await client.retry(asked, {"elicit-1": accept_name("Bo")}, "fast__ask_name")
        assert text_of(final) == "accept:Bo"
        ready = await (await http.get(proxy.url.replace("/mcp", "/readyz"))).json()
        assert ready["routes"]["mix"]["upstreams"] == {"fast": "listed", "modern": "listed"}
