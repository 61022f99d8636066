"""The mirror (front/legacy/mirror/front.py) on the wire: legacy clients of 2026-07-28 upstreams.

Real legacy clients — mcp 1.30's ClientSession, the TS client 2.4.0 in `legacy` mode, FastMCP 4's Client in
`legacy` mode — against FastMCP 4.2.3's native tools (two eras), the mcp 2.3.0 SDK's own server (modern
only: it refuses `initialize`) and a FastMCP 4 fixture with the remaining flows (tests/fixtures/
mirror_server.py). Each upstream's `inputRequests` reach the client as inline requests on its POST stream,
its answers go back as `inputResponses`. A raw legacy client does what the real ones will not: never answer,
answer for another session, declare nothing, accept JSON only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import running_proxy
from e2e.replicas import cluster, log_lines, round_robin
from proxy.process.app import drain
from proxy.process.appstate import ERAS, MIRROR
from proxy.wire.sse import SSEDecoder

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

HERE = Path(__file__).parent
DRIVER = HERE / "clients" / "legacy_mirror_client.py"
TS_DRIVER = HERE.parent / "interop" / "clients" / "ts_client.mjs"
MIRROR_FIXTURE = peers.FIXTURES_DIR / "mirror_server.py"
FORM = {"born": "1815-12-10", "color": "green", "email": "ada@example.com", "name": "Ada", "size": "l"}
FORM_TEXT = "form:accept:" + json.dumps(FORM, sort_keys=True)


@contextlib.asynccontextmanager
async def start_mirror_fixture(port: int | None = None) -> AsyncIterator[str]:
    peers.require_peers({"fastmcp 4.x": peers.fastmcp4_python()})

    def argv(port: int) -> list[str]:
        return [str(peers.fastmcp4_python()), str(MIRROR_FIXTURE), str(port)]

    async with peers.run_peer("mirror-fixture", argv, env={"PYTHONUNBUFFERED": "1"}, port=port) as peer:
        yield f"http://127.0.0.1:{peer.port}/mcp"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fastmcp4_url() -> AsyncIterator[str]:
    async with peers.start_fastmcp4() as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mcp2_url() -> AsyncIterator[str]:
    async with peers.start_mcp2_server() as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def kinds_url() -> AsyncIterator[str]:
    async with start_mirror_fixture() as url:
        yield url


async def python_client(kind: str, url: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    python = peers.legacy_python() if kind == "mcp" else peers.fastmcp4_python()
    run = await peers.run_once([str(python), str(DRIVER), kind, url, json.dumps(plan)], limit_s=90)
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    out: dict[str, Any] = json.loads(run.stdout)
    return out


async def ts_client(url: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    argv = [str(peers.node_bin()), str(TS_DRIVER), url, "legacy", json.dumps(plan)]
    run = await peers.run_once(argv, limit_s=90)
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    out: dict[str, Any] = json.loads(run.stdout)
    assert out["client"]["era"] == "legacy" and out["client"]["protocolVersion"] == "2025-11-25", out
    return out


def texts(out: dict[str, Any]) -> dict[str, str]:
    return {k: v.get("text", v.get("error", "")) for k, v in out["steps"].items()}


NATIVE = [
    {"id": "one", "name": "guard_name"},
    {"id": "two", "name": "guard_two"},
    {"id": "progress", "name": "guard_progress", "args": {"steps": 2}},
    {"id": "declined", "name": "guard_name", "elicit": "decline"},
    {"id": "cancelled", "name": "guard_name", "elicit": "cancel"},
    {"id": "echo", "name": "echo", "args": {"text": "plain"}},
]
FASTMCP4_ONLY = [
    {"id": "pair", "name": "guard_pair"},
    {"id": "sample", "name": "guard_sample", "args": {"prompt": "capital?"}},
    {"id": "ctx_elicit", "name": "ask_name"},
]


@pytest.mark.parametrize("upstream", ["fastmcp4", "mcp2"])
async def test_mcp_1_30_client_uses_native_tools_through_the_mirror(
    upstream: str, fastmcp4_url: str, mcp2_url: str
) -> None:
    url = fastmcp4_url if upstream == "fastmcp4" else mcp2_url
    async with running_proxy(url) as proxy:
        plan = NATIVE + (FASTMCP4_ONLY if upstream == "fastmcp4" else [])
        out = await python_client("mcp", proxy.url, plan)
        era = "both" if upstream == "fastmcp4" else "modern"  # FastMCP 4 answers initialize too
        assert proxy.app[ERAS].describe() == {"default": era}
        assert len(proxy.app[MIRROR].calls) == 0  # nothing of a call outlives its POST
    assert out["protocolVersion"] == "2025-11-25"
    assert out["server"] == f"{upstream}-fixture"
    got, steps = texts(out), out["steps"]
    assert got["one"] == "hello:Ada" and steps["one"]["seen"] == ["elicit:form"]
    assert got["two"] == "two:Ada+Ada" and steps["two"]["seen"] == ["elicit:form", "elicit:form"]
    assert got["progress"] == "progress:Ada"
    assert steps["progress"]["progress"] == [[1, 4], [2, 4], [3, 4], [4, 4]]  # both rounds, one token
    assert [json.loads(x)["msg"] if x.startswith("{") else x for x in steps["progress"]["logs"]] == [
        "before",
        "after",
    ]
    assert (got["declined"], got["cancelled"], got["echo"]) == ("declined", "cancelled", "plain")
    if upstream == "fastmcp4":
        assert got["pair"] == "pair:Ada+Ada" and steps["pair"]["seen"] == ["elicit:form", "elicit:form"]
        assert got["sample"] == "sampled:Paris" and steps["sample"]["seen"] == ["sample"]
        # A two-era upstream: the legacy client's ctx.elicit tool goes the legacy way, as going direct
        # (FastMCP 4 refuses ctx.elicit on a 2026-07-28 request), and asks inline.
        assert got["ctx_elicit"] == "accept:Ada" and steps["ctx_elicit"]["seen"] == ["elicit:form"]


async def test_mcp_1_30_client_form_kinds_url_and_roots(kinds_url: str) -> None:
    plan = [
        {"id": "form", "name": "form_kinds"},
        {"id": "url", "name": "open_url"},
        {"id": "url_declined", "name": "open_url", "elicit": "decline"},
        {"id": "roots", "name": "list_roots"},
    ]
    async with running_proxy(kinds_url) as proxy:
        out = await python_client("mcp", proxy.url, plan)
    got = texts(out)
    assert got["form"] == FORM_TEXT  # enum, titled enum, email and date formats as the client filled them
    assert got["url"] == "url:accept" and out["steps"]["url"]["seen"] == ["elicit:url"]
    assert got["url_declined"] == "url:decline"
    assert got["roots"] == "roots:file:///work/project" and out["steps"]["roots"]["seen"] == ["roots"]


async def test_a_cancel_mid_round_ends_the_call_with_no_retry_upstream(kinds_url: str) -> None:
    """mcp 1.30's client sends notifications/cancelled while it is being asked: the call ends (no answer
    is due to a cancelled request, so the client's own read timeout ends its wait), and the upstream saw
    the first round only."""
    plan = [
        {"id": "before", "name": "calls"},
        {"id": "cancel", "name": "guard_counted", "cancel": True},
        {"id": "after", "name": "calls"},
    ]
    async with running_proxy(kinds_url) as proxy:
        out = await python_client("mcp", proxy.url, plan)
        assert len(proxy.app[MIRROR].calls) == 0
    got = texts(out)
    assert "Timed out" in got["cancel"] and out["steps"]["cancel"]["seen"] == ["cancel-sent", "elicit:form"]
    # Two runs upstream: the legacy way first (a two-era upstream: refused, guard_counted asks natively
    # only), then its first native round; nothing was retried after the cancel.
    assert int(got["after"]) == int(got["before"]) + 2


TS_PLAN = [
    {"id": "one", "kind": "tool", "name": "guard_name"},
    {"id": "two", "kind": "tool", "name": "guard_two"},
    {"id": "pair", "kind": "tool", "name": "guard_pair"},
    {"id": "sample", "kind": "tool", "name": "guard_sample", "args": {"prompt": "c?"}},
    {"id": "progress", "kind": "tool", "name": "guard_progress", "args": {"steps": 1}, "progress": True},
    {"id": "declined", "kind": "tool", "name": "guard_name", "elicit": "decline"},
    {"id": "cancelled", "kind": "tool", "name": "guard_name", "elicit": "cancel"},
    {"id": "tools", "kind": "list_tools"},
]


async def test_ts_client_in_legacy_mode(fastmcp4_url: str, kinds_url: str, mcp2_url: str) -> None:
    extra = (_upstream("kinds", kinds_url), _upstream("mcp2", mcp2_url))
    async with running_proxy(fastmcp4_url, extra=extra) as proxy:
        out = await ts_client(proxy.url, TS_PLAN)
        mcp2_plan = [TS_PLAN[0], TS_PLAN[1], TS_PLAN[4], TS_PLAN[5], TS_PLAN[6]]
        modern_only = await ts_client(proxy.url.replace("/mcp", "/servers/mcp2/mcp"), mcp2_plan)
        kinds_plan = [
            {"id": "form", "kind": "tool", "name": "form_kinds"},
            {"id": "url", "kind": "tool", "name": "open_url"},
            {"id": "roots", "kind": "tool", "name": "list_roots"},
        ]
        kinds = await ts_client(proxy.url.replace("/mcp", "/servers/kinds/mcp"), kinds_plan)
    got = texts(out)
    assert got["one"] == "hello:Alice" and out["steps"]["one"]["seen"] == ["elicit:form"]
    assert got["two"] == "two:Alice+Alice" and got["pair"] == "pair:Alice+Alice"
    assert got["sample"] == "sampled:Paris" and out["steps"]["sample"]["seen"] == ["sample"]
    assert got["progress"] == "progress:Alice"
    assert [p[0] for p in out["steps"]["progress"]["progress"]] == [1, 2]
    assert (got["declined"], got["cancelled"]) == ("declined", "cancelled")
    assert "guard_name" in got["tools"].split(",")
    m = texts(modern_only)
    assert (m["one"], m["two"], m["progress"], m["declined"], m["cancelled"]) == (
        "hello:Alice",
        "two:Alice+Alice",
        "progress:Alice",
        "declined",
        "cancelled",
    )
    k = texts(kinds)
    assert k["form"].startswith('form:accept:{"born": ') and '"color": "red"' in k["form"]
    assert k["url"] == "url:accept" and kinds["steps"]["url"]["seen"] == ["elicit:url"]
    assert k["roots"] == "roots:file:///work/project"


async def test_fastmcp_4_client_in_legacy_mode(fastmcp4_url: str, kinds_url: str, mcp2_url: str) -> None:
    extra = (_upstream("kinds", kinds_url), _upstream("mcp2", mcp2_url))
    async with running_proxy(fastmcp4_url, extra=extra) as proxy:
        modern_only = await python_client("fastmcp", proxy.url.replace("/mcp", "/servers/mcp2/mcp"), NATIVE)
        out = await python_client("fastmcp", proxy.url, [*NATIVE, FASTMCP4_ONLY[0], FASTMCP4_ONLY[1]])
        kinds = await python_client(
            "fastmcp",
            proxy.url.replace("/mcp", "/servers/kinds/mcp"),
            [
                {"id": "form", "name": "form_kinds"},
                {"id": "url", "name": "open_url"},
                {"id": "roots", "name": "list_roots"},
            ],
        )
    assert out["protocolVersion"] == "2025-11-25"
    got = texts(out)
    assert (got["one"], got["two"], got["pair"], got["sample"]) == (
        "hello:Ada",
        "two:Ada+Ada",
        "pair:Ada+Ada",
        "sampled:Paris",
    )
    assert got["progress"] == "progress:Ada" and len(out["steps"]["progress"]["progress"]) == 4
    assert (got["declined"], got["cancelled"]) == ("declined", "cancelled")
    k = texts(kinds)
    assert k["form"] == FORM_TEXT and k["url"] == "url:accept" and k["roots"] == "roots:file:///work/project"
    m = texts(modern_only)
    assert (m["one"], m["two"], m["progress"], m["declined"], m["cancelled"], m["echo"]) == (
        "hello:Ada",
        "two:Ada+Ada",
        "progress:Ada",
        "declined",
        "cancelled",
        "plain",
    )


def _upstream(name: str, url: str) -> Any:
    from proxy.config import UpstreamConfig

    return UpstreamConfig(name=name, url=url)


# -- a raw legacy client: what the real ones will not do -------------------------------------------------

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
Answerer = Callable[[dict[str, Any]], dict[str, Any] | None]


class RawLegacy:
    def __init__(self, url: str, http: aiohttp.ClientSession, authorization: str = "Bearer alice") -> None:
        self.url, self.http = url, http
        self.headers = {**HEADERS, "Authorization": authorization, "MCP-Protocol-Version": "2025-11-25"}
        self.ids = iter(range(1, 10_000))

    async def initialize(self, capabilities: dict[str, Any]) -> str:
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        async with self.http.post(self.url, json=body, headers=self.headers) as resp:
            assert resp.status == 200, await resp.text()
            self.headers["Mcp-Session-Id"] = resp.headers["Mcp-Session-Id"]
            await resp.read()
        return self.headers["Mcp-Session-Id"]

    async def answer(self, rid: Any, result: dict[str, Any], headers: dict[str, str] | None = None) -> int:
        body = {"jsonrpc": "2.0", "id": rid, "result": result}
        async with self.http.post(self.url, json=body, headers=headers or self.headers) as resp:
            await resp.read()
            return resp.status

    async def call(
        self,
        name: str,
        answerer: Answerer | None = None,
        *,
        accept: str | None = None,
        method: str = "tools/call",
        arguments: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> tuple[int, list[dict[str, Any]]]:
        """The call's HTTP status and every message of its answer (inline requests answered by `answerer`,
        left unanswered when it returns None). `params`: instead of the call's name and arguments."""
        body = {
            "jsonrpc": "2.0",
            "id": next(self.ids),
            "method": method,
            "params": params if params is not None else {"name": name, "arguments": arguments or {}},
        }
        headers = {**self.headers, **({"Accept": accept} if accept else {})}
        messages: list[dict[str, Any]] = []
        async with self.http.post(self.url, json=body, headers=headers) as resp:
            if resp.content_type != "text/event-stream":
                return resp.status, [await resp.json()]
            decoder = SSEDecoder()
            async for chunk in resp.content.iter_any():
                for event in decoder.feed(chunk):
                    if not event.data.strip():
                        continue
                    msg = json.loads(event.data)
                    messages.append(msg)
                    if "method" in msg and "id" in msg and answerer is not None:
                        result = answerer(msg)
                        if result is not None:
                            assert await self.answer(msg["id"], result) == 202
            return resp.status, messages


