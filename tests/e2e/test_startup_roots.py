"""Roots a server asks for at start-up, before any call, reach the 2026-07-28 client (issue 15).

server-filesystem started with no directory arguments sends `roots/list` right after `initialized` and
serves only the directories its client's roots name. Through the proxy the session holds that request; the
first call asks the client in its first `input_required` round, before the call is sent upstream. Later
calls on the session are asked for their client's roots too; a client with other roots (same principal,
same pooled session) gets them applied via `notifications/roots/list_changed`. server-filesystem applies
roots asynchronously, so the test waits for them (bounded polling of `list_allowed_directories`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import RawClient, Reply, RunningProxy, running_proxy
from proxy.config import UpstreamConfig
from proxy.process.app import POOLS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ROUNDS = 4  # a call here needs at most two rounds; more is a bug


def filesystem() -> UpstreamConfig:
    peers.require_peers({"node 22": peers.node_bin(), "server-filesystem": peers.server_filesystem_entry()})
    return UpstreamConfig(
        name="default",
        transport="stdio",
        command=str(peers.node_bin()),
        args=(str(peers.server_filesystem_entry()),),
    )


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy() -> AsyncIterator[RunningProxy]:
    async with running_proxy(filesystem()) as running:
        yield running


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    first, second = (tmp_path_factory.mktemp(n).resolve() for n in ("window-a", "window-b"))
    (first / "notes.txt").write_text("from window A, ünïcode\n", encoding="utf-8")
    (first / "sub").mkdir()
    (second / "other.txt").write_text("from window B\n", encoding="utf-8")
    return first, second


def roots_of(directory: Path) -> dict[str, Any]:
    return {"roots": [{"uri": directory.as_uri(), "name": directory.name}]}


async def call(
    client: RawClient, roots: dict[str, Any], name: str, **arguments: Any
) -> tuple[Reply, list[str]]:
    """`tools/call`, answering every roots/list round with `roots`; also returns the methods asked."""
    asked: list[str] = []
    reply = await client.call(name, arguments)
    for _ in range(ROUNDS):
        result = reply.result
        if result.get("resultType") != "input_required":
            return reply, asked
        requests = result["inputRequests"]
        asked += [r["method"] for r in requests.values()]
        assert {r["method"] for r in requests.values()} == {"roots/list"}, requests
        reply = await client.retry(reply, {k: roots for k in requests}, name, arguments)
    raise AssertionError(f"{name}: still input_required after {ROUNDS} rounds")


def text(reply: Reply) -> str:
    return str(reply.result["content"][0]["text"])


async def allowed_once_applied(client: RawClient, roots: dict[str, Any], directory: Path) -> str:
    async def allowed() -> str | None:  # the server applies roots a moment after it asked for them
        reply, _ = await call(client, roots, "list_allowed_directories")
        return text(reply) if str(directory) in text(reply) else None

    return await eventually(allowed, f"{directory} to become an allowed directory")


async def test_the_start_up_request_is_asked_of_the_first_call(
    proxy: RunningProxy, dirs: tuple[Path, Path]
) -> None:
    first, _ = dirs
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        discover = await client.request("server/discover")  # opens the session: the server asks for roots
        assert discover.result["resultType"] == "complete"
        # The start-up request reaches the first call's first round, or (when it came while that call ran
        # and the call finished first) the next one's: the proxy holds it for the session either way.
        reply, asked = await call(client, roots_of(first), "list_allowed_directories")
        if not asked:
            reply, asked = await call(client, roots_of(first), "list_allowed_directories")
        assert asked == ["roots/list"]
        assert text(reply).startswith("Allowed directories:")
        listed = await allowed_once_applied(client, roots_of(first), first)
        assert listed.splitlines()[1:] == [str(first)]
        read, _ = await call(client, roots_of(first), "read_text_file", path=str(first / "notes.txt"))
        assert text(read) == "from window A, ünïcode\n"
        entries, _ = await call(client, roots_of(first), "list_directory", path=str(first))
        assert sorted(text(entries).splitlines()) == ["[DIR] sub", "[FILE] notes.txt"]


async def test_another_client_of_the_principal_gets_its_own_roots(
    proxy: RunningProxy, dirs: tuple[Path, Path]
) -> None:
    first, second = dirs
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        _, asked = await call(client, roots_of(second), "list_allowed_directories")
        assert asked == ["roots/list"]  # asked again: the session's server cached the previous client's
        listed = await allowed_once_applied(client, roots_of(second), second)
        assert str(first) not in listed
        read, _ = await call(client, roots_of(second), "read_text_file", path=str(second / "other.txt"))
        assert text(read) == "from window B\n"
        outside, _ = await call(client, roots_of(second), "read_text_file", path=str(first / "notes.txt"))
        assert outside.result.get("isError") is True
        assert "Access denied" in text(outside)


# -- roots a tool asks inside a call are that call's, not the session's (issue 29 item 13) ------------------

ROOTS = {"roots": [{"uri": "file:///work/project", "name": "project"}]}


@pytest.mark.parametrize("tool", ["roots", "roots_inline"])
async def test_roots_a_tool_asks_inside_a_call_cost_later_calls_no_round(fastmcp_url: str, tool: str) -> None:
    """FastMCP 1.30 asks roots only inside the tool that needs them (on the GET stream, or tied to the call):
    the later calls of the session, tools that never ask roots included, begin with their own work."""
    async with running_proxy(fastmcp_url) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        reply, asked = await call(client, ROOTS, tool)
        assert (asked, text(reply)) == (["roots/list"], "file:///work/project")
        for _ in range(3):
            plain = await client.call("echo", {"text": "plain"})
            assert plain.result["resultType"] == "complete", plain.body
            assert text(plain) == "plain"
        again, asked = await call(client, ROOTS, tool)
        assert text(again) == "file:///work/project"
        assert asked == ["roots/list"]  # the tool's own question, once: no extra round before it
        assert proxy.app[POOLS]["default"].size == 1  # one session served every call


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def conformance_url() -> AsyncIterator[str]:
    """The conformance suite's MRTR scenarios as a legacy FastMCP 1.30 server (tests/fixtures/)."""
    script = peers.FIXTURES_DIR / "conformance_legacy_server.py"

    def argv(port: int) -> list[str]:
        return [str(peers.legacy_python()), str(script), "--port", str(port)]

    async with peers.run_peer("conformance-legacy", argv) as server:
        yield f"http://127.0.0.1:{server.port}/mcp"


