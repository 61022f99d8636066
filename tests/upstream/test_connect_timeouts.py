"""`timeouts.connect_s` on the stdio and sse transports (issue 20, item 7), through the configuration the
proxy really uses (upstream/connect.py): a command that starts and never answers, an sse endpoint that
accepts the TCP connection and never answers. Each is given up after connect_s, after one initialize offer
(not one per protocol version, each waiting initialize_s)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

import aiohttp
import pytest

from proxy.config import TimeoutsConfig, UpstreamConfig
from proxy.upstream.base import UpstreamError
from proxy.upstream.connect import open_upstream_session
from proxy.upstream.pool_sessions import no_call_answer

pytestmark = pytest.mark.asyncio(loop_scope="session")
SILENT = "import sys, time; sys.stdin.readline(); time.sleep(120)"  # reads the initialize, never answers
TIMEOUTS = TimeoutsConfig(connect_s=0.5, initialize_s=60)  # initialize_s would hold the test for minutes


@contextlib.asynccontextmanager
async def silent_tcp() -> AsyncIterator[int]:
    """Accepts connections, reads what comes, never writes a byte."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def open_failing(upstream: UpstreamConfig) -> str:
    async with aiohttp.ClientSession() as http:
        with pytest.raises(UpstreamError) as failed:
            async with asyncio.timeout(30):  # a bound on the test, far above connect_s
                await open_upstream_session(
                    http, upstream, versions=upstream.protocol_versions, capabilities={}, headers={},
                    no_call=no_call_answer(upstream),
                )  # fmt: skip
    return str(failed.value)


async def test_a_stdio_command_that_never_answers_is_given_up_after_connect_s() -> None:
    upstream = UpstreamConfig(
        name="silent", transport="stdio", command=sys.executable, args=("-c", SILENT), timeouts=TIMEOUTS
    )
    message = await open_failing(upstream)
    assert message == "initialize failed: 2025-11-25: upstream did not answer initialize within 0.5s"


async def test_an_sse_endpoint_that_accepts_but_never_answers_is_given_up_after_connect_s() -> None:
    async with silent_tcp() as port:
        upstream = UpstreamConfig(
            name="silent", transport="sse", url=f"http://127.0.0.1:{port}/sse", timeouts=TIMEOUTS
        )
        message = await open_failing(upstream)
    assert message == "upstream sent no endpoint event within 0.5s (timeouts.connect_s)"