def accept_ada(_: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


ELICIT = {"elicitation": {}}


async def test_a_client_that_never_answers_gets_a_clear_error_and_nothing_is_left(fastmcp4_url: str) -> None:
    async with running_proxy(fastmcp4_url, parked_ttl_s=1.5) as proxy, aiohttp.ClientSession() as http:
        client = RawLegacy(proxy.url, http)
        await client.initialize(ELICIT)
        status, messages = await client.call("guard_name", answerer=None)
        assert status == 200
        asked, final = messages[0], messages[-1]
        assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "What is your name?"
        assert final["id"] == 1
        assert final["error"] == {
            "code": -32600,
            "message": "no answer to elicitation/create within 1.5s; the call was ended and not retried "
            "upstream",
        }
        assert len(proxy.app[MIRROR].calls) == 0
        assert await client.answer(asked["id"], accept_ada(asked)) == 404  # too late: no call waits for it


async def test_answers_are_bound_to_their_session_and_made_up_ids_are_refused(fastmcp4_url: str) -> None:
    async with running_proxy(fastmcp4_url, parked_ttl_s=3) as proxy, aiohttp.ClientSession() as http:
        alice, other = RawLegacy(proxy.url, http), RawLegacy(proxy.url, http)
        await alice.initialize(ELICIT)
        await other.initialize(ELICIT)
        statuses: list[int] = []

        def hijack(msg: dict[str, Any]) -> None:
            statuses.append(msg["id"])

        task = asyncio.ensure_future(alice.call("guard_name", answerer=hijack))
        await eventually(lambda: statuses or task.done(), "the mirror to ask alice's client for the name")
        assert statuses and not task.done(), task
        rid = statuses[0]
        assert await other.answer(rid, {"action": "accept", "content": {"name": "Mallory"}}) == 404
        assert await alice.answer("made-up", {"action": "accept", "content": {"name": "x"}}) == 404
        assert await alice.answer(rid, {"action": "accept", "content": {"name": "Ada"}}) == 202
        _status, messages = await task
        assert messages[-1]["result"]["content"][0]["text"] == "hello:Ada"


async def test_session_ids_are_sealed_bound_and_stateless(fastmcp4_url: str) -> None:
    async with running_proxy(fastmcp4_url) as proxy, aiohttp.ClientSession() as http:
        alice = RawLegacy(proxy.url, http)
        session = await alice.initialize({})
        alice.headers["Accept"] = "application/json"  # plain answers in one JSON body
        mallory = {**alice.headers, "Authorization": "Bearer mallory"}
        listed = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}
        async with http.post(proxy.url, json=listed, headers=mallory) as resp:
            assert resp.status == 404 and (await resp.json())["error"]["message"] == "Session not found"
        async with http.post(proxy.url, json=listed, headers=alice.headers) as resp:
            result = (await resp.json())["result"]
            assert {"echo", "guard_name"} <= {t["name"] for t in result["tools"]}
            assert not {"resultType", "ttlMs", "cacheScope"} & result.keys()  # a legacy client's list
        async with http.post(proxy.url, json={**listed, "method": "ping"}, headers=alice.headers) as resp:
            assert (await resp.json())["result"] == {}
        changed = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
        async with http.post(proxy.url, json=changed, headers=alice.headers) as resp:
            assert resp.status == 202  # honoured: roots are never cached, each roots/list asks afresh
        async with http.get(proxy.url, headers=alice.headers) as resp:
            assert resp.status == 406  # the GET stream (test_mirror_stream.py) is an event stream only
        async with http.delete(proxy.url, headers=alice.headers) as resp:
            assert resp.status == 200
        assert len(session) > 100


