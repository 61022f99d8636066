from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.wire.sse import (
    DEFAULT_MAX_EVENT_BYTES,
    SSEDecoder,
    SSEError,
    SSEEvent,
    encode_comment,
    encode_event,
)


def decode(stream: bytes, chunks: list[int] | None = None, **kwargs: int) -> list[SSEEvent]:
    """Decode ``stream`` cut at the sorted offsets ``chunks`` (default: one chunk), then close."""
    dec = SSEDecoder(**kwargs)
    events: list[SSEEvent] = []
    start = 0
    for cut in [*sorted(chunks or []), len(stream)]:
        events += dec.feed(stream[start:cut])
        start = cut
    return events + dec.close()


def reference(stream: bytes) -> tuple[list[SSEEvent], int]:
    """A literal, slow transcription of the WHATWG algorithm, used as an oracle."""
    text = stream.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    events: list[SSEEvent] = []
    comments = 0
    data = event_type = id_buffer = ""
    block_retry: int | None = None
    # Only complete lines are processed: whatever follows the last terminator is discarded.
    for line in re.split(r"\r\n|\r|\n", text)[:-1]:
        if line == "":
            last_id = id_buffer
            if data:
                data = data.removesuffix("\n")
                events.append(SSEEvent(data, event_type or "message", last_id or None, block_retry))
            data = event_type = ""
            block_retry = None
            continue
        if line.startswith(":"):
            comments += 1
            continue
        if ":" in line:
            field, value = line.split(":", 1)
            value = value.removeprefix(" ")
        else:
            field, value = line, ""
        if field == "data":
            data += value + "\n"
        elif field == "event":
            event_type = value
        elif field == "id" and "\0" not in value:
            id_buffer = value
        elif field == "retry" and value and all(c in "0123456789" for c in value):
            block_retry = int(value)
    return events, comments


# --- WHATWG spec examples ---------------------------------------------------------------------------


def test_spec_multiline_data() -> None:
    assert decode(b"data: YHOO\ndata: +2\ndata: 10\n\n") == [SSEEvent("YHOO\n+2\n10")]


def test_spec_ids_and_comments() -> None:
    stream = b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n"
    dec = SSEDecoder()
    events = dec.feed(stream) + dec.close()
    assert events == [SSEEvent("first event", id="1"), SSEEvent("second event", id=None)]
    assert dec.comments == 1
    assert decode(stream + b"\n")[-1] == SSEEvent(" third event")


def test_spec_empty_data() -> None:
    assert decode(b"data\n\ndata\ndata\n\ndata:") == [SSEEvent(""), SSEEvent("\n")]


def test_spec_space_after_colon_optional() -> None:
    assert decode(b"data:test\n\ndata: test\n\n") == [SSEEvent("test"), SSEEvent("test")]


# --- parsing rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_line_endings(eol: bytes) -> None:
    stream = b"event: e\ndata: a\ndata: b\n\n".replace(b"\n", eol)
    assert decode(stream) == [SSEEvent("a\nb", event="e")]


def test_mixed_line_endings() -> None:
    # CR CRLF = two line ends, LF CR = two line ends.
    assert decode(b"data: a\r\r\ndata: b\n\rdata: c\r\n\r\n") == [SSEEvent("a"), SSEEvent("b"), SSEEvent("c")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"\n") == []  # the LF completes CRLF, it is not a blank line
    assert dec.feed(b"\r") == [SSEEvent("a")]  # CR alone dispatches at once
    assert dec.feed(b"\ndata: b\r\n\r\n") == [SSEEvent("b")]


def test_field_parsing() -> None:
    stream = (
        b"data\n"  # no colon: empty value
        b"data:\n"
        b"data:  two spaces\n"
        b"data:x:y\n"  # only the first colon separates
        b"foo: ignored\n"  # unknown field
        b"Data: case sensitive\n"
        b"event:  spaced\n"
        b"\n"
    )
    assert decode(stream) == [SSEEvent("\n\n two spaces\nx:y", event=" spaced")]


def test_event_type_resets_after_dispatch() -> None:
    stream = b"event: a\ndata: 1\n\ndata: 2\n\nevent: b\n\ndata: 3\n\nevent:\ndata: 4\n\n"
    assert [e.event for e in decode(stream)] == ["a", "message", "message", "message"]


