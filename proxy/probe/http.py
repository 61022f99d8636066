"""What the probe's two HTTP transports share (streamable.py, sse.py): a conversation's client, URL, headers
and recorder; a 401/403 as `Unauthorized`; an event stream decoded; an unexpected answer described."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import aiohttp

from proxy.config import MAX_MESSAGE_BYTES
from proxy.probe.channel import ProbeError, Recorder
from proxy.upstream.bounded import MessageTooLarge, read_body
from proxy.wire.sse import SSEDecoder, SSEError, SSEEvent

_DESCRIBED = 200  # bytes of a body `describe` shows the start of


class Unauthorized(ProbeError):
    def __init__(self, status: int, www_authenticate: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.www_authenticate = www_authenticate


def refuse_unauthorized(response: aiohttp.ClientResponse) -> None:
    """Raise `Unauthorized` (the response released) when the server answered 401 or 403."""
    if response.status in (401, 403):
        www = response.headers.get("WWW-Authenticate", "")
        response.release()
        raise Unauthorized(response.status, www)


async def sse_events(response: aiohttp.ClientResponse) -> AsyncIterator[SSEEvent]:
    decoder = SSEDecoder()
    try:
        async for chunk in response.content.iter_any():
            for event in decoder.feed(chunk):
                yield event
        for event in decoder.close():
            yield event
    except SSEError as exc:
        raise ProbeError(f"undecodable event stream: {exc}") from None


async def start_of(response: aiohttp.ClientResponse) -> bytes:
    """The first bytes of a body, for `describe`; the rest is never read."""
    start = b""
    while len(start) < _DESCRIBED and (chunk := await response.content.read(_DESCRIBED - len(start))):
        start += chunk
    return start


async def bounded_body(response: aiohttp.ClientResponse) -> bytes:
    """A whole body, at most upstreams[].max_message_bytes' default (ProbeError past it)."""
    try:
        return await read_body(response, MAX_MESSAGE_BYTES)
    except MessageTooLarge as exc:
        raise ProbeError(str(exc)) from None


def describe(response: aiohttp.ClientResponse, body: bytes) -> str:
    """`HTTP 404 text/html`, with the start of the body when it is short text meant for a person or script."""
    head = f"HTTP {response.status} {response.content_type}"
    if response.content_type not in ("text/plain", "application/json"):
        return head
    text = " ".join(body[:_DESCRIBED].decode(errors="replace").split())
    return f"{head}: {text[:80]}" if text else head


class HttpConversation:
    """A legacy session over HTTP, before its transport's own state: the shared aiohttp client, the server's
    URL, the headers every request carries (`--header`), and the recorder of the server's requests."""

    def __init__(
        self, http: aiohttp.ClientSession, url: str, headers: Mapping[str, str], recorder: Recorder
    ) -> None:
        self._http = http
        self.url = url
        self._headers = dict(headers)
        self.recorder = recorder