async def test_what_the_client_did_not_declare(fastmcp4_url: str) -> None:
    """A client that declared no elicitation: the upstream gets a declined elicitation (the answer a result
    can give); sampling has no such answer: the call ends with a clear error. A JSON-only client cannot be
    asked at all."""
    async with running_proxy(fastmcp4_url) as proxy, aiohttp.ClientSession() as http:
        client = RawLegacy(proxy.url, http)
        await client.initialize({})
        _, messages = await client.call("guard_name", answerer=accept_ada)
        assert [m for m in messages if "method" in m] == []  # nothing was asked of the client
        assert messages[-1]["result"]["content"][0]["text"] == "declined"
        _, messages = await client.call("guard_sample", answerer=accept_ada, arguments={"prompt": "p"})
        assert messages[-1]["error"]["message"] == (
            "The call cannot go on: the upstream asked for sampling, which your client did not declare at "
            "initialize"
        )
        json_only = RawLegacy(proxy.url, http)
        await json_only.initialize(ELICIT)
        status, messages = await json_only.call("guard_name", accept="application/json")
        assert status == 200 and "does not accept an event stream" in messages[0]["error"]["message"]


async def test_a_modern_only_server_refuses_legacy_clients_directly_and_serves_them_through_the_proxy(
    mcp2_url: str,
) -> None:
    async with aiohttp.ClientSession() as http:
        direct = RawLegacy(mcp2_url, http)
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        async with http.post(mcp2_url, json=init, headers=direct.headers) as resp:
            assert resp.status == 400
        async with running_proxy(mcp2_url) as proxy:
            client = RawLegacy(proxy.url, http)
            await client.initialize(ELICIT)
            _, messages = await client.call("guard_two", answerer=accept_ada)
            assert [m["method"] for m in messages if "method" in m] == ["elicitation/create"] * 2
            assert messages[-1]["result"] == {
                "content": [{"type": "text", "text": "two:Ada+Ada"}],
                "isError": False,
            } | {k: v for k, v in messages[-1]["result"].items() if k not in ("content", "isError")}
            assert "resultType" not in messages[-1]["result"]


