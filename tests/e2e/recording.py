"""A pass-through HTTP relay that records every request the proxy sends upstream (headers and JSON body).

Put it between the proxy and a real legacy server to see what reached the server: bodies and answers pass
through unchanged and streamed (SSE included), so the server behaves exactly as without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

_HOP = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive"})


@dataclass(frozen=True)
class Sent:
    method: str
    headers: Mapping[str, str]  # lower-case names
    message: Any  # the JSON-RPC body of a POST; None for GET/DELETE
    path: str = ""  # the request's path on the relay (the same as on the target)

    @property
    def rpc(self) -> str:
        """The JSON-RPC method, "response" for an answer to a server request, "" for no body."""
        if not isinstance(self.message, dict):
            return ""
        return str(self.message.get("method", "response"))


@dataclass
class Recording:
    url: str  # point the proxy here
    sent: list[Sent] = field(default_factory=list)
    # Cleared: the upstream's streamed bytes are held back (it has answered; the proxy has not heard yet).
    flowing: asyncio.Event = field(default_factory=asyncio.Event)

    def posts(self, rpc: str | None = None) -> list[Sent]:
        return [s for s in self.sent if s.method == "POST" and (rpc is None or s.rpc == rpc)]


@contextlib.asynccontextmanager
async def recording_relay(target: str) -> AsyncIterator[Recording]:
    """A relay to `target` (an MCP endpoint URL) on a free port; `Recording.url` is the same path on it."""
    base = URL(target)
    async with aiohttp.ClientSession(auto_decompress=False) as http:
        recording: Recording

        async def relay(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            message = json.loads(body) if body else None
            headers = {k.lower(): v for k, v in request.headers.items()}
            recording.sent.append(Sent(request.method, headers, message, request.path))
            out_headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
            async with http.request(
                request.method,
                base.with_path(request.path).with_query(request.query),
                data=body or None,
                headers=out_headers,
                timeout=aiohttp.ClientTimeout(total=None),
            ) as upstream:
                response = web.StreamResponse(
                    status=upstream.status,
                    headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP},
                )
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await recording.flowing.wait()
                    await response.write(chunk)
                await response.write_eof()
                return response

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", relay)
        server = TestServer(app, host="127.0.0.1", handler_cancellation=True, shutdown_timeout=1.0)
        await server.start_server()
        recording = Recording(str(server.make_url(base.path)))
        recording.flowing.set()
        try:
            yield recording
        finally:
            await server.close()
