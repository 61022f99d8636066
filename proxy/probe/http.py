"""What the probe's two HTTP transports share (streamable.py, sse.py): a conversation's client, URL, headers
and recorder; a 401/403 as `Unauthorized`; an event stream decoded; an unexpected answer described."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import aiohttp

from proxy.probe.channel import ProbeError, Recorder
from proxy.wire.sse import SSEDecoder, SSEError, SSEEvent


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


def describe(response: aiohttp.ClientResponse, body: bytes) -> str:
    """`HTTP 404 text/html`, with the start of the body when it is short text meant for a person or script."""
    head = f"HTTP {response.status} {response.content_type}"
    if response.content_type not in ("text/plain", "application/json"):
        return head
    text = " ".join(body[:200].decode(errors="replace").split())
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
