"""Talking to a 2024-11-05 HTTP+SSE server: `GET` the stream, wait for its `endpoint` event, POST to it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import aiohttp

from proxy.probe.channel import ProbeError, Recorder, StreamChannel, decode
from proxy.probe.http import HttpConversation, describe, refuse_unauthorized, sse_events, start_of
from proxy.upstream.base import UpstreamError
from proxy.upstream.http_sse import resolve_endpoint
from proxy.wire import jsonrpc


class SseConversation(HttpConversation):
    def __init__(
        self, http: aiohttp.ClientSession, url: str, headers: Mapping[str, str], recorder: Recorder
    ) -> None:
        super().__init__(http, url, headers, recorder)
        self.endpoint: str | None = None
        self.channel = StreamChannel(self._send, recorder)
        self._reader: asyncio.Task[None] | None = None

    async def open(self, timeout: float) -> None:
        """GET the stream until its `endpoint` event (raises ProbeError, Unauthorized)."""
        endpoint: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(endpoint))
        try:
            self.endpoint = await asyncio.wait_for(asyncio.shield(endpoint), timeout)
        except TimeoutError:
            raise ProbeError(f"GET {self.url}: no endpoint event within {timeout:g}s") from None

    async def _read(self, endpoint: asyncio.Future[str]) -> None:
        try:
            headers = {**self._headers, "Accept": "text/event-stream"}
            async with self._http.get(self.url, headers=headers) as response:
                refuse_unauthorized(response)
                if response.status != 200 or response.content_type != "text/event-stream":
                    raise ProbeError(f"GET answered {describe(response, await start_of(response))}")
                async for event in sse_events(response):
                    if event.event == "endpoint" and not endpoint.done():
                        try:  # the rule the proxy's own HTTP+SSE sessions apply, so the verdicts agree
                            endpoint.set_result(resolve_endpoint(self.url, event.data))
                        except UpstreamError as exc:
                            raise ProbeError(str(exc)) from None
                    elif event.event == "message" and (message := decode(event.data)) is not None:
                        await self.channel.deliver(message)
                if not endpoint.done():
                    raise ProbeError("GET answered an event stream, but it ended without an endpoint event")
                self.channel.fail("the server closed its event stream")
        except (ProbeError, aiohttp.ClientError) as exc:
            if not endpoint.done():
                endpoint.set_exception(
                    exc if isinstance(exc, ProbeError) else ProbeError(f"GET {self.url}: {exc}")
                )
            self.channel.fail(str(exc))

    async def _send(self, body: bytes) -> None:
        assert self.endpoint is not None
        headers = {**self._headers, "Content-Type": "application/json"}
        async with self._http.post(self.endpoint, data=body, headers=headers) as response:
            if response.status not in (200, 202):
                raise ProbeError(f"POST {self.endpoint}: {describe(response, await start_of(response))}")

    async def request(self, method: str, params: jsonrpc.JSONObject, timeout: float) -> jsonrpc.Response:
        return await self.channel.request(method, params, timeout)

    async def notify(self, method: str, params: jsonrpc.JSONObject) -> None:
        await self.channel.notify(method, params)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