async def test_the_conformance_scenarios_in_sequence_on_one_proxy(conformance_url: str) -> None:
    """As the conformance suite runs them: `list_roots`, then the two-step elicitation on the same session,
    whose first round must be its step 1 (it used to be a `roots-1` request)."""
    async with running_proxy(conformance_url) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        roots, asked = await call(client, ROOTS, "test_input_required_result_list_roots")
        assert asked == ["roots/list"]
        assert text(roots) == "Roots (1): project<file:///work/project>"
        first = await client.call("test_input_required_result_multi_round")
        requests = first.result["inputRequests"]
        assert [(k, r["method"]) for k, r in requests.items()] == [("elicit-1", "elicitation/create")], (
            requests
        )
        assert requests["elicit-1"]["params"]["message"] == "Step 1: What is your name?"
        second = await client.retry(
            first,
            {"elicit-1": {"action": "accept", "content": {"name": "Ann"}}},
            "test_input_required_result_multi_round",
        )
        step2 = second.result["inputRequests"]
        assert [r["params"]["message"] for r in step2.values()] == ["Step 2: What is your favorite color?"]
        done = await client.retry(
            second,
            {k: {"action": "accept", "content": {"color": "teal"}} for k in step2},
            "test_input_required_result_multi_round",
        )
        assert text(done) == "Ann likes teal"
