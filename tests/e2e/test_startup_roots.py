"""Roots a server asks for at start-up, before any call, reach the 2026-07-28 client (issue 15).

server-filesystem started with no directory arguments sends `roots/list` right after `initialized` and
serves only the directories its client's roots name. Through the proxy the session holds that request; the
first call asks the client in its first `input_required` round, before the call is sent upstream. Later
calls on the session are asked for their client's roots too; a client with other roots (same principal,
same pooled session) gets them applied via `notifications/roots/list_changed`. server-filesystem applies
roots asynchronously, so the test waits for them (bounded polling of `list_allowed_directories`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio

from e2e.harness import RawClient, Reply, RunningProxy, running_proxy
from proxy.config import UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ROUNDS = 4  # a call here needs at most two rounds; more is a bug
POLLS = 100  # list_allowed_directories at most this often while the server applies roots


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
    for _ in range(POLLS):
        reply, _ = await call(client, roots, "list_allowed_directories")
        if str(directory) in text(reply):
            return text(reply)
        await asyncio.sleep(0.05)
    raise AssertionError(f"{directory} never became an allowed directory: {text(reply)!r}")


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