def test_id_persistence_and_reset() -> None:
    dec = SSEDecoder()
    assert dec.last_event_id is None
    stream = (
        b"id: 1\ndata: a\n\n"
        b"data: b\n\n"  # keeps id 1
        b"id: 2\n\n"  # no data: no event, but the last event id moves on
        b"data: c\n\n"
        b"id: bad\0id\ndata: d\n\n"  # NUL: ignored
        b"id\ndata: e\n\n"  # empty id resets
        b"id: 3\ndata: f\n\n"
        b"id:\ndata: g\n\n"
    )
    events = dec.feed(stream)
    assert [(e.data, e.id) for e in events] == [
        ("a", "1"),
        ("b", "1"),
        ("c", "2"),
        ("d", "2"),
        ("e", None),
        ("f", "3"),
        ("g", None),
    ]
    assert dec.last_event_id is None
    dec.feed(b"id: 9\n")
    assert dec.last_event_id is None  # only a blank line commits the id
    dec.feed(b"\n")
    assert dec.last_event_id == "9"
    dec.feed(b"id: 10\ndata: x\n")
    assert dec.close() == []
    assert dec.last_event_id == "9"  # the incomplete block's id never took effect


def test_retry() -> None:
    dec = SSEDecoder()
    stream = (
        b"retry: 1000\ndata: a\n\n"
        b"data: b\n\n"
        b"retry: 12a\ndata: c\n\n"  # not all digits
        b"retry: -5\ndata: d\n\n"
        b"retry:\ndata: e\n\n"
        b"retry: \xef\xbc\x91\ndata: f\n\n"  # FULLWIDTH DIGIT ONE is not an ASCII digit
        b"retry: " + b"9" * 5000 + b"\ndata: g\n\n"  # too many digits for int(): ignored, no crash
        b"retry: 0\n\n"
    )
    events = dec.feed(stream)
    assert [e.retry for e in events] == [1000, None, None, None, None, None, None]
    assert dec.retry == 0


def test_comments_counted() -> None:
    dec = SSEDecoder()
    stream = encode_comment() + encode_comment("ping") + b": keep-alive\r\n\r\n:\r:x\rdata: a\n\n"
    assert dec.feed(stream) == [SSEEvent("a")]
    assert dec.comments == 5


def test_comment_inside_event_does_not_break_it() -> None:
    assert decode(b"data: a\n: hi\ndata: b\n\n") == [SSEEvent("a\nb")]


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85"])
def test_other_unicode_line_breaks_are_data(char: str) -> None:
    data = f"a{char}b{char}"
    assert decode(f"data: {data}\n\n".encode()) == [SSEEvent(data)]
    assert decode(encode_event(data, event=f"e{char}", id=f"i{char}")) == [
        SSEEvent(data, event=f"e{char}", id=f"i{char}")
    ]


# --- BOM and UTF-8 ----------------------------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


def test_leading_bom_is_stripped() -> None:
    assert decode(BOM + b"data: a\n\n") == [SSEEvent("a")]


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_leading_bom_split_across_chunks(cut: int) -> None:
    assert decode(BOM + b"data: a\n\n", [cut]) == [SSEEvent("a")]
    assert decode(b"" + BOM + b"data: a\n\n", [0, 0, cut]) == [SSEEvent("a")]


def test_only_one_bom_and_only_at_start() -> None:
    # A second BOM becomes part of the field name ("\ufeffdata"), an unknown field.
    assert decode(BOM + BOM + b"data: a\n\ndata: b\n\n") == [SSEEvent("b")]
    assert decode(b"data: " + BOM + b"\n\n") == [SSEEvent("\ufeff")]
    dec = SSEDecoder()
    dec.feed(b"\n")
    assert dec.feed(BOM + b"data: a\n\n") == []


def test_multibyte_character_split_everywhere() -> None:
    stream = "data: héllo €𝄞 ✓\n\n".encode()
    for cut in range(len(stream) + 1):
        assert decode(stream, [cut]) == [SSEEvent("héllo €𝄞 ✓")]


def test_invalid_utf8_is_replaced() -> None:
    assert decode(b"data: a\xffb\xc3\n\n") == [SSEEvent("a\ufffdb\ufffd")]
    # A truncated multi-byte sequence at end of stream does not raise.
    dec = SSEDecoder()
    assert dec.feed(b"data: a\n\ndata: \xe2\x82") == [SSEEvent("a")]
    assert dec.close() == []


