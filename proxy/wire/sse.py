"""Incremental Server-Sent Events codec following the WHATWG HTML "event stream" rules.

Pure: no I/O, no asyncio.  :class:`SSEDecoder` turns arbitrary byte chunks into :class:`SSEEvent` values;
:func:`encode_event` and :func:`encode_comment` produce wire bytes.

Only CRLF, CR and LF end a line (never the other Unicode line breaks ``str.splitlines`` knows about).
"""

from __future__ import annotations

import codecs
from contextlib import suppress
from dataclasses import dataclass

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
_UTF8 = codecs.getincrementaldecoder("utf-8")  # looked up once: a decoder is made for every streamed reply


class SSEError(ValueError):
    """The event stream cannot be decoded safely (a line or an event's data is over the size limit)."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event.

    ``id`` is the stream's last event ID as of this event (it persists across events until another ``id``
    field changes it); ``None`` when none was ever set or an empty ``id`` field reset it.  ``retry`` is the
    reconnection time (ms) set by a valid ``retry`` field within this event's block, else ``None``.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Incremental event-stream parser; feed it byte chunks split anywhere.

    ``max_event_bytes`` bounds both a single line and an event's data; it is counted in decoded
    characters, which never exceed the bytes they came from.  After :class:`SSEError` the decoder is unusable.
    """

    __slots__ = (
        "_block_retry",
        "_closed",
        "_data",
        "_data_len",
        "_event_type",
        "_id_buffer",
        "_last_id",
        "_pending",
        "_pending_len",
        "_retry",
        "_skip_lf",
        "_started",
        "_utf8",
        "comments",
        "max_event_bytes",
    )

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be positive")
        self.max_event_bytes = max_event_bytes
        self.comments = 0  # comment lines seen (keep-alives)
        self._utf8 = _UTF8(errors="replace")
        self._started = False  # leading BOM already dealt with
        self._skip_lf = False  # previous text ended with CR: a leading LF completes that CRLF
        self._pending: list[str] = []  # pieces of the current unterminated line
        self._pending_len = 0
        self._data: list[str] = []  # data field values of the current block
        self._data_len = 0  # len("\n".join(_data)) + 1
        self._event_type = ""
        self._id_buffer = ""
        self._last_id = ""
        self._block_retry: int | None = None
        self._retry: int | None = None
        self._closed = False

    @property
    def last_event_id(self) -> str | None:
        """The last event ID string (updated at each blank line), ``None`` if empty."""
        return self._last_id or None

    @property
    def retry(self) -> int | None:
        """The most recent reconnection time (ms) the stream asked for, ``None`` if never."""
        return self._retry

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume ``chunk`` and return the events it completes."""
        if self._closed:
            raise SSEError("decoder is closed")
        text = self._utf8.decode(chunk)
        return self._feed_text(text) if text else []

    def close(self) -> list[SSEEvent]:
        """End of stream: flush the UTF-8 decoder and discard any incomplete line or event (per spec)."""
        if self._closed:
            return []
        text = self._utf8.decode(b"", True)
        events = self._feed_text(text) if text else []
        self._closed = True
        self._pending = []
        self._data = []
        return events

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        elif self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if "\r" in text:
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        limit = self.max_event_bytes
        lines = text.split("\n")
        tail = lines.pop()
        if not lines:  # no line terminator yet
            if tail:
                self._pending.append(tail)
                self._pending_len += len(tail)
                if self._pending_len > limit:
                    raise SSEError(f"SSE line longer than {limit}")
            return []
        if self._pending_len + len(text) > limit:
            first = self._pending_len + len(lines[0])
            if first > limit or len(tail) > limit or any(len(line) > limit for line in lines):
                raise SSEError(f"SSE line longer than {limit}")
        if self._pending:
            self._pending.append(lines[0])
            lines[0] = "".join(self._pending)
        self._pending = [tail] if tail else []
        self._pending_len = len(tail)
        return self._process(lines)

    def _process(self, lines: list[str]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        data = self._data
        for line in lines:
            if not line:  # blank line: dispatch
                self._last_id = last_id = self._id_buffer
                if data:
                    kind = self._event_type or "message"
                    events.append(SSEEvent("\n".join(data), kind, last_id or None, self._block_retry))
                    data = self._data = []
                    self._data_len = 0
                self._event_type = ""
                self._block_retry = None
                continue
            field, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if field == "data":
                self._data_len += len(value) + 1
                if self._data_len - 1 > self.max_event_bytes:
                    raise SSEError(f"SSE event data larger than {self.max_event_bytes}")
                data.append(value)
            elif not field:
                self.comments += 1
            elif field == "event":
                self._event_type = value
            elif field == "id":
                if "\0" not in value:
                    self._id_buffer = value
            elif field == "retry" and value.isascii() and value.isdigit():
                with suppress(ValueError):  # more digits than int() accepts: ignore
                    self._retry = self._block_retry = int(value)
        return events


def _check_line(name: str, value: str) -> None:
    if "\r" in value or "\n" in value:
        raise ValueError(f"SSE {name} must not contain CR or LF: {value!r}")


def encode_event(
    data: str, *, event: str | None = None, id: str | None = None, retry: int | None = None
) -> bytes:
    """Encode one event; CRLF, CR and LF in ``data`` all become line breaks (decoded back as LF)."""
    parts = []
    if event is not None:
        _check_line("event", event)
        parts.append(f"event: {event}\n")
    if id is not None:
        _check_line("id", id)
        if "\0" in id:
            raise ValueError("SSE id must not contain NUL")
        parts.append(f"id: {id}\n")
    if retry is not None:
        if retry < 0:
            raise ValueError("SSE retry must not be negative")
        parts.append(f"retry: {retry}\n")
    if "\r" in data:
        data = data.replace("\r\n", "\n").replace("\r", "\n")
    parts.append("data: " + data.replace("\n", "\ndata: ") + "\n\n")
    return "".join(parts).encode()


def encode_comment(text: str = "") -> bytes:
    """Encode a comment block (``:`` + ``text`` + blank line), e.g. a keep-alive."""
    _check_line("comment", text)
    return f":{text}\n\n".encode()
