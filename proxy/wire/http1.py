"""An HTTP/1.1 request head and an incremental response reader, for the long-lived GET event streams.

Pure: no I/O. `request_head` writes a GET's bytes; `ResponseReader.feed` takes the response's bytes split
anywhere and returns, in order, the head once it is complete and the body's bytes with the transfer coding
removed (`chunked`, `Content-Length`, or until the connection closes). Anything it cannot read safely raises
`HttpError`: a head over `max_head` bytes, a malformed status line, header or chunk size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_HEAD = 64 * 1024


class HttpError(ValueError):
    """The response cannot be read as HTTP/1.1."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    status: int
    headers: dict[str, str]  # names lowercased; a repeated header's values joined with ", "

    def get(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


def request_head(target: str, host: str, headers: Iterable[tuple[str, str]]) -> bytes:
    """`GET target HTTP/1.1` with `Host` and `headers`; a name or value with CR, LF or NUL is refused."""
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}"]
    for name, value in headers:
        if any(c in name or c in value for c in "\r\n\0") or not name or ":" in name:
            raise HttpError(f"header {name!r} cannot be sent")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(raw: bytes) -> ResponseHead:
    """A response head (status line and headers, without the blank line that ends it)."""
    text = raw.decode("latin-1")
    status_line, *header_lines = text.split("\r\n")
    parts = status_line.split(" ", 2)
    status_ok = len(parts) >= 2 and parts[1].isdigit() and len(parts[1]) == 3
    if not status_ok or not parts[0].startswith("HTTP/1."):
        raise HttpError(f"malformed status line {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(f"malformed header line {line[:80]!r}")
        key, value = name.lower(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return ResponseHead(int(parts[1]), headers)


class ResponseReader:
    """One response, fed as it arrives. `feed` returns (the head, when this feed completed it, else None;
    the body bytes decoded from this feed). `done` once the body ended (a chunked body's last chunk, or a
    Content-Length's worth); a body of neither kind ends when the connection does. The head is returned,
    not kept: a stream held for hours keeps only what it needs to read its body."""

    __slots__ = ("_buffer", "_chunk_left", "_length_left", "_mode", "_state", "done", "max_head")

    def __init__(self, *, max_head: int = MAX_HEAD) -> None:
        self.max_head = max_head
        self.done = False
        self._buffer = b""
        self._mode = ""  # "chunked", "length" or "close"
        self._state = "size"  # chunked: "size", "data", "crlf", "trailer"
        self._chunk_left = 0
        self._length_left = 0

    def feed(self, data: bytes) -> tuple[ResponseHead | None, bytes]:
        completed = None
        if not self._mode:
            self._buffer += data
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > self.max_head:
                    raise HttpError("response head too large")
                return None, b""
            if end > self.max_head:
                raise HttpError("response head too large")
            completed = parse_head(self._buffer[:end])
            data, self._buffer = self._buffer[end + 4 :], b""
            self._mode = _body_mode(completed)
            if self._mode == "length":
                self._length_left = int(completed.get("content-length"))
                self.done = self._length_left == 0
        if self.done or not data:
            return completed, b""
        if self._mode == "close":
            return completed, data
        if self._mode == "length":
            body = data[: self._length_left]
            self._length_left -= len(body)
            self.done = self._length_left == 0
            return completed, body
        return completed, self._chunked(data)

    def _chunked(self, data: bytes) -> bytes:
        out = bytearray()
        buffer = self._buffer + data
        pos = 0
        while pos < len(buffer) and not self.done:
            if self._state == "data":
                take = min(self._chunk_left, len(buffer) - pos)
                out += buffer[pos : pos + take]
                pos += take
                self._chunk_left -= take
                if self._chunk_left == 0:
                    self._state = "crlf"
                continue
            end = buffer.find(b"\r\n", pos)
            if end < 0:
                if len(buffer) - pos > self.max_head:
                    raise HttpError("chunk header too large")
                break
            line, pos = buffer[pos:end], end + 2
            if self._state == "crlf":
                if line:
                    raise HttpError("missing CRLF after a chunk")
                self._state = "size"
            elif self._state == "size":
                size = line.split(b";", 1)[0].strip()
                if not size or any(c not in b"0123456789abcdefABCDEF" for c in size):
                    raise HttpError(f"malformed chunk size {line[:40]!r}")
                self._chunk_left = int(size, 16)
                self._state = "data" if self._chunk_left else "trailer"
            elif not line:  # the blank line after the trailer fields: the body is complete
                self.done = True
        self._buffer = buffer[pos:] if not self.done else b""
        return bytes(out)


def _body_mode(head: ResponseHead) -> str:
    if "chunked" in head.get("transfer-encoding").lower():
        return "chunked"
    length = head.get("content-length")
    if length:
        if not length.isdigit():
            raise HttpError(f"malformed Content-Length {length[:40]!r}")
        return "length"
    return "close"


__all__ = ["MAX_HEAD", "HttpError", "ResponseHead", "ResponseReader", "parse_head", "request_head"]