# -- several replicas behind nginx ------------------------------------------------------------------------


async def test_three_replicas_behind_nginx_answers_land_on_other_replicas(fastmcp4_url: str) -> None:
    """Round robin over 3 replicas: a call's POST stream is held by one replica, the client's answers land
    on the others and are forwarded (signed) to it; every flow completes, any replica serves the session."""
    plan = [{"id": f"one{i}", "name": "guard_name"} for i in range(3)] + [
        {"id": "two", "name": "guard_two"},
        {"id": "pair", "name": "guard_pair"},
        {"id": "sample", "name": "guard_sample", "args": {"prompt": "c?"}},
        {"id": "progress", "name": "guard_progress", "args": {"steps": 1}},
    ]
    async with cluster(fastmcp4_url, 3) as group, round_robin(group.replicas) as lb:
        out = await python_client("mcp", lb, plan)
        ts = await ts_client(lb, TS_PLAN[:4])
        lines = [line for replica in group.replicas for line in log_lines(replica)]
    got = texts(out)
    assert [got[f"one{i}"] for i in range(3)] == ["hello:Ada"] * 3
    assert (got["two"], got["pair"], got["sample"], got["progress"]) == (
        "two:Ada+Ada",
        "pair:Ada+Ada",
        "sampled:Paris",
        "progress:Ada",
    )
    assert len(out["steps"]["progress"]["progress"]) == 2
    assert [texts(ts)[k] for k in ("one", "two", "pair", "sample")] == [
        "hello:Alice",
        "two:Alice+Alice",
        "pair:Alice+Alice",
        "sampled:Paris",
    ]
    forwarded = [line for line in lines if line.get("event") == "mirror.answer_forwarded"]
    assert len(forwarded) >= 3 and all(line["delivered"] for line in forwarded)
    served = {line.get("request_id") for line in lines if line.get("event") == "mirror.round"}
    assert served  # rounds were driven


