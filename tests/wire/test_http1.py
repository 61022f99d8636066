"""The HTTP/1.1 response reader of the standalone GET streams (pure): heads, the three body framings, split
anywhere, and what it refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.wire.http1 import HttpError, ResponseHead, ResponseReader, parse_head, request_head

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
BODY = b"data: 1\n\ndata: 22\n\n"
CHUNKED = (  # the body in three chunks (one with an extension), then the last chunk and a trailer field
    SSE_HEAD + b"9\r\ndata: 1\n\n\r\n3;ext=x\r\ndat\r\n7\r\na: 22\n\n\r\n0\r\nTrailer: t\r\n\r\n"
)


def read(raw: bytes, cuts: list[int]) -> tuple[list[ResponseHead], bytes, bool]:
    reader = ResponseReader()
    heads, body, start = [], b"", 0
    for cut in [*sorted(cuts), len(raw)]:
        head, part = reader.feed(raw[start:cut])
        heads += [head] if head is not None else []
        body += part
        start = cut
    return heads, body, reader.done


@given(st.lists(st.integers(0, len(CHUNKED)), max_size=8))
def test_a_chunked_body_split_anywhere_reads_the_same(cuts: list[int]) -> None:
    heads, body, done = read(CHUNKED, cuts)
    assert [h.status for h in heads] == [200] and heads[0].get("Content-Type") == "text/event-stream"
    assert (body, done) == (BODY, True)


@given(st.lists(st.integers(0, 80), max_size=5))
def test_content_length_and_until_close_bodies(cuts: list[int]) -> None:
    sized = b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found and more"
    heads, body, done = read(sized, cuts)
    assert (heads[0].status, body, done) == (404, b"not found", True)
    streamed = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + BODY
    heads, body, done = read(streamed, cuts)
    assert (heads[0].status, body, done) == (200, BODY, False)  # ends when the connection does


def test_repeated_headers_are_joined_and_names_lowercased() -> None:
    head = parse_head(b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\nallow: DELETE")
    assert head == ResponseHead(405, {"allow": "POST, DELETE"})


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "malformed Content-Length"),
        (SSE_HEAD + b"zz\r\n", "malformed chunk size"),
        (SSE_HEAD + b"1\r\nab\r\n", "missing CRLF after a chunk"),
    ],
)
def test_what_cannot_be_read_is_refused_with_its_reason(raw: bytes, error: str) -> None:
    with pytest.raises(HttpError, match=error):
        ResponseReader().feed(raw)


def test_a_head_that_never_ends_is_refused_at_the_limit() -> None:
    reader = ResponseReader(max_head=100)
    reader.feed(b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(HttpError, match="response head too large"):
        reader.feed(b"X-Filler: " + b"a" * 100)


def test_the_request_head_and_header_injection() -> None:
    raw = request_head("/mcp?x=1", "127.0.0.1:8000", [("Accept", "text/event-stream")])
    assert raw == b"GET /mcp?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept: text/event-stream\r\n\r\n"
    with pytest.raises(HttpError, match="cannot be sent"):
        request_head("/mcp", "h", [("Authorization", "Bearer x\r\nX-Evil: 1")])
