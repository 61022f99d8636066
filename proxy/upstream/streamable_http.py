"""A legacy Streamable HTTP session (protocol 2025-03-26 … 2025-11-25) to one upstream server.

`initialize` → `notifications/initialized` → a standalone GET stream held open; every POST carries
`Mcp-Session-Id` and `MCP-Protocol-Version`; replies come as JSON or SSE (parsed with our own decoder).
Every server request, on whichever stream it arrives, goes to the one receiving call's inbox; responses go to
their waiter by id. `DELETE` on close.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import structlog

from proxy.upstream.base import Inbox, ServerInfo, TransportLost, UpstreamError
from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import SSEDecoder

log = structlog.get_logger(__name__)

CLIENT_INFO = {"name": "mrtr-proxy", "version": "0.1.0"}
ACCEPT = "application/json, text/event-stream"
GET_RETRY_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)

# Answers a session gives by itself to a server request that arrives with no receiving call (SEP-2260).
NoCallAnswer = Callable[[jsonrpc.Request], jsonrpc.Response]


@dataclass(frozen=True, slots=True)
class SessionSettings:
    url: str
    versions: tuple[str, ...]
    capabilities: Mapping[
        str, Any
    ]  # legacy capabilities declared at initialize; see ClientCapabilities.legacy
    headers: Mapping[str, str] = field(default_factory=dict)  # static + forwarded client headers
    initialize_timeout: float = 30.0


class StreamableHttpSession:
    """Implements `UpstreamSession` over legacy Streamable HTTP."""

    def __init__(self, http: aiohttp.ClientSession, settings: SessionSettings, no_call: NoCallAnswer) -> None:
        self._http = http
        self._settings = settings
        self._no_call = no_call
        self._ids = itertools.count(1)
        self._session_id: str | None = None
        self._info: ServerInfo | None = None
        self._alive = False
        self._waiters: dict[jsonrpc.RequestId, asyncio.Future[jsonrpc.Response]] = {}
        self._receiver: Inbox | None = None
        self._receiver_id: jsonrpc.RequestId | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._call_event_id: str | None = None  # last SSE event id on the receiving call's POST stream

    # -- properties ---------------------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def info(self) -> ServerInfo:
        if self._info is None:
            raise UpstreamError("session not initialized")
        return self._info

    @property
    def alive(self) -> bool:
        return self._alive

    @property
    def last_event_id(self) -> str | None:
        """The last SSE event id seen on the receiving call's stream (to resume it with Last-Event-ID)."""
        return self._call_event_id

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Initialize, negotiating the newest legacy version both sides speak, and open the GET stream."""
        problems = []
        for version in self._settings.versions:
            params = {
                "protocolVersion": version,
                "capabilities": dict(self._settings.capabilities),
                "clientInfo": CLIENT_INFO,
            }
            try:
                reply = await self._exchange_plain("initialize", params, self._settings.initialize_timeout)
            except UpstreamError as exc:
                problems.append(f"{version}: {exc}")
                continue
            if isinstance(reply, jsonrpc.Error):
                problems.append(f"{version}: {reply.error.message}")
                continue
            negotiated = reply.result.get("protocolVersion")
            if negotiated not in self._settings.versions:
                problems.append(f"{version}: upstream answered with unsupported version {negotiated!r}")
                continue
            self._info = ServerInfo(
                protocol_version=str(negotiated),
                capabilities=_mapping(reply.result.get("capabilities")),
                server_info=_mapping(reply.result.get("serverInfo")),
                instructions=_str_or_none(reply.result.get("instructions")),
            )
            self._alive = True
            await self.send(jsonrpc.Notification(mcp.INITIALIZED, {}))
            get_ready = asyncio.Event()
            self._spawn(self._run_get_stream(get_ready))
            # Servers drop messages for the standalone stream while none is connected: no call before it is.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.initialize_timeout):
                    await get_ready.wait()
            return
        raise UpstreamError("initialize failed: " + "; ".join(problems))

    async def close(self) -> None:
        was_alive, self._alive = self._alive, False
        self._fail_all("session closed")
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if was_alive and self._session_id is not None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self._http.delete(
                    self._settings.url, headers=self._headers(), timeout=aiohttp.ClientTimeout(total=5)
                ):
                    pass

    # -- UpstreamSession ----------------------------------------------------------------------------------

    async def call(self, method: str, params: Mapping[str, Any], inbox: Inbox) -> jsonrpc.RequestId:
        if self._receiver is not None:
            raise RuntimeError("a receiving call is already running on this session")
        rid = next(self._ids)
        self._receiver, self._receiver_id, self._call_event_id = inbox, rid, None
        self._spawn(self._post_call(jsonrpc.Request(rid, method, params), inbox))
        return rid

    def end_call(self) -> None:
        self._receiver = self._receiver_id = None

    async def request(self, method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        return await self._exchange_plain(method, params, timeout)

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        try:
            async with self._http.post(
                self._settings.url, data=jsonrpc.dumps(message), headers=self._headers(post=True)
            ) as resp:
                if resp.status == 404 and self._session_id is not None:
                    self._die("upstream no longer knows the session (HTTP 404)")
                if resp.status >= 400:
                    raise UpstreamError(f"upstream answered HTTP {resp.status} to a {_kind(message)}")
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"could not reach upstream: {type(exc).__name__}") from None

    # -- internals ----------------------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _headers(self, *, post: bool = False) -> dict[str, str]:
        headers = dict(self._settings.headers)
        headers["Accept"] = ACCEPT if post else "text/event-stream"
        if post:
            headers["Content-Type"] = "application/json"
        if self._session_id is not None:
            headers["Mcp-Session-Id"] = self._session_id
        if self._info is not None and self._info.protocol_version >= "2025-06-18":
            headers["MCP-Protocol-Version"] = self._info.protocol_version
        return headers

    async def _exchange_plain(
        self, method: str, params: Mapping[str, Any], timeout: float
    ) -> jsonrpc.Response:
        rid = next(self._ids)
        waiter: asyncio.Future[jsonrpc.Response] = asyncio.get_running_loop().create_future()
        self._waiters[rid] = waiter
        try:
            async with asyncio.timeout(timeout):
                await self._post_and_read(jsonrpc.Request(rid, method, params), rid)
                return await waiter
        except TimeoutError:
            raise UpstreamError(f"upstream did not answer {method} within {timeout:g}s") from None
        finally:
            self._waiters.pop(rid, None)

    async def _post_call(self, req: jsonrpc.Request, inbox: Inbox) -> None:
        try:
            await self._post_and_read(req, req.id)
        except UpstreamError as exc:
            inbox.put_nowait(TransportLost(str(exc)))
        except asyncio.CancelledError:
            inbox.put_nowait(TransportLost("session closed"))
            raise

    async def _post_and_read(self, req: jsonrpc.Request, rid: jsonrpc.RequestId) -> None:
        """POST a request and dispatch everything its reply carries, until the response with `rid`."""
        try:
            async with self._http.post(
                self._settings.url, data=jsonrpc.dumps(req), headers=self._headers(post=True)
            ) as resp:
                if req.method == "initialize" and "mcp-session-id" in resp.headers:
                    self._session_id = resp.headers["mcp-session-id"]
                if resp.status == 404 and self._session_id is not None and req.method != "initialize":
                    self._die("upstream no longer knows the session (HTTP 404)")
                    raise UpstreamError("upstream session expired (HTTP 404)")
                if resp.status >= 400:
                    body = (await resp.content.read(300)).decode(errors="replace")
                    raise UpstreamError(f"upstream answered HTTP {resp.status}: {body}")
                ctype = resp.headers.get("Content-Type", "")
                if ctype.startswith("text/event-stream"):
                    track = self._track_call_event if rid == self._receiver_id else None
                    if not await self._read_sse(resp, until=rid, on_event_id=track):
                        raise UpstreamError("upstream ended the stream before answering")
                else:
                    self._dispatch(jsonrpc.decode(await resp.read()))
        except jsonrpc.InvalidMessage as exc:
            raise UpstreamError(f"upstream sent an invalid JSON-RPC message: {exc}") from None
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"could not reach upstream: {type(exc).__name__}: {exc}") from None

    async def _read_sse(
        self,
        resp: aiohttp.ClientResponse,
        until: jsonrpc.RequestId | None,
        *,
        standalone: bool = False,
        on_event_id: Callable[[str], None] | None = None,
    ) -> bool:
        """Dispatch the stream's messages; True once the response with id `until` was seen.

        Event ids belong to their stream: `on_event_id` is told each one (for that stream's resumption)."""
        decoder = SSEDecoder()
        async for chunk in resp.content.iter_any():
            for event in decoder.feed(chunk):
                if event.id is not None and on_event_id is not None:
                    on_event_id(event.id)
                if not event.data.strip():
                    continue  # priming event (SEP-1699)
                try:
                    msg = jsonrpc.decode(event.data)
                except jsonrpc.InvalidMessage as exc:
                    log.warning("upstream.bad_message", error=str(exc))
                    continue
                self._dispatch(msg, standalone=standalone)
                if until is not None and isinstance(msg, jsonrpc.Result | jsonrpc.Error) and msg.id == until:
                    return True
        return False

    async def _run_get_stream(self, ready: asyncio.Event) -> None:
        """Hold the standalone GET stream open: servers send unrelated requests (sampling, roots) on it.

        `ready` is set once the stream is up, or known to be unavailable."""
        failures = 0
        position = _StreamPosition()  # this stream's own last event id, for Last-Event-ID on reconnect
        while self._alive:
            headers = self._headers()
            if position.last_id is not None:
                headers["Last-Event-ID"] = position.last_id
            try:
                async with self._http.get(
                    self._settings.url, headers=headers, timeout=aiohttp.ClientTimeout(sock_connect=10)
                ) as resp:
                    if resp.status == 405:
                        ready.set()
                        return  # the server offers no standalone stream
                    if resp.status == 404:
                        ready.set()
                        self._die("upstream no longer knows the session (HTTP 404)")
                        return
                    if resp.status != 200:
                        raise UpstreamError(f"GET stream answered HTTP {resp.status}")
                    failures = 0
                    ready.set()
                    await self._read_sse(resp, until=None, standalone=True, on_event_id=position.saw)
            except (aiohttp.ClientError, UpstreamError, TimeoutError) as exc:
                failures += 1
                log.debug("upstream.get_stream_lost", error=str(exc), failures=failures)
            if failures >= len(GET_RETRY_DELAYS):
                ready.set()
                log.warning("upstream.get_stream_gave_up", session=self._session_id)
                return
            await asyncio.sleep(GET_RETRY_DELAYS[min(failures, len(GET_RETRY_DELAYS) - 1)])

    def _track_call_event(self, event_id: str) -> None:
        self._call_event_id = event_id

    def _dispatch(self, msg: jsonrpc.Message, *, standalone: bool = False) -> None:
        """Route one upstream message: responses by id, server requests to the receiving call, and the
        call's own notifications (progress, logging) to it too. Notifications on the standalone stream are
        session-wide (list changes, resource updates), never part of a call's reply."""
        if isinstance(msg, jsonrpc.Result | jsonrpc.Error):
            if msg.id is not None and msg.id == self._receiver_id and self._receiver is not None:
                self._receiver.put_nowait(msg)
                return
            waiter = self._waiters.get(msg.id) if msg.id is not None else None
            if waiter is not None and not waiter.done():
                waiter.set_result(msg)
            return
        if isinstance(msg, jsonrpc.Notification):
            if self._receiver is not None and not standalone:
                self._receiver.put_nowait(msg)
            return
        if self._receiver is not None:
            self._receiver.put_nowait(msg)
        else:
            self._spawn(self._answer_quietly(self._no_call(msg)))

    async def _answer_quietly(self, reply: jsonrpc.Response) -> None:
        with contextlib.suppress(UpstreamError):
            await self.send(reply)

    def _die(self, reason: str) -> None:
        self._alive = False
        self._fail_all(reason)

    def _fail_all(self, reason: str) -> None:
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(UpstreamError(reason))
        if self._receiver is not None:
            self._receiver.put_nowait(TransportLost(reason))


@dataclass(slots=True)
class _StreamPosition:
    last_id: str | None = None

    def saw(self, event_id: str) -> None:
        self.last_id = event_id


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _kind(message: jsonrpc.Response | jsonrpc.Notification) -> str:
    return "notification" if isinstance(message, jsonrpc.Notification) else "response"


__all__ = ["SessionSettings", "StreamableHttpSession"]