async def test_a_cancel_that_lands_on_another_replica_reaches_the_call(kinds_url: str) -> None:
    """The client's notifications/cancelled names only its own request id: the replica it lands on asks
    its peers (`replica.peers`), and the one holding the call ends it; the upstream saw one round."""
    plan = [
        {"id": "before", "name": "calls"},
        {"id": "cancel", "name": "guard_counted", "cancel": True},
        {"id": "after", "name": "calls"},
    ]
    async with cluster(kinds_url, 3, peer_ports=True) as group, round_robin(group.replicas) as lb:
        out = await python_client("mcp", lb, plan)
        lines = [line for replica in group.replicas for line in log_lines(replica)]
    got = texts(out)
    assert "Timed out" in got["cancel"]
    assert int(got["after"]) == int(got["before"]) + 2  # the refused legacy attempt and one native round
    assert [line["event"] for line in lines if line.get("event") == "mirror.cancelled"] == [
        "mirror.cancelled"
    ]
    sent_on = [line for line in lines if line.get("event") == "mirror.cancel_sent_on"]
    assert all(line["found"] == 1 for line in sent_on)  # where it landed elsewhere, one peer held it


async def test_a_client_that_goes_away_mid_round_leaves_nothing(kinds_url: str) -> None:
    async with running_proxy(kinds_url) as proxy, aiohttp.ClientSession() as http:
        client = RawLegacy(proxy.url, http)
        await client.initialize(ELICIT)
        before = await client.call("calls")
        body = {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "guard_counted"}}
        async with http.post(proxy.url, json=body, headers=client.headers) as resp:
            decoder = SSEDecoder()
            asked = False
            async for chunk in resp.content.iter_any():
                if any("elicitation/create" in e.data for e in decoder.feed(chunk)):
                    asked = True
                    break
            assert asked
            resp.close()  # gone, with the inline request unanswered
        # The hang-up is noticed by the connection's loss (front/legacy/mirror/hangup.py).
        await eventually(lambda: len(proxy.app[MIRROR].calls) == 0, "the mirror to forget the call")
        after = await client.call("calls")
    count = [int(json.loads(m[1][-1]["result"]["content"][0]["text"])) for m in (before, after)]
    # The refused legacy attempt (guard_counted asks natively only) and one native round; nothing retried.
    assert count[1] == count[0] + 2


