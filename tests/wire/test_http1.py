"""The HTTP/1.1 reader of the GET streams and lean POSTs (pure; llhttp's framing through httptools): heads,
the three body framings, split anywhere and at every byte, and the framings it refuses, each with its
reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.wire.http1 import (
    MAX_FIELD,
    MAX_HEADERS,
    SLICE,
    HttpError,
    ResponseHead,
    ResponseReader,
    request_head,
    split_target,
)

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
BODY = b"data: 1\n\ndata: 22\n\n"
CHUNKED = (  # the body in three chunks (one with an extension), then the last chunk and a trailer field
    SSE_HEAD + b"9\r\ndata: 1\n\n\r\n3;ext=x\r\ndat\r\n7\r\na: 22\n\n\r\n0\r\nTrailer: t\r\n\r\n"
)
OK = b"HTTP/1.1 200 OK\r\n"


def read(
    raw: bytes, cuts: list[int], reader: ResponseReader | None = None
) -> tuple[list[ResponseHead], bytes, bool]:
    reader = reader or ResponseReader()
    heads, body, start = [], b"", 0
    for cut in [*sorted(cuts), len(raw)]:
        head, part = reader.feed(raw[start:cut])
        heads += [head] if head is not None else []
        body += part
        start = max(start, cut)
    if reader.error is not None:
        raise reader.error
    return heads, body, reader.done


@given(st.lists(st.integers(0, len(CHUNKED)), max_size=8))
def test_a_chunked_body_split_anywhere_reads_the_same(cuts: list[int]) -> None:
    heads, body, done = read(CHUNKED, cuts)
    assert [h.status for h in heads] == [200] and heads[0].get("Content-Type") == "text/event-stream"
    assert (body, done) == (BODY, True)


def test_a_response_split_at_every_byte_reads_the_same() -> None:
    assert read(CHUNKED, list(range(len(CHUNKED))))[1:] == (BODY, True)
    for cut in range(len(CHUNKED) + 1):  # and in two at each place
        heads, body, done = read(CHUNKED, [cut])
        assert (len(heads), body, done) == (1, BODY, True), cut


@given(st.lists(st.integers(0, 80), max_size=5))
def test_content_length_and_until_close_bodies(cuts: list[int]) -> None:
    sized = b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found and more"
    heads, body, done = read(sized, cuts)
    assert (heads[0].status, body, done) == (404, b"not found", True)  # what follows the end is not read
    streamed = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + BODY
    heads, body, done = read(streamed, cuts)
    assert (heads[0].status, body, done) == (200, BODY, False)  # ends when the connection does


def test_a_second_response_after_the_end_is_not_read() -> None:
    raw = OK + b"Content-Length: 1\r\n\r\nx" + OK + b"Content-Length: 2\r\n\r\nyy"
    heads, body, done = read(raw, [])
    assert (len(heads), body, done) == (1, b"x", True)


def test_repeated_headers_are_joined_names_lowercased_and_spaces_trimmed() -> None:
    raw = b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST \r\nallow:DELETE\r\nContent-Length: 0\r\n\r\n"
    heads, _, done = read(raw, [])
    assert heads == [ResponseHead(405, {"allow": "POST, DELETE", "content-length": "0"})] and done


def test_interim_responses_are_skipped_for_the_final_one() -> None:
    raw = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n" + CHUNKED
    heads, body, done = read(raw, [])
    assert [(h.status, h.get("link")) for h in heads] == [(200, "")] and (body, done) == (BODY, True)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "Expected HTTP/"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "Invalid response status"),
        (b"HTTP/2.0 200 OK\r\n\r\n", "not an HTTP/1 response"),
        (b"HTTP/1.1 200 OK\nContent-Length: 0\n\n", "Missing expected CR"),  # bare LF
        (OK + b"no colon here\r\n\r\n", "Invalid header token"),
        (OK + b"Content-Length : 3\r\n\r\nabc", "Invalid header field char"),
        (OK + b"X-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n", "Unexpected whitespace"),  # obs-fold
        (OK + b"X-A: a\0b\r\n\r\n", "Invalid header value char"),
        (OK + b"X-A: a\rb\r\n\r\n", "Missing expected LF"),
        (OK + b"Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc", "Duplicate Content-Length"),
        (OK + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabc", "Duplicate Content-Length"),
        (OK + b"Content-Length: 3, 3\r\n\r\nabc", "Invalid character in Content-Length"),
        (OK + b"Content-Length: -1\r\n\r\n", "Invalid character in Content-Length"),
        (OK + b"Content-Length: 99999999999999999999999\r\n\r\n", "Content-Length overflow"),
        (OK + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc", "can't be present with"),
        (OK + b"Transfer-Encoding: gzip\r\n\r\nabc", "unsupported Transfer-Encoding 'gzip'"),
        (OK + b"Transfer-Encoding: chunked, identity\r\n\r\nabc", "unsupported Transfer-Encoding"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
            "switched protocols",
        ),
        (SSE_HEAD + b"zz\r\n", "Invalid character in chunk size"),
        (SSE_HEAD + b"-1\r\n", "Invalid character in chunk size"),
        (SSE_HEAD + b"0x3\r\nabc\r\n", "Invalid character in chunk size"),
        (SSE_HEAD + b"3 \r\nabc\r\n", "Invalid character in chunk size"),
        (SSE_HEAD + b"ffffffffffffffffff\r\n", "Chunk size overflow"),
        (SSE_HEAD + b"1\r\nab\r\n", "Expected LF after chunk data"),
    ],
)
def test_what_cannot_be_read_safely_is_refused_with_its_reason(raw: bytes, error: str) -> None:
    with pytest.raises(HttpError, match=error):
        read(raw, [])
    with pytest.raises(HttpError, match=error):  # also when it arrives a byte at a time
        read(raw, list(range(len(raw))))


def test_a_head_that_never_ends_is_refused_at_the_limit() -> None:
    reader = ResponseReader(max_head=100)
    reader.feed(OK)
    assert reader.feed(b"X-Filler: " + b"a" * 100) == (None, b"")
    assert str(reader.error) == "response head too large"
    assert reader.feed(b"\r\n\r\n") == (None, b"")  # and nothing more is read


def test_what_came_before_a_bad_chunk_is_returned_with_the_error() -> None:
    reader = ResponseReader()
    head, body = reader.feed(CHUNKED[: CHUNKED.index(b"7\r\n")] + b"zz\r\n")
    assert (head is not None, body) == (True, b"data: 1\n\ndat")
    assert "Invalid character in chunk size" in str(reader.error) and not reader.done


def test_header_floods_are_refused() -> None:
    many = OK + b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_HEADERS + 1)) + b"\r\n"
    with pytest.raises(HttpError, match=f"more than {MAX_HEADERS} header fields"):
        read(many, [])
    long = OK + b"X-Long: " + b"a" * MAX_FIELD + b"\r\n\r\n"
    with pytest.raises(HttpError, match="header field too long"):
        read(long, [])
    repeated = OK + b"Set-Cookie: a=1\r\n" * 5000  # 85 KB of small fields, a few bytes at a time
    with pytest.raises(HttpError, match=r"more than 128 header fields|response head too large"):
        read(repeated, list(range(0, len(repeated), 7)))


def test_framing_that_carries_no_body_is_bounded() -> None:
    """A chunk extension or a trailer section that never ends holds no memory past the limit."""
    for start in (SSE_HEAD + b"3;x=", SSE_HEAD + b"0\r\nTrailer: "):
        reader = ResponseReader(max_head=1000)
        read(start, [], reader)
        for _ in range(10):
            reader.feed(b"y" * 200)
        assert str(reader.error) == "chunk framing too large"
    reader = ResponseReader()  # after a piece of body in the same read, too
    read(SSE_HEAD, [], reader)
    assert reader.feed(b"3\r\nabc\r\n3;" + b"x" * 100_000) == (None, b"abc")
    assert str(reader.error) == "chunk framing too large"


def test_many_small_chunks_in_one_long_read_are_not_framing_too_large() -> None:
    keepalives = b"3\r\n:\n\n\r\n" * 40_000  # 360 KB, of which 240 KB are framing
    heads, body, done = read(SSE_HEAD + keepalives + b"0\r\n\r\n", [])
    assert (len(heads), body, done) == (1, b":\n\n" * 40_000, True)


def test_the_request_head_and_header_injection() -> None:
    raw = request_head("/mcp?x=1", "127.0.0.1:8000", [("Accept", "text/event-stream")])
    assert raw == b"GET /mcp?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept: text/event-stream\r\n\r\n"
    with pytest.raises(HttpError, match="cannot be sent"):
        request_head("/mcp", "h", [("Authorization", "Bearer x\r\nX-Evil: 1")])
    with pytest.raises(HttpError, match="cannot be sent"):
        request_head("/mcp", "h", [("X Evil", "1")])  # not a token
    with pytest.raises(HttpError, match="cannot be sent"):
        request_head("/mcp HTTP/1.1\r\nX-Evil: 1\r\n\r\nGET /", "h", [])
    with pytest.raises(HttpError, match="cannot be sent"):
        request_head("/mcp", "h\r\nX-Evil: 1", [])
    with pytest.raises(HttpError, match="not Latin-1"):
        request_head("/mcp", "h", [("X-Name", "日本")])


def test_a_post_head_names_its_method_and_an_odd_method_is_refused() -> None:
    head = request_head("/mcp", "h:1", [("Content-Length", "2")], "POST")
    assert head == b"POST /mcp HTTP/1.1\r\nHost: h:1\r\nContent-Length: 2\r\n\r\n"
    for method in ("GET /x HTTP/1.1\r\n", "post", "PO ST", ""):
        with pytest.raises(HttpError, match="cannot be sent"):
            request_head("/mcp", "h", [], method)


# -- what a pooled connection needs: may it carry the next request? ------------------------------------------

SLICE_END = OK + b"Content-Length: 16342\r\n\r\n" + b"y" * 16_342  # ends where a read's first slice does
assert len(SLICE_END) == SLICE


@pytest.mark.parametrize(
    ("raw", "reusable"),
    [
        (OK + b"Content-Length: 2\r\n\r\n{}", True),
        (CHUNKED, True),
        (b"HTTP/1.1 204 No Content\r\n\r\n", True),
        (b"HTTP/1.1 100 Continue\r\n\r\n" + OK + b"Content-Length: 2\r\n\r\n{}", True),
        (OK + b"Content-Length: 2\r\n\r\n{}\r\n", True),  # a stray CRLF between messages is skipped
        (OK + b"Content-Length: 2\r\nConnection: close\r\n\r\n{}", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", False),  # HTTP/1.0 without keep-alive
        (OK + b"Content-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\n", False),  # a byte after the end
        (SLICE_END + b"x", False),  # …also when it comes in a later slice of one long read
    ],
)
def test_a_response_says_whether_its_connection_may_be_reused(raw: bytes, reusable: bool) -> None:
    reader = ResponseReader()
    _, body = reader.feed(raw)
    assert (reader.done, reader.reusable, reader.error) == (True, reusable, None)
    assert body in (b"", b"{}", BODY, b"y" * 16_342)


def test_the_close_ends_an_until_close_body_and_cuts_any_other_short() -> None:
    until_close = ResponseReader()
    assert until_close.feed(OK + b"\r\nabc")[1] == b"abc"
    assert not until_close.done
    until_close.end()
    assert (until_close.done, until_close.reusable, until_close.error) == (True, False, None)
    for raw, why in [
        (OK + b"Content-Length: 9\r\n\r\nabc", "the connection closed before the end of the body"),
        (SSE_HEAD + b"3\r\nabc\r\n", "the connection closed before the end of the body"),
        (OK + b"Content-Le", "the connection closed before the response head"),
    ]:
        reader = ResponseReader()
        reader.feed(raw)
        reader.end()
        assert (reader.done, str(reader.error)) == (False, why)


def test_a_head_over_the_limit_is_refused_even_when_it_completes_in_the_same_read() -> None:
    """The head's size is counted field by field, not only between reads: 64 KiB and one byte is refused."""
    filler = b"X-F: " + b"x" * 5000 + b"\r\n"
    raw = OK + filler * 14 + b"Content-Length: 0\r\n\r\n"  # 70 KiB, ending inside one read's last slice
    reader = ResponseReader()
    reader.feed(raw)
    assert str(reader.error) == "response head too large"
    assert ResponseReader(max_head=80_000).feed(raw)[0] is not None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "http://127.0.0.1:8000/mcp",
            ("http://127.0.0.1:8000", "127.0.0.1", 8000, False, "127.0.0.1:8000", "/mcp"),
        ),
        ("https://example.com", ("https://example.com:443", "example.com", 443, True, "example.com", "/")),
        ("http://user:pw@h/p?q=1", ("http://h:80", "h", 80, False, "h", "/p?q=1")),
        ("http://[::1]:9/x", ("http://::1:9", "::1", 9, False, "[::1]:9", "/x")),
    ],
)
def test_split_target_says_where_a_request_goes_and_never_sends_userinfo(
    url: str, expected: tuple[str, str, int, bool, str, str]
) -> None:
    target = split_target(url)
    assert target is not None
    assert (target.origin, target.hostname, target.port, target.secure, target.host, target.path) == expected


@pytest.mark.parametrize("url", ["ftp://h/x", "http:///nohost", "unix:/tmp/s", "/relative"])
def test_split_target_is_none_for_what_is_not_an_http_url_with_a_host(url: str) -> None:
    assert split_target(url) is None
