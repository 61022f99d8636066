"""Request lines for unit tests, written the way the log has them (`outcome` as `"<outcome>[:<detail>]"`)."""

from __future__ import annotations

from typing import Any

from proxy.observe.line import Detail, Outcome, RequestLine


def outcome_of(text: str) -> tuple[Outcome, Detail | None]:
    """`"failed:-31001"` -> (Outcome.FAILED, -31001): the log's text back to what the line holds."""
    kind, colon, detail = text.partition(":")
    if not colon:
        return Outcome(kind), None
    return Outcome(kind), int(detail) if detail.lstrip("-").isdigit() else detail


def line_of(**fields: Any) -> RequestLine:
    """A RequestLine with these attributes (`outcome` given as the log's text)."""
    line = RequestLine()
    for name, value in fields.items():
        if name == "outcome":
            line.set_outcome(*outcome_of(value))
        else:
            setattr(line, name, value)
    return line
