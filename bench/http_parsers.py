"""What reading a standalone GET stream's HTTP costs, per held stream and per event (a diagnostic, in process;
not part of `make bench`).

    .bench/venv/bin/python bench/http_parsers.py [--streams 2000] [--events 20000] [--repeat 5]

Compares the proxy's own `proxy.wire.http1.ResponseReader` (llhttp through httptools since issue 31; run it
with `PYTHONPATH` at an older checkout to measure the hand-written reader it replaced) with a reader of the
same shape on h11 (skipped when h11 is not installed). For each:

- **bytes per held stream**: tracemalloc over `--streams` readers, each fed the response head of an event
  stream (FastMCP 1.30's) and left waiting for its body, as a parked call's GET stream waits;
- **µs per event**: one SSE event (a typical server request, ~330 bytes of JSON) per chunk and per read, fed
  through the reader alone and through the reader and the proxy's SSE decoder; the best of `--repeat` runs of
  `--events` events, in process CPU time (a busy machine slows a run, it does not add to CPU time much).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from proxy.wire.http1 import ResponseReader
from proxy.wire.sse import SSEDecoder

HEAD = (
    b"HTTP/1.1 200 OK\r\ndate: Thu, 03 Dec 2026 15:00:00 GMT\r\nserver: uvicorn\r\n"
    b"cache-control: no-cache, no-transform\r\nconnection: keep-alive\r\ncontent-type: text/event-stream\r\n"
    b"mcp-session-id: 9f1c2d3e4b5a69788796a5b4c3d2e1f0\r\nx-accel-buffering: no\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
MESSAGE = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "elicitation/create",
    "params": {
        "message": "What is your name?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Your name"}},
            "required": ["name"],
        },
    },
}


def event_chunk() -> bytes:
    event = b"event: message\r\ndata: " + json.dumps(MESSAGE).encode() + b"\r\n\r\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


class H11Reader:
    """The proxy's reader's shape on h11: `feed(data)` → (the head once complete, the body's bytes)."""

    __slots__ = ("conn", "done")

    def __init__(self) -> None:
        import h11

        self.conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=64 * 1024)
        self.conn.send(h11.Request(method="GET", target="/mcp", headers=[("Host", "127.0.0.1:8000")]))
        self.conn.send(h11.EndOfMessage())
        self.done = False

    def feed(self, data: bytes) -> tuple[Any, bytes]:
        import h11

        self.conn.receive_data(data)
        head, body = None, []
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                break
            if isinstance(event, h11.Response):
                head = (event.status_code, {k.decode(): v.decode("latin-1") for k, v in event.headers})
            elif isinstance(event, h11.Data):
                body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self.done = True
                break
        return head, b"".join(body)


def readers() -> dict[str, Callable[[], Any]]:
    found: dict[str, Callable[[], Any]] = {f"proxy ({ResponseReader.__module__})": ResponseReader}
    try:
        import h11

        found[f"h11 {h11.__version__}"] = H11Reader
    except ImportError:
        pass
    return found


def bytes_per_stream(make: Callable[[], Any], count: int) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    held = []
    for _ in range(count):
        reader = make()
        reader.feed(HEAD)
        held.append(reader)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return (grown - 8 * count) / count  # less the list slot holding each reader


def us_per_event(make: Callable[[], Any], events: int, repeat: int, *, decode: bool) -> float:
    chunk = event_chunk()
    best = float("inf")
    for _ in range(repeat):
        reader, decoder, seen = make(), SSEDecoder(), 0
        reader.feed(HEAD)
        start = time.process_time()
        for _ in range(events):
            _, body = reader.feed(chunk)
            if decode:
                seen += len(decoder.feed(body))
        best = min(best, time.process_time() - start)
        assert not decode or seen == events
    return best / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"one event per chunk and per read: {len(event_chunk())} bytes on the wire")
    print("| reader | bytes per held stream | µs per event (reader) | µs per event (reader + SSE decoder) |")
    print("|---|---:|---:|---:|")
    for name, make in readers().items():
        held = bytes_per_stream(make, args.streams)
        alone = us_per_event(make, args.events, args.repeat, decode=False)
        decoded = us_per_event(make, args.events, args.repeat, decode=True)
        print(f"| {name} | {held:,.0f} | {alone:.2f} | {decoded:.2f} |")


if __name__ == "__main__":
    main()
