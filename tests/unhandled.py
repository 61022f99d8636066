"""Every error-level `request.unhandled` a proxy logs while the tests run: it fails the run, naming the test.

The proxy logs `request.unhandled` (front/fallback.py) for an exception no room answered: a bug, with its
traceback. A test run that stays green while one is logged hides it (issue 29 item 11: a client hang-up in
the legacy relay was logged so, at error level, once or twice per interop run). So tests/conftest.py records
every such line, whichever proxy wrote it:
- in-process proxies (tests/e2e/harness.py `running_proxy`, the interop matrix): the fallback's logger is
  wrapped once per session, so it sees the line whatever logging configuration a test set (capture_logs
  included);
- subprocess proxies (`peers.run_peer`: replicas, `mrtr-proxy serve`; `peers.run_once`): their logs are
  scanned after every test (new lines only) and when they stop.
Each line is charged to the test that was running when it was found (a test marked `unhandled_expected`
provokes one on purpose: its own are not charged). At the end the run fails (exit status 1)
and the summary names every test and line, even when every test passed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENT = "request.unhandled"
BETWEEN_TESTS = "(between tests: session or module set-up and tear-down)"
EXPECTED = "unhandled_expected"  # the marker of a test whose own handler is the bug (front/test_fallback.py)


@dataclass
class Unhandled:
    """What was found, and where each watched subprocess log was read up to."""

    found: list[tuple[str, str]] = field(default_factory=list)  # (test node id, what was logged)
    current: str = BETWEEN_TESTS
    offsets: dict[Path, int] = field(default_factory=dict)

    def record(self, what: str) -> None:
        self.found.append((self.current, what))

    def watch(self, log: Path) -> None:
        self.offsets.setdefault(log, 0)

    def scan(self, log: Path | None = None, *, forget: bool = False) -> None:
        """Read what the watched logs (or only `log`) gained since the last scan."""
        for path in [log] if log is not None else list(self.offsets):
            start = self.offsets.get(path, 0)
            try:
                with path.open("rb") as f:
                    f.seek(start)
                    gained = f.read()
            except FileNotFoundError:
                gained = b""
            complete, newline, partial = gained.rpartition(b"\n")  # a line still being written waits
            self.offsets[path] = start + len(complete) + len(newline)
            self.scan_text(complete.decode(errors="replace"))
            if forget:
                self.scan_text(partial.decode(errors="replace"))
                self.offsets.pop(path, None)

    def scan_text(self, text: str) -> None:
        for line in text.splitlines():
            if EVENT in line and is_error(line):
                self.record(line.strip()[:2000])


def is_error(line: str) -> bool:
    """An error-level line: JSON `"level": "error"` (or critical), or the console renderer's `[error`."""
    try:
        parsed: Any = json.loads(line)
    except ValueError:
        return "[error" in line or "[critical" in line
    return isinstance(parsed, dict) and parsed.get("level") in ("error", "critical", "exception")


class RecordingLogger:
    """Wraps the fallback's logger: `request.unhandled` logged through it is recorded, then logged as ever."""

    def __init__(self, inner: Any, book: Unhandled) -> None:
        self._inner = inner
        self._book = book

    def exception(self, event: str, *args: Any, **fields: Any) -> Any:
        if event == EVENT:
            self._book.record(f"{event} (in-process) {fields}")
        return self._inner.exception(event, *args, **fields)

    def error(self, event: str, *args: Any, **fields: Any) -> Any:
        if event == EVENT:
            self._book.record(f"{event} (in-process) {fields}")
        return self._inner.error(event, *args, **fields)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


BOOK = Unhandled()