# --- end of stream ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tail", [b"data: partial", b"data: partial\n", b"data: partial\r", b"event: x\n"])
def test_close_discards_incomplete_event(tail: bytes) -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: done\n\n" + tail) == [SSEEvent("done")]
    assert dec.close() == []
    assert dec.close() == []
    with pytest.raises(SSEError):
        dec.feed(b"\n")


# --- size guard -------------------------------------------------------------------------------------


def test_default_limit() -> None:
    assert SSEDecoder().max_event_bytes == DEFAULT_MAX_EVENT_BYTES == 16 * 1024 * 1024
    with pytest.raises(ValueError):
        SSEDecoder(max_event_bytes=0)


def test_unterminated_line_over_limit_raises() -> None:
    dec = SSEDecoder(max_event_bytes=100)
    dec.feed(b"data: " + b"x" * 50)
    with pytest.raises(SSEError):
        for _ in range(10):
            dec.feed(b"x" * 10)


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_long_line_raises_whatever_the_chunking(chunk: int) -> None:
    stream = b"event: " + b"x" * 200 + b"\n\n"
    dec = SSEDecoder(max_event_bytes=100)
    with pytest.raises(SSEError):
        for i in range(0, len(stream), chunk):
            dec.feed(stream[i : i + chunk])


def test_line_at_limit_is_fine() -> None:
    line = b"data:" + b"x" * 95
    assert decode(line + b"\n\n", max_event_bytes=100) == [SSEEvent("x" * 95)]
    assert decode(line + b"\n\n", [50], max_event_bytes=100) == [SSEEvent("x" * 95)]
    with pytest.raises(SSEError):
        decode(line + b"x\n\n", max_event_bytes=100)


def test_event_data_over_limit_raises() -> None:
    ok = b"data: " + b"x" * 40 + b"\n"  # 40 + LF per line
    assert decode(ok * 2 + b"data: " + b"x" * 18 + b"\n\n", max_event_bytes=100)[0].data == "\n".join(
        ["x" * 40, "x" * 40, "x" * 18]
    )
    with pytest.raises(SSEError):
        decode(ok * 2 + b"data: " + b"x" * 19 + b"\n\n", max_event_bytes=100)
    with pytest.raises(SSEError):
        decode(b"data\n" * 200, max_event_bytes=100)  # empty lines count too (their LFs)


def test_limit_is_per_event() -> None:
    block = b"data: " + b"x" * 80 + b"\n\n"
    assert len(decode(block * 50, [7, 300, 2001], max_event_bytes=100)) == 50


# --- encoder ----------------------------------------------------------------------------------------