async def test_the_peer_route_refuses_what_no_replica_signed(fastmcp4_url: str) -> None:
    """Someone who is not a replica posts an answer, or a cancel, to the peer route: 401, nothing is
    delivered, and the call goes on to its end."""
    async with running_proxy(fastmcp4_url, parked_ttl_s=5) as proxy, aiohttp.ClientSession() as http:
        peer_url = proxy.url.replace("/mcp", "/_mrtr/peer/mirror")
        client = RawLegacy(proxy.url, http)
        await client.initialize(ELICIT)
        asked: list[dict[str, Any]] = []
        seen = asyncio.Event()

        def hold(msg: dict[str, Any]) -> None:
            asked.append(msg)
            seen.set()

        task = asyncio.ensure_future(client.call("guard_name", answerer=hold))
        async with asyncio.timeout(5):
            await seen.wait()
        forged = {
            "jsonrpc": "2.0",
            "id": asked[0]["id"],
            "result": {"action": "accept", "content": {"name": "M"}},
        }
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        for body in (forged, cancel):
            async with http.post(peer_url, json=body, headers={"X-Mrtr-Forwarded-By": "x:1"}) as resp:
                assert resp.status == 401
        assert await client.answer(asked[0]["id"], accept_ada(asked[0])) == 202
        _, messages = await task
        assert messages[-1]["result"]["content"][0]["text"] == "hello:Ada"


