"""What the HTTP transports read of an upstream's answer, whichever client made it: aiohttp's
`ClientResponse` (DELETE, resumed GET streams, HTTP+SSE) or the lean client's `LeanResponse` (the POSTs of
Streamable HTTP sessions, lean_http.py). Both satisfy these protocols as they are."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class Body(Protocol):
    """A response body as it arrives (aiohttp's `StreamReader`'s shape)."""

    def at_eof(self) -> bool: ...

    async def readany(self) -> bytes:
        """What is buffered, or the next bytes to arrive; b"" at the end of the body."""
        ...

    async def read(self, n: int = -1) -> bytes: ...


class UpstreamResponse(Protocol):
    """An upstream's HTTP response: its head, its body, and the connection it holds (`close` drops the
    connection; `release` gives it back when the body was read to its end, else drops it)."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]:
        """Looked up without regard to case."""
        ...

    @property
    def content(self) -> Body: ...

    @property
    def content_type(self) -> str: ...

    @property
    def content_length(self) -> int | None: ...

    async def read(self) -> bytes: ...

    def close(self) -> None: ...

    def release(self) -> object: ...

    async def wait_for_close(self) -> None: ...


__all__ = ["Body", "UpstreamResponse"]
