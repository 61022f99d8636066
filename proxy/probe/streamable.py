"""Talking to a legacy Streamable HTTP server as a legacy client: POSTs (JSON or SSE answers), the
standalone GET stream, a dropped stream resumed with Last-Event-ID, DELETE."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping

import aiohttp

from proxy.probe.channel import ProbeError, Recorder, answer, decode
from proxy.probe.findings import Check, Resumability
from proxy.probe.http import (
    HttpConversation,
    bounded_body,
    describe,
    refuse_unauthorized,
    sse_events,
    start_of,
)
from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import SSEEvent

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
POST_ACCEPT = "application/json, text/event-stream"


class StreamableConversation(HttpConversation):
    """One legacy session (once `initialize` has answered with a session id)."""

    def __init__(
        self, http: aiohttp.ClientSession, url: str, headers: Mapping[str, str], recorder: Recorder
    ) -> None:
        super().__init__(http, url, headers, recorder)
        self.session_id: str | None = None
        self.version: str | None = None
        self.content_types: set[str] = set()
        self._ids = itertools.count(1)
        self._get_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def headers(self, accept: str = POST_ACCEPT) -> dict[str, str]:
        out = {**self._headers, "Accept": accept}
        if self.session_id is not None:
            out[SESSION_HEADER] = self.session_id
        if self.version is not None:
            out[VERSION_HEADER] = self.version
        return out

    async def _post(self, body: bytes) -> aiohttp.ClientResponse:
        headers = {**self.headers(), "Content-Type": "application/json"}
        response = await self._http.post(self.url, data=body, headers=headers)
        refuse_unauthorized(response)
        return response

    async def notify(self, method: str, params: jsonrpc.JSONObject) -> None:
        response = await self._post(jsonrpc.dumps(jsonrpc.Notification(method, params)))
        response.release()

    async def _reply(self, message: jsonrpc.Response) -> None:
        response = await self._post(jsonrpc.dumps(message))
        response.release()

    async def request(self, method: str, params: jsonrpc.JSONObject, timeout: float) -> jsonrpc.Response:
        rid = next(self._ids)
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange(rid, method, params)
        except TimeoutError:
            raise ProbeError(f"{method}: no answer within {timeout:g}s") from None

    async def _exchange(self, rid: int, method: str, params: jsonrpc.JSONObject) -> jsonrpc.Response:
        response = await self._post(jsonrpc.dumps(jsonrpc.Request(rid, method, params)))
        try:
            if method == "initialize" and SESSION_HEADER in response.headers:
                self.session_id = response.headers[SESSION_HEADER]
            if response.status != 200:
                raise ProbeError(f"POST {method} answered {describe(response, await start_of(response))}")
            self.content_types.add(response.content_type)
            if response.content_type == "application/json":
                message = decode((await bounded_body(response)).decode(errors="replace"))
                if isinstance(message, jsonrpc.Result | jsonrpc.Error):
                    return message
                raise ProbeError(f"{method}: the JSON body is not a JSON-RPC response")
            if response.content_type != "text/event-stream":
                raise ProbeError(f"POST {method} answered {describe(response, await start_of(response))}")
            async for event in sse_events(response):
                message = decode(event.data) if event.data else None
                if isinstance(message, jsonrpc.Request):
                    self.recorder.saw(message.method)
                    await self._reply(answer(message))
                elif isinstance(message, jsonrpc.Result | jsonrpc.Error) and message.id == rid:
                    return message
            raise ProbeError(f"{method}: the event stream ended without the response")
        finally:
            response.close()

    # -- the standalone GET stream ---------------------------------------------------------------------------

    async def open_get_stream(self, timeout: float) -> Check:
        """Open the GET stream and keep answering what arrives on it until `close`."""
        opened: asyncio.Future[Check] = asyncio.get_running_loop().create_future()
        self._get_task = asyncio.create_task(self._listen(opened))
        try:
            return await asyncio.wait_for(asyncio.shield(opened), timeout)
        except TimeoutError:
            return Check("no", f"no answer within {timeout:g}s")

    async def _listen(self, opened: asyncio.Future[Check]) -> None:
        try:
            async with self._http.get(self.url, headers=self.headers("text/event-stream")) as response:
                if response.status != 200 or response.content_type != "text/event-stream":
                    opened.set_result(Check("no", describe(response, await start_of(response))))
                    return
                opened.set_result(Check("yes", "HTTP 200 text/event-stream"))
                async for event in sse_events(response):
                    message = decode(event.data) if event.data else None
                    if isinstance(message, jsonrpc.Request):
                        self.recorder.saw(message.method, on_get_stream=True)
                        task = asyncio.create_task(self._reply(answer(message)))
                        self._tasks.add(task)
                        task.add_done_callback(self._tasks.discard)
        except (aiohttp.ClientError, ProbeError) as exc:
            if not opened.done():
                opened.set_result(Check("no", f"{type(exc).__name__}: {exc}"))

    # -- resumability ---------------------------------------------------------------------------------------

    async def resumability(self, timeout: float) -> Resumability:
        """POST a `ping`, drop its stream after the first event, and ask for the rest with Last-Event-ID."""
        try:
            async with asyncio.timeout(timeout):
                return await self._resume_ping()
        except TimeoutError:
            return Resumability("no", f"no answer within {timeout:g}s while resuming a dropped stream")
        except (aiohttp.ClientError, ProbeError) as exc:
            return Resumability("unknown", f"the probe failed: {exc}")

    async def _resume_ping(self) -> Resumability:
        rid = f"resume-{next(self._ids)}"
        response = await self._post(jsonrpc.dumps(jsonrpc.Request(rid, mcp.PING, {})))
        try:
            if response.content_type != "text/event-stream":
                return Resumability(
                    "no", f"a POST answers {response.content_type}: there is no stream to resume"
                )
            first: SSEEvent | None = None
            async for event in sse_events(response):
                first = event
                break
        finally:
            response.close()  # the drop
        if first is None:
            return Resumability("no", "the POST's event stream was empty")
        if first.id is None:
            return Resumability(
                "no", "its SSE events carry no id (no event store), so nothing can be resumed"
            )
        primed = not first.data
        headers = {**self.headers("text/event-stream"), "Last-Event-ID": first.id}
        async with self._http.get(self.url, headers=headers) as again:
            if again.status != 200 or again.content_type != "text/event-stream":
                return Resumability(
                    "no", f"GET with Last-Event-ID answered {describe(again, await start_of(again))}"
                )
            if not primed:
                return Resumability(
                    "unknown",
                    "GET with Last-Event-ID is accepted, but the POST sent no priming event to resume from",
                )
            async for event in sse_events(again):
                message = decode(event.data) if event.data else None
                if isinstance(message, jsonrpc.Result | jsonrpc.Error) and message.id == rid:
                    return Resumability(
                        "yes", "a dropped POST stream was resumed with Last-Event-ID and replayed"
                    )
        return Resumability("no", "GET with Last-Event-ID ended without replaying the dropped response")

    async def delete(self, timeout: float) -> Check:
        if self.session_id is None:
            return Check("not tried")
        try:
            async with asyncio.timeout(timeout):
                async with self._http.delete(self.url, headers=self.headers()) as response:
                    ok = response.status in (200, 202, 204)
                    return Check("yes" if ok else "no", f"HTTP {response.status}")
        except (TimeoutError, aiohttp.ClientError) as exc:
            return Check("no", f"{type(exc).__name__}: {exc}")

    async def close(self) -> None:
        tasks = [t for t in (self._get_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