def test_encode_event() -> None:
    assert encode_event("hi") == b"data: hi\n\n"
    assert encode_event("") == b"data: \n\n"
    assert encode_event("a\nb\r\nc\rd", event="e", id="7", retry=10) == (
        b"event: e\nid: 7\nretry: 10\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    )
    assert encode_event("x", id="") == b"id: \ndata: x\n\n"
    assert encode_event("\u2028é") == "data: \u2028é\n\n".encode()


@pytest.mark.parametrize(
    "kwargs",
    [{"event": "a\nb"}, {"event": "a\r"}, {"id": "1\n"}, {"id": "\r1"}, {"id": "a\0b"}, {"retry": -1}],
)
def test_encode_event_rejects(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        encode_event("x", **kwargs)  # type: ignore[arg-type]


def test_encode_comment() -> None:
    assert encode_comment() == b":\n\n"
    assert encode_comment(" ping") == b": ping\n\n"
    for bad in ["a\nb", "a\r"]:
        with pytest.raises(ValueError):
            encode_comment(bad)


# --- chunking invariance and round trips ------------------------------------------------------------

SAMPLES = [
    b': hello\n\nevent: message\nid: 1\ndata: {"jsonrpc": "2.0", "id": 1}\n\n',
    BOM + "id: é\r\ndata: 𝄞 one\r\ndata: two\r\n\r\n: ka\r\n\r\nretry: 5\r\ndata\r\n\r\n".encode(),
    b"data: a\r\rdata: b\r\n\r\ndata: c\n\rdata: d\r\r\n\nid: x\0y\ndata: e\n\ndata: tail",
    b"data: \xff\xfe bad \xe2\x82\n\nid\ndata:\xf0\x9f\x98\x80\r\n\r\n",
]


@pytest.mark.parametrize("stream", SAMPLES)
def test_every_two_way_split_matches_reference(stream: bytes) -> None:
    expected, comments = reference(stream)
    assert expected  # the samples are not trivial
    for cut in range(len(stream) + 1):
        dec = SSEDecoder()
        events = dec.feed(stream[:cut]) + dec.feed(stream[cut:]) + dec.close()
        assert events == expected, cut
        assert dec.comments == comments


@pytest.mark.parametrize("stream", SAMPLES)
def test_byte_at_a_time(stream: bytes) -> None:
    assert decode(stream, list(range(len(stream)))) == reference(stream)[0]


cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=30)


@given(st.sampled_from(SAMPLES), cuts)
def test_random_splits_of_samples(stream: bytes, offsets: list[int]) -> None:
    assert decode(stream, [o % (len(stream) + 1) for o in offsets]) == reference(stream)[0]


# Building blocks that exercise the interesting paths: every line ending, BOMs, NULs, bad UTF-8,
# field names with and without colons, look-alike line breaks.
PIECES = [
    b"\n", b"\r", b"\r\n", b"\n\n", b"\r\r", b":", b": ", b" ", b"data", b"data:", b"data: x",
    b"event", b"event: e", b"id", b"id: 1", b"id: \0", b"retry: 7", b"retry: x", b"foo",
    BOM, b"\xe2\x82", b"\xac", b"\xff", "é\u2028\x0b\x0c\x1c\x85".encode(),
]  # fmt: skip


@settings(max_examples=300)
@given(st.lists(st.sampled_from(PIECES), max_size=40), cuts)
def test_random_streams_match_reference(pieces: list[bytes], offsets: list[int]) -> None:
    stream = b"".join(pieces)
    expected, comments = reference(stream)
    dec = SSEDecoder()
    events: list[SSEEvent] = []
    start = 0
    for cut in [*sorted(o % (len(stream) + 1) for o in offsets), len(stream)]:
        events += dec.feed(stream[start:cut])
        start = cut
    assert events + dec.close() == expected
    assert dec.comments == comments


@given(st.binary(max_size=200), cuts)
def test_arbitrary_bytes_never_crash_and_match_reference(stream: bytes, offsets: list[int]) -> None:
    assert decode(stream, [o % (len(stream) + 1) for o in offsets]) == reference(stream)[0]


# SSE is UTF-8: lone surrogates (category Cs) cannot be sent at all, so they are not generated.
line_free = st.text(st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",)), max_size=20)
event_specs = st.tuples(
    st.text(
        st.characters(blacklist_characters="\r", blacklist_categories=("Cs",)), max_size=50
    )  # data: incl. LF
    | st.sampled_from(["", "\n", "a\n", "\nb", "\u2028\x0b\x0c\x1c\x85", '{"k": "v"}']),
    st.none() | line_free,
    st.none() | line_free,
)


@given(st.lists(event_specs, max_size=10), st.sampled_from([b"\n", b"\r", b"\r\n"]), cuts, st.booleans())
def test_round_trip(
    specs: list[tuple[str, str | None, str | None]], eol: bytes, offsets: list[int], bom: bool
) -> None:
    stream = b"".join(encode_event(d, event=e, id=i) + encode_comment("ka") for d, e, i in specs)
    # Every LF in the encoding is a line end (values never contain CR/LF), so any EOL style is equivalent.
    stream = (BOM if bom else b"") + stream.replace(b"\n", eol)
    expected = []
    last_id: str | None = None
    for data, event, id_ in specs:
        if id_ is not None:
            last_id = id_ or None
        expected.append(SSEEvent(data, event or "message", last_id))
    dec = SSEDecoder()
    events: list[SSEEvent] = []
    start = 0
    for cut in [*sorted(o % (len(stream) + 1) for o in offsets), len(stream)]:
        events += dec.feed(stream[start:cut])
        start = cut
    assert events + dec.close() == expected
    assert dec.comments == len(specs)
    assert dec.last_event_id == last_id


@given(st.text(max_size=50))
def test_round_trip_normalises_cr(data: str) -> None:
    normalised = data.replace("\r\n", "\n").replace("\r", "\n")
    assert decode(encode_event(data)) == [SSEEvent(normalised)]
