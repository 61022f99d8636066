"""Reading from an upstream within `upstreams[].max_message_bytes`: every body, line and event is bounded.

A server that answers with a body, an SSE line or an event larger than the limit fails the request it
belongs to (`MessageTooLarge`, an UpstreamError the client reads as -31001), and the connection that carried
it is closed: what was read of it is dropped, and nothing of the rest is read. Other sessions and upstreams
never notice.
"""

from __future__ import annotations

from aiohttp import hdrs

from proxy.upstream.base import UpstreamError
from proxy.upstream.response import UpstreamResponse


class MessageTooLarge(UpstreamError):
    """The upstream sent more than `upstreams[].max_message_bytes` in one body, line or event."""

    def __init__(self, limit: int) -> None:
        super().__init__(too_large(limit))
        self.limit = limit


TOO_LARGE = "upstream sent a message larger than"  # how every such reason begins, whatever the transport


def too_large(limit: int) -> str:
    """The reason a request fails with (said to the client as it is: calls/wording.py)."""
    return f"{TOO_LARGE} {limit} bytes (upstreams[].max_message_bytes)"


async def read_body(resp: UpstreamResponse, limit: int) -> bytes:
    """The whole body of `resp`, at most `limit` bytes; over it (announced by Content-Length, or seen while
    reading) the connection is closed and MessageTooLarge raised."""
    length = resp.content_length
    if length is not None and length > limit:
        resp.close()
        raise MessageTooLarge(limit)
    if length is not None and _as_announced(resp):  # one read: the parser stops at Content-Length
        return await resp.read()
    body = bytearray()
    content = resp.content
    while chunk := await content.readany():
        if len(body) + len(chunk) > limit:
            del body[:]
            resp.close()
            raise MessageTooLarge(limit)
        body += chunk
    return bytes(body)


def _as_announced(resp: UpstreamResponse) -> bool:
    """Whether the body is as long as its Content-Length says: not compressed (aiohttp inflates it, a few KB
    can become gigabytes) and not chunked (then Content-Length is not what frames it)."""
    headers = resp.headers  # tested with istr names: no conversion of a str per test
    return hdrs.CONTENT_ENCODING not in headers and hdrs.TRANSFER_ENCODING not in headers


__all__ = ["TOO_LARGE", "MessageTooLarge", "read_body", "too_large"]