async def test_a_draining_replica_tells_waiting_clients_and_turns_new_calls_away(fastmcp4_url: str) -> None:
    """SIGTERM's drain: a legacy client still being asked when the grace ends is told the replica shut down
    (-31011, not retried upstream); a new call is turned away with 503 'not processed' (a balancer sends
    it on to another replica)."""
    async with running_proxy(fastmcp4_url, drain_grace_s=0.5) as proxy, aiohttp.ClientSession() as http:
        client = RawLegacy(proxy.url, http)
        await client.initialize(ELICIT)
        seen = asyncio.Event()
        task = asyncio.ensure_future(client.call("guard_name", answerer=lambda _: seen.set()))
        async with asyncio.timeout(5):
            await seen.wait()
        await drain(proxy.app)
        _, messages = await task
        assert messages[-1]["error"]["code"] == -31011
        assert "it was not retried upstream" in messages[-1]["error"]["message"]
        status, messages = await client.call("guard_name")
        assert status == 503 and messages[0]["error"] == {
            "code": -31005,  # as a modern client is told (calls/wording.py shutting_down)
            "message": "This proxy replica is shutting down; send the request again",
        }
        assert len(proxy.app[MIRROR].calls) == 0


async def test_an_upstream_replaced_by_a_legacy_server_sends_the_client_back_to_the_relay() -> None:
    """The two-era server on a port is replaced by a legacy one (FastMCP 1.30) while the proxy runs: the
    mirror session's next tool call is served (the legacy way first), its next request that goes straight
    at 2026-07-28 is answered the legacy way, so it gets 404 (a legacy client initializes
    again), the era is probed again, and the new session is relayed to the legacy server."""
    port = peers.free_port()
    async with running_proxy(f"http://127.0.0.1:{port}/mcp") as proxy, aiohttp.ClientSession() as http:
        client = RawLegacy(proxy.url, http)
        async with start_mirror_fixture(port=port):
            await client.initialize(ELICIT)
            _, messages = await client.call("guard_counted", answerer=accept_ada)
            assert messages[-1]["result"]["content"][0]["text"] == "counted:Ada"
        async with peers.start_fastmcp(port=port):
            # The upstream was two-era (`both`): a tools/call goes the legacy way first, so a call may still
            # be served by the legacy server (inline), or land on the legacy session pooled from the old
            # server (its 404 found at first use: -31001, not re-run — the known race of an in-place swap);
            # once the era is probed again (legacy), the session's next request is 404 "Session not found".
            status, messages = 200, []
            for _ in range(4):  # bounded
                status, messages = await client.call("ask_name", answerer=accept_ada)
                if status == 404:
                    break
                last = messages[-1]
                assert last.get("result", {}).get("content", [{}])[0].get("text") == "accept:Ada" or (
                    last.get("error", {}).get("code") == -31001
                ), messages
                status, messages = await client.call("", method="tools/list", params={})
                if status == 404:
                    break
            assert status == 404 and messages[0]["error"]["message"] == "Session not found"
            del client.headers["Mcp-Session-Id"]
            await client.initialize(ELICIT)
            _, messages = await client.call("ask_name", answerer=accept_ada)
            assert messages[-1]["result"]["content"][0]["text"] == "accept:Ada"  # relayed, inline
        assert proxy.app[ERAS].describe() == {"default": "legacy"}


