"""The lean client for upstream POSTs (proxy/upstream/lean_http.py, lean_response.py): against a real
aiohttp server (keep-alive, chunked SSE answers, Content-Length answers, TLS with a private CA made here),
then against raw servers scripted to misbehave. Each test says what the caller sees: a `LeanHttpError` (an
aiohttp.ClientError, so the transports word it as they word aiohttp's), `ConnectFailed` for what was
certainly never sent, an `UpstreamError` for an encoded answer, `MessageTooLarge` for a body over the limit.
Connections are counted on the server's side: a reused connection is the same peer port."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from e2e.tls_certs import issue, make_ca
from waiting import eventually

from proxy.config import TlsConfig
from proxy.upstream.base import NotDelivered, UpstreamError
from proxy.upstream.bounded import MessageTooLarge, read_body
from proxy.upstream.http_errors import unreachable
from proxy.upstream.keepalive import finish_body, leave
from proxy.upstream.lean_http import IDLE_TTL, ConnectFailed, HeadTimeout, LeanClient
from proxy.upstream.lean_response import ResponseUnreadable, ServerDisconnected
from proxy.upstream.tls import client_context

pytestmark = pytest.mark.asyncio(loop_scope="session")

BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}'
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def post(client: LeanClient, url: str, **kwargs: object) -> bytes:
    """POST BODY, read the whole answer, leave it (its connection back to the pool if it may be)."""
    resp = await client.post(url, BODY, HEADERS, connect_timeout=5, **kwargs)  # type: ignore[arg-type]
    try:
        async with asyncio.timeout(10):
            return await resp.read()
    finally:
        await leave(resp)


# -- a real aiohttp server -----------------------------------------------------------------------------------


@dataclass
class Seen:
    ports: list[int] = field(default_factory=list)  # each request's peer port: one per connection
    heads: list[dict[str, str]] = field(default_factory=list)


@contextlib.asynccontextmanager
async def aiohttp_server(ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[tuple[str, Seen]]:
    seen = Seen()

    async def answer(request: web.Request) -> web.StreamResponse:
        seen.ports.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        seen.heads.append(dict(request.headers))
        body = await request.read()
        if request.path == "/sse":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for n in range(3):
                await resp.write(b"data: %d\n\n" % n)
            await resp.write_eof()
            return resp
        return web.json_response({"echo": body.decode()})

    app = web.Application()
    app.router.add_post("/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


async def test_json_answers_reuse_one_connection_and_ask_for_no_encoding() -> None:
    async with aiohttp_server() as (url, seen):
        client = LeanClient()
        try:
            for _ in range(3):
                assert await post(client, url + "/mcp") == b'{"echo": "' + BODY.replace(b'"', b'\\"') + b'"}'
        finally:
            await client.close()
    assert len(set(seen.ports)) == 1  # one keep-alive connection for the three POSTs
    assert seen.heads[0]["Accept-Encoding"] == "identity"
    assert seen.heads[0]["Content-Type"] == "application/json"


async def test_send_writes_at_once_on_an_idle_connection_and_its_watcher_sees_the_answer_come() -> None:
    """`send` (call_reply.py's POST): None while no connection is idle (nothing written: `post` connects);
    on an idle one, the request is written before it returns, and the response's watcher is told of the head
    and the body's end as they come, the buffered body then taken without waiting."""
    async with aiohttp_server() as (url, seen):
        client = LeanClient()
        try:
            assert client.send(url + "/mcp", BODY, HEADERS) is None
            assert seen.ports == []
            await post(client, url + "/mcp")  # a connection, now idle in the pool
            resp = client.send(url + "/mcp", BODY, HEADERS)
            assert resp is not None and resp.head_pending
            changed = asyncio.Event()
            resp.watch(changed.set)
            async with asyncio.timeout(10):
                while not resp.ended:
                    await changed.wait()
                    changed.clear()
            assert resp.status == 200 and resp.error is None
            assert resp.take().startswith(b'{"echo": ') and resp.take() == b""
            resp.watch(None)
            resp.release()
            assert client.idle == 1
        finally:
            await client.close()
    assert len(set(seen.ports)) == 1  # both POSTs on one connection


async def test_a_chunked_sse_answer_streams_and_its_connection_is_reused() -> None:
    async with aiohttp_server() as (url, seen):
        client = LeanClient()
        try:
            resp = await client.post(url + "/sse", BODY, HEADERS, connect_timeout=5)
            assert (resp.status, resp.content_type) == (200, "text/event-stream")
            assert resp.headers["content-type"] == resp.headers.get("CONTENT-TYPE")  # any case
            got = b""
            async with asyncio.timeout(10):
                while chunk := await resp.content.readany():
                    got += chunk
            assert got == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
            assert resp.content.at_eof()
            await leave(resp)
            await post(client, url + "/mcp")
        finally:
            await client.close()
    assert len(set(seen.ports)) == 1


async def test_tls_with_a_private_ca_verifies_and_without_it_fails_to_connect(tmp_path: Path) -> None:
    """With the CA (upstreams[].tls.ca_file): answered on one reused connection. With the system CAs: the
    certificate is not verified, ConnectFailed ("Cannot connect to host https://127.0.0.1:P ssl:default
    [[SSL: CERTIFICATE_VERIFY_FAILED] …]"), and the transports read that as certainly not delivered."""
    ca = make_ca(tmp_path, "ca")
    server_cert = issue(tmp_path, "server", ca, server=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(server_cert.cert, server_cert.key)
    ctx = client_context(TlsConfig(ca_file=ca[0].cert), "upstreams[0]")
    async with aiohttp_server(server_ctx) as (url, seen):
        client = LeanClient()
        try:
            await post(client, url + "/mcp", tls=ctx)
            await post(client, url + "/mcp", tls=ctx)
            assert len(set(seen.ports)) == 1
            with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED") as failed:
                await post(client, url + "/mcp")
        finally:
            await client.close()
    lost: list[str] = []
    assert isinstance(unreachable(failed.value, lost.append), NotDelivered)
    assert lost and lost[0].startswith("could not connect to upstream: Cannot connect to host https://")


async def test_a_refused_connection_is_not_delivered() -> None:
    with socket_bound() as port:
        client = LeanClient()
        with pytest.raises(ConnectFailed, match=f"Cannot connect to host http://127.0.0.1:{port} ssl:none"):
            await post(client, f"http://127.0.0.1:{port}/mcp")
        await client.close()


@contextlib.contextmanager
def socket_bound() -> Iterator[int]:
    """A port nothing listens on (bound, never listening: a connection to it is refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


# -- raw servers scripted to misbehave -----------------------------------------------------------------------

Script = Callable[[int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Raw:
    url: str
    connections: int = 0
    hung_up: asyncio.Queue[int] = field(default_factory=asyncio.Queue)  # connections the client closed


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    return head + await reader.readexactly(int(length[1]) if length else 0)


@contextlib.asynccontextmanager
async def raw(script: Script) -> AsyncIterator[Raw]:
    """A raw HTTP/1.1 server on 127.0.0.1: each connection runs `script(n, …)` (n: its number from 0),
    then waits for the client to hang up and records it in `hung_up`."""
    state = Raw("")

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        n, state.connections = state.connections, state.connections + 1
        try:
            async with asyncio.timeout(10):
                with contextlib.suppress(asyncio.IncompleteReadError):  # hung up while a request was due
                    await script(n, reader, writer)
                while await reader.read(65536):
                    pass
                state.hung_up.put_nowait(n)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    state.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    try:
        yield state
    finally:
        server.close()
        async with asyncio.timeout(5):
            await server.wait_closed()


def answering(*answers: bytes, dribble: bool = False) -> Script:
    """Each request on a connection gets the next of `answers` (with `dribble`, a byte per write)."""

    async def script(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in answers:
            await read_request(reader)
            for part in [answer[i : i + 1] for i in range(len(answer))] if dribble else [answer]:
                writer.write(part)
                await writer.drain()
                if dribble:
                    await asyncio.sleep(0)  # the scripted server: each byte a write (and a read) of its own

    return script


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


async def posts(url: str, n: int, client: LeanClient | None = None) -> list[bytes]:
    own = client is None
    client = client or LeanClient()
    try:
        return [await post(client, url) for _ in range(n)]
    finally:
        if own:
            await client.close()


async def test_a_head_dribbled_a_byte_at_a_time_reads_whole() -> None:
    async with raw(answering(OK, OK, dribble=True)) as server:
        assert await posts(server.url, 2) == [b"{}", b"{}"]
    assert server.connections == 1


async def test_chunk_extensions_and_trailers_are_read_past_and_the_connection_reused() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2;name=value\r\n{}\r\n1;x\r\n \r\n0\r\nX-Trailer: t\r\nX-Other: o\r\n\r\n"
    )
    async with raw(answering(chunked, chunked)) as server:
        assert await posts(server.url, 2) == [b"{} ", b"{} "]
    assert server.connections == 1


async def test_bytes_after_a_content_length_body_drop_the_connection() -> None:
    """A body longer than its Content-Length: the first Content-Length bytes are the answer, the rest is
    read as nothing (not as the next answer): that connection is dropped, the next POST opens another."""
    long = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}SMUGGLED"
    async with raw(answering(long, OK)) as server:
        assert await posts(server.url, 2) == [b"{}", b"{}"]
        async with asyncio.timeout(10):
            assert await server.hung_up.get() == 0
    assert server.connections == 2


async def test_a_body_shorter_than_its_content_length_then_close_fails_the_read() -> None:
    """ServerDisconnected: "Server disconnected (the connection closed before the end of the body)"."""
    short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"

    async def script(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answering(short)(0, reader, writer)
        writer.close()

    async with raw(script) as server:
        with pytest.raises(ServerDisconnected, match=r"closed before the end of the body"):
            await posts(server.url, 1)


async def test_a_body_until_the_close_is_read_whole_and_not_reused() -> None:
    async def script(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answering(b"HTTP/1.1 200 OK\r\n\r\n{}")(0, reader, writer)
        writer.close()

    async with raw(script) as server:
        assert await posts(server.url, 2) == [b"{}", b"{}"]
    assert server.connections == 2


async def test_content_length_beside_transfer_encoding_is_refused() -> None:
    """Request smuggling's lever: ResponseUnreadable with llhttp's reason ("Transfer-Encoding can't be
    present with Content-Length"); the connection is closed."""
    both = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    async with raw(answering(both)) as server:
        with pytest.raises(ResponseUnreadable, match="Transfer-Encoding can't be present with Content-Len"):
            await posts(server.url, 1)
        async with asyncio.timeout(10):
            assert await server.hung_up.get() == 0


async def test_an_oversize_head_is_refused_and_an_oversize_body_is_message_too_large() -> None:
    """A head over 64 KiB: ResponseUnreadable ("response head too large"). A body over
    max_message_bytes: MessageTooLarge ("upstream sent a message larger than 100 bytes …"), its connection
    closed, whether its Content-Length announced it or it came chunked."""
    fields = b"".join(b"X-Filler-%d: %s\r\n" % (n, b"x" * 4000) for n in range(20))
    huge_head = b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 2\r\n\r\n{}"
    async with raw(answering(huge_head)) as server:
        with pytest.raises(ResponseUnreadable, match="response head too large"):
            await posts(server.url, 1)
    big = b"x" * 300
    # (the rest of the announced body not sent yet: an answer that arrived whole leaves a clean connection)
    announced = b"HTTP/1.1 200 OK\r\nContent-Length: 300\r\n\r\n" + big[:100]
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
        b"32\r\n" + big[i : i + 50] + b"\r\n" for i in range(0, 300, 50)
    )  # no last chunk: the server keeps sending
    for answer in (announced, chunked):
        async with raw(answering(answer)) as server:
            client = LeanClient()
            resp = await client.post(server.url, BODY, HEADERS, connect_timeout=5)
            with pytest.raises(MessageTooLarge, match="larger than 100 bytes"):
                async with asyncio.timeout(10):
                    await read_body(resp, 100)
            async with asyncio.timeout(10):
                assert await server.hung_up.get() == 0
            await client.close()


async def test_an_interim_100_continue_is_skipped() -> None:
    async with raw(answering(b"HTTP/1.1 100 Continue\r\n\r\n" + OK, OK)) as server:
        assert await posts(server.url, 2) == [b"{}", b"{}"]
    assert server.connections == 1


async def test_connection_close_is_honoured() -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
    async with raw(answering(closing)) as server:
        assert await posts(server.url, 2) == [b"{}", b"{}"]
    assert server.connections == 2


async def test_unsolicited_bytes_on_an_idle_connection_drop_it_without_an_error() -> None:
    async def script(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answering(OK)(0, reader, writer)
        await asyncio.sleep(0.05)  # the hostile server: unsolicited bytes a moment later
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]")  # nobody asked

    async with raw(script) as server:
        client = LeanClient()
        try:
            assert await post(client, server.url) == b"{}"
            async with asyncio.timeout(10):
                assert await server.hung_up.get() == 0  # the client dropped it at once
            assert await post(client, server.url) == b"{}"  # on a new connection, not "[]"
        finally:
            await client.close()
    assert server.connections == 2


async def test_a_server_closing_an_idle_connection_costs_the_next_post_nothing() -> None:
    async def script(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answering(OK)(0, reader, writer)
        writer.write_eof()  # the server's half of the connection closed; it reads on

    async with raw(script) as server:
        client = LeanClient()
        try:
            assert await post(client, server.url) == b"{}"
            async with asyncio.timeout(10):  # the client closed its half too: dropped from the pool
                assert await server.hung_up.get() == 0
            assert client.idle == 0
            assert await post(client, server.url) == b"{}"
        finally:
            await client.close()
    assert server.connections == 2


async def test_an_encoded_answer_is_refused_and_nothing_decoded() -> None:
    """UpstreamError: "upstream answered with Content-Encoding 'gzip', which the proxy did not ask for
    (Accept-Encoding: identity): refused, nothing of it decoded"; the connection is closed."""
    gzip = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n\x1f\x8b\x08\x00"
    async with raw(answering(gzip)) as server:
        with pytest.raises(UpstreamError, match=r"Content-Encoding 'gzip'.*refused, nothing of it decoded"):
            await posts(server.url, 1)


async def test_a_server_that_never_answers_is_bounded() -> None:
    """With a head timeout: HeadTimeout ("no response head within 0.2s"). Without one (the sessions' POSTs:
    a tool may run for minutes), the caller's own bound cancels it. Either way the connection is closed."""

    async def silent(_: int, reader: asyncio.StreamReader, __: asyncio.StreamWriter) -> None:
        await read_request(reader)

    async with raw(silent) as server:
        client = LeanClient()
        try:
            with pytest.raises(HeadTimeout, match=r"no response head within 0.2s"):
                await post(client, server.url, head_timeout=0.2)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await post(client, server.url)
            async with asyncio.timeout(10):
                assert {await server.hung_up.get(), await server.hung_up.get()} == {0, 1}
        finally:
            await client.close()


async def test_a_reset_after_the_request_was_written_is_not_certainly_undelivered() -> None:
    """The server read the request and hung up: ServerDisconnected, which the transports read as "could
    not reach upstream" (an UpstreamError, never NotDelivered: the tool may have run)."""

    async def hang_up(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    async with raw(hang_up) as server:
        with pytest.raises(ServerDisconnected, match="closed before the response head") as failed:
            await posts(server.url, 1)
    error = unreachable(failed.value, lambda _: None)
    assert type(error) is UpstreamError
    assert str(error).startswith("could not reach upstream: ServerDisconnected: ")


async def test_a_consumer_cancelled_mid_body_closes_the_connection() -> None:
    async def stream(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        if n == 0:  # an SSE answer that goes on
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\ndata:\r\n")
        else:
            writer.write(OK)

    async with raw(stream) as server:
        client = LeanClient()
        try:
            resp = await client.post(server.url, BODY, HEADERS, connect_timeout=5)

            reading = asyncio.Event()  # the first piece of the body came: the consumer is inside it

            async def consume() -> None:
                try:
                    while await resp.content.readany():
                        reading.set()
                finally:
                    await leave(resp)

            task = asyncio.create_task(consume())
            async with asyncio.timeout(10):
                await reading.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            async with asyncio.timeout(10):
                assert await server.hung_up.get() == 0  # closed, not back in the pool
            assert await post(client, server.url) == b"{}"
        finally:
            await client.close()
    assert server.connections == 2


async def test_a_large_answer_pauses_reading_until_drained_and_arrives_whole() -> None:
    piece = b"y" * 65536
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"10000\r\n" + piece + b"\r\n" for _ in range(64))
        + b"0\r\n\r\n"
    )
    async with raw(answering(chunked, OK)) as server:
        client = LeanClient()
        try:
            resp = await client.post(server.url, BODY, HEADERS, connect_timeout=5)
            # The server writes on; the client stops reading once past its bound (its connection paused).
            await eventually(lambda: resp._paused, "the client to pause reading past its bound", 10)
            assert resp._buffered < 1024 * 1024  # of 4 MiB sent
            async with asyncio.timeout(10):
                assert len(await resp.read()) == 64 * 65536
            await leave(resp)
            assert await post(client, server.url) == b"{}"  # the same connection, reading again
        finally:
            await client.close()
    assert server.connections == 1


async def test_finish_body_reads_a_finished_answer_and_idle_connections_expire() -> None:
    async with raw(answering(OK)) as server:
        client = LeanClient(idle_ttl=0.1)
        try:
            resp = await client.post(server.url, BODY, HEADERS, connect_timeout=5)
            assert await finish_body(resp)
            await leave(resp)
            async with asyncio.timeout(10):
                assert await server.hung_up.get() == 0  # closed by the idle sweep
        finally:
            await client.close()


async def test_a_header_that_could_add_a_line_is_not_sent() -> None:
    """UpstreamError: "the request cannot be sent: header 'X-Bad' cannot be sent"; nothing is written."""
    async with raw(answering(OK)) as server:
        client = LeanClient()
        with pytest.raises(UpstreamError, match="header 'X-Bad' cannot be sent"):
            await client.post(server.url, BODY, {"X-Bad": "a\r\nInjected: 1"}, connect_timeout=5)
        await client.close()
    assert server.connections == 0


async def test_lean_errors_are_aiohttp_client_errors() -> None:
    """So the transports' `except aiohttp.ClientError` words them as they word aiohttp's."""
    assert issubclass(ServerDisconnected, aiohttp.ClientError)
    assert issubclass(ConnectFailed, aiohttp.ClientError)


async def test_a_connection_is_not_reused_past_the_servers_keep_alive_time() -> None:
    """uvicorn (FastMCP, the SDKs' servers) and Node close a keep-alive connection idle for 5 s. A request
    written into it as that happens meets the close, not an answer, and fails — never retried, since it
    might have been delivered. The server below models that moment deterministically: a request arriving
    on a connection idle for 5 s or more is met by the close (its FIN 'crossing' the request). IDLE_TTL is
    below 5 s, so the client opens a new connection instead; with aiohttp's 15 s it failed the call."""
    keep_alive_s = 5.0  # uvicorn's timeout_keep_alive and Node's keepAliveTimeout default
    assert keep_alive_s > IDLE_TTL

    async def script(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        answered = None
        while True:
            await read_request(reader)
            if answered is not None and loop.time() - answered >= keep_alive_s:
                writer.transport.abort()  # the server's close, crossing the request
                return
            writer.write(OK)
            await writer.drain()
            answered = loop.time()

    async def two_calls(ttl: float) -> bytes:
        client = LeanClient(idle_ttl=ttl)
        try:
            assert await post(client, server.url) == b"{}"
            await asyncio.sleep(keep_alive_s + 0.1)  # the scenario: past the pooled connection's idle TTL
            return await post(client, server.url)
        finally:
            await client.close()

    async with raw(script) as server:
        ours, aiohttps = await asyncio.gather(two_calls(IDLE_TTL), two_calls(15.0), return_exceptions=True)
    assert ours == b"{}"  # a new connection for the second call
    assert isinstance(aiohttps, aiohttp.ClientError)  # the pooled connection was taken, and the call failed
    assert server.connections == 3
