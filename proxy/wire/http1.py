"""HTTP/1.1 for the upstream GET event streams and lean POSTs: request heads, responses read with llhttp.

Pure: no I/O. `request_head` writes a request's head. `ResponseReader.feed` takes the response's bytes split
anywhere and returns, in order, the head once it is complete and the body's bytes with the transfer coding
removed (`chunked`, `Content-Length`, or until the connection closes). The framing is llhttp's (httptools,
the parser of Node.js and uvicorn; strict: no obs-fold, no bare LF, no duplicate or listed Content-Length,
no Content-Length beside Transfer-Encoding, no chunk size it cannot read); this module adds only the
bounds and the checks a client of one event stream needs. Anything it cannot read safely ends the read
with an `HttpError` that says why (`ResponseReader.error`). For a pooled connection it also says whether
the connection may carry another request (`reusable`: keep-alive allowed it, the body was framed by its
length or chunks, and no byte came after its end) and reads the end of a body that runs until the close
(`end`).

Bounds (those aiohttp's client puts on the POSTs): a status line or header field of at most `MAX_FIELD`
bytes, at most `MAX_HEADERS` fields, a head of at most `max_head` bytes; and at most `max_head` bytes (and
one `SLICE`) of framing between two pieces of body (chunk-size lines, extensions, trailer fields). The
body itself is not buffered here: it goes straight out, and the SSE decoder bounds its lines and events
(`upstreams[].max_message_bytes`, where the configuration has it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools

MAX_HEAD = 64 * 1024
MAX_FIELD = 8190
MAX_HEADERS = 128
SLICE = 16 * 1024  # a longer read is parsed in slices of this size (see `_framing`)
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class HttpError(ValueError):
    """The response cannot be read as HTTP/1.1."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    status: int
    headers: dict[str, str]  # names lowercased; a repeated header's values joined with ", "

    def get(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


@dataclass(frozen=True, slots=True)
class Target:
    """Where an `http` or `https` URL's requests go, and what their heads say of it."""

    origin: str  # scheme://hostname:port, for messages and pool keys
    hostname: str
    port: int
    secure: bool
    host: str  # the Host header: the URL's authority without its userinfo
    path: str  # the request target: path and query


def split_target(url: str) -> Target | None:
    """`url`'s Target; None when it is not an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.netloc.rpartition("@")[2]
    return Target(f"{parts.scheme}://{parts.hostname}:{port}", parts.hostname, port, secure, host, path)


def request_head(target: str, host: str, headers: Iterable[tuple[str, str]], method: str = "GET") -> bytes:
    """`GET target HTTP/1.1` (or `method`) with `Host` and `headers`. A name that is not an RFC 9110 token,
    or a value or target with CR, LF or NUL, is refused: nothing a caller passes can add a header or a
    request. A body's `Content-Length` is the caller's to pass. (Every POST of a session writes one: the
    checks are made on the whole head at once, and each field's only to say which one is refused.)"""
    if " " in target:
        raise HttpError(f"target {target[:80]!r} cannot be sent")
    fields = [("Host", host), *headers]
    for name, _ in fields:
        if name not in _SENT_NAMES:
            if not name or not name.isascii() or not _TOKEN.issuperset(name.encode()):
                raise HttpError(f"header {name!r} cannot be sent")
            if len(_SENT_NAMES) < 1024:
                _SENT_NAMES.add(name)
    lines = [f"{name}: {value}" for name, value in fields]  # one frame (a generator resumed once per field)
    text = f"{method} {target} HTTP/1.1\r\n" + "\r\n".join(lines) + "\r\n\r\n"
    breaks = len(lines) + 2  # one CR LF after each line (the request line's too), and the one ending the head
    if text.count("\n") != breaks or text.count("\r") != breaks or "\0" in text or not _method(method):
        _refuse(target, method, fields)
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        raise HttpError("a header value is not Latin-1 text and cannot be sent") from None


_SENT_NAMES: set[str] = set()  # header names already found to be tokens (a few dozen in practice)


def _method(method: str) -> bool:
    return method.isascii() and method.isupper() and _TOKEN.issuperset(method.encode())


def _refuse(target: str, method: str, fields: list[tuple[str, str]]) -> None:
    """Raise the HttpError that names what of a request head cannot be sent."""
    if not _sendable(target):
        raise HttpError(f"target {target[:80]!r} cannot be sent")
    if not _method(method):
        raise HttpError(f"method {method[:20]!r} cannot be sent")
    for name, value in fields:
        if not _sendable(value):
            raise HttpError(f"header {name!r} cannot be sent")
    raise HttpError("the request head cannot be sent")  # unreachable: one of the above is


def _sendable(value: str) -> bool:
    return not any(c in value for c in "\r\n\0")


class ResponseReader:
    """One response, fed as it arrives. `feed` returns (the head, when this feed completed it, else None;
    the body bytes decoded from this feed, up to the end or the first byte that cannot be read). `done` once
    the body ended (a chunked body's last chunk, or a Content-Length's worth; a body of neither kind ends
    when the connection does), `error` once the response cannot be read on: what came before it is still
    returned, so its events are not lost with it. Bytes after the end are ignored. The head is returned,
    not kept: a stream held for hours keeps only its parser (~0.9 KB)."""

    __slots__ = (
        "_body",
        "_fields",
        "_framing",
        "_head",
        "_parser",
        "_until_close",
        "done",
        "error",
        "max_head",
        "reusable",
    )

    def __init__(self, *, max_head: int = MAX_HEAD) -> None:
        self.max_head = max_head
        self.done = False
        self.error: HttpError | None = None  # why the response cannot be read on (then `feed` reads nothing)
        self._framing = 0  # bytes fed since the head began or the last piece of body (to within a SLICE)
        self._fields: list[tuple[bytes, bytes]] | None = []  # None once the head is complete
        self._head: ResponseHead | None = None
        self._body: list[bytes] | None = None  # the body's pieces, during a `feed`
        self._until_close = False  # the body has neither length nor chunks: it ends with the connection
        self.reusable = False  # once done: the connection may carry the next request (see the docstring)
        self._parser = httptools.HttpResponseParser(self)

    def feed(self, data: bytes) -> tuple[ResponseHead | None, bytes]:
        if self.done or self.error is not None or not data:
            return None, b""
        parts: list[bytes] = []
        self._body = parts
        try:
            if len(data) <= SLICE:
                self._read(data)
            else:  # in slices, so that `_framing` counts what came after the last piece of body
                view = memoryview(data)
                for start in range(0, len(data), SLICE):
                    self._read(view[start : start + SLICE])
                    if self.error is not None or (self.done and not self.reusable):
                        break  # (a reusable end reads on: a byte after it makes it not reusable)
        finally:
            self._body = None
        head, self._head = self._head, None
        return head, parts[0] if len(parts) == 1 else b"".join(parts)

    def end(self) -> None:
        """The connection closed: a body that runs until the close is done (the connection not reusable);
        any other response that is not done is cut short (`error`)."""
        if self.done or self.error is not None:
            return
        if self._fields is None and self._until_close:
            self.done = True
        elif self._fields is None:
            self.error = HttpError("the connection closed before the end of the body")
        else:
            self.error = HttpError("the connection closed before the response head")

    def _read(self, piece: bytes | memoryview) -> None:
        self._framing += len(piece)
        try:
            self._parser.feed_data(piece)
        except httptools.HttpParserUpgrade:
            self.error = HttpError("the server switched protocols")
        except httptools.HttpParserError as exc:
            # Past the end (our stop, or bytes after it) is not an error of this response.
            if self.error is None and not self.done:
                self.error = HttpError(str(exc).strip() or type(exc).__name__)
        if self._framing > self.max_head and not self.done and self.error is None:
            too_large = "response head too large" if self._fields is not None else "chunk framing too large"
            self.error = HttpError(too_large)

    def _fail(self, why: str) -> None:
        self.error = HttpError(why)
        raise self.error

    # -- llhttp's callbacks ---------------------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        fields = self._fields
        if fields is None:  # a trailer field: read and dropped (`_framing` bounds them)
            return
        if len(name) + len(value) + 2 > MAX_FIELD:
            self._fail(f"header field too long ({name[:40]!r})")
        if len(fields) >= MAX_HEADERS:
            self._fail(f"more than {MAX_HEADERS} header fields")
        fields.append((name, value))

    def on_headers_complete(self) -> None:
        status, fields = self._parser.get_status_code(), self._fields or []
        if not self._parser.get_http_version().startswith("1."):
            self._fail(f"not an HTTP/1 response ({self._parser.get_http_version()})")
        if 100 <= status < 200:
            if status == 101:
                self._fail("the server switched protocols")
            self._fields = []  # an interim response (103 Early Hints…): the final one follows
            return
        if sum(len(name) + len(value) + 4 for name, value in fields) > self.max_head:
            self._fail("response head too large")  # (`_framing` stops a head that never ends sooner)
        headers: dict[str, str] = {}
        for raw_name, raw_value in fields:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1").strip(" \t")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        coding = headers.get("transfer-encoding")
        if coding is not None and coding.lower() != "chunked":
            self._fail(f"unsupported Transfer-Encoding {coding[:40]!r}")
        # No length and no chunks: the body runs until the close (204 and 304 have none; llhttp knows).
        self._until_close = coding is None and "content-length" not in headers and status not in (204, 304)
        self._fields, self._framing = None, 0
        self._head = ResponseHead(status, headers)

    def on_body(self, body: bytes) -> None:
        if self._body is not None and not self.done:
            self._framing = 0
            self._body.append(body)

    def on_message_begin(self) -> None:
        if self.done:  # a byte after the end: nothing was asked for, the connection cannot be trusted
            self.reusable = False
            raise _Stop

    def on_message_complete(self) -> None:
        if self._fields is None:  # the final response, not an interim one
            self.done = True
            # llhttp reads on, only to see whether anything follows (`on_message_begin`): nothing of it is
            # parsed as ours, and an error in it is not this response's (`_read`).
            self.reusable = self._parser.should_keep_alive() and not self._until_close


class _Stop(Exception):
    """Raised from `on_message_complete` to stop llhttp at the end of the response."""


__all__ = [
    "MAX_FIELD",
    "MAX_HEAD",
    "MAX_HEADERS",
    "HttpError",
    "ResponseHead",
    "ResponseReader",
    "Target",
    "request_head",
    "split_target",
]