async def test_prompts_resources_and_lists_relay_to_the_modern_upstream(kinds_url: str) -> None:
    async with running_proxy(kinds_url) as proxy, aiohttp.ClientSession() as http:
        client = RawLegacy(proxy.url, http)
        client.headers["Accept"] = "application/json"
        await client.initialize({})

        async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
            async with http.post(proxy.url, json=body, headers=client.headers) as resp:
                answer: dict[str, Any] = await resp.json()
            assert "resultType" not in answer.get("result", {}), answer
            return answer

        prompts = await rpc("prompts/list", {})
        assert [p["name"] for p in prompts["result"]["prompts"]] == ["greeting"]
        got = await rpc("prompts/get", {"name": "greeting", "arguments": {"name": "Ada"}})
        assert got["result"]["messages"][0]["content"]["text"] == "Hello, Ada!"
        resources = await rpc("resources/list", {})
        assert [r["uri"] for r in resources["result"]["resources"]] == ["mirror://info"]
        read = await rpc("resources/read", {"uri": "mirror://info"})
        assert read["result"]["contents"][0]["text"] == "mirror fixture"
        missing = await rpc("tools/call", {"name": "no_such_tool", "arguments": {}})
        assert "no_such_tool" in json.dumps(missing)  # the upstream's own answer, as it gave it
