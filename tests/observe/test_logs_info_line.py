"""`observe.logs.info_line`, the canonical request line's fast path: the same JSON content as the processor
chain (`logger.info(event, **fields)`), redaction included, and the chain whenever it cannot prove that."""

from __future__ import annotations

import datetime
import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from proxy.observe import logs
from proxy.observe.logs import REDACTED, configure, info_line

LINE: dict[str, Any] = {
    "request_id": "0f3a9c2e5b7d4e1f",
    "http_method": "POST",
    "path": "/mcp",
    "upstream": "default",
    "id": 7,
    "method": "tools/call",
    "era": "modern",
    "outcome": "complete",
    "call": "c-3f2a1b",
    "round": 1,
    "status": 200,
    "duration_ms": 1.37,
    "cached": False,
    "principal": None,
    "authorization": "Bearer s3cret",  # sensitive: redacted on both paths
    "access_token": "t0ken",
}
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.contextvars.clear_contextvars()
    structlog.reset_defaults()


def _both(fields: dict[str, Any], **context: Any) -> tuple[list[str], list[str]]:
    """The raw lines of the chain and of `info_line` for the same fields, in the same context."""
    out: list[list[str]] = []
    for fast in (False, True):
        stream = io.StringIO()
        configure(fmt="json", stream=stream)
        log = structlog.get_logger("proxy.request")
        with structlog.contextvars.bound_contextvars(**context):
            if fast:
                info_line(log, "request", fields)
            else:
                log.info("request", **fields)
        out.append(stream.getvalue().splitlines())
    return out[0], out[1]


def _without_time(raw: str) -> str:
    stamp = json.loads(raw)["timestamp"]
    assert ISO_UTC.match(stamp)
    return raw.replace(f'"timestamp":"{stamp}"', '"timestamp":"T"')


def test_the_canonical_line_is_the_same_bytes() -> None:
    chain, fast = _both(LINE, request_id="0f3a9c2e5b7d4e1f", tenant="acme")
    assert len(chain) == len(fast) == 1
    assert _without_time(fast[0]) == _without_time(chain[0])
    content = json.loads(fast[0])
    assert content["authorization"] == content["access_token"] == REDACTED
    assert content["tenant"] == "acme"  # bound context joins the line, as merge_contextvars does
    assert list(content)[-4:] == ["event", "tenant", "level", "timestamp"]
    assert "s3cret" not in fast[0] and "t0ken" not in fast[0]


def test_the_fast_path_skips_the_processor_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    configure(fmt="json", stream=stream)

    def chain_ran(*_: Any) -> None:
        raise AssertionError("the processor chain ran")

    monkeypatch.setattr(structlog.processors.TimeStamper, "__call__", chain_ran)
    info_line(structlog.get_logger("proxy.request"), "request", LINE)
    assert json.loads(stream.getvalue())["outcome"] == "complete"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(float("nan"), id="nan"),
        pytest.param(2**70, id="big-int"),
        pytest.param("\ud800", id="lone-surrogate"),
        pytest.param("caf\u00e9 \u2603", id="non-ascii"),
    ],
)
def test_awkward_scalars_are_the_same_bytes(value: Any) -> None:
    chain, fast = _both({**LINE, "extra": value})
    assert _without_time(fast[0]) == _without_time(chain[0])


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"Authorization": "Bearer s", "ok": 1}, id="nested-dict"),
        pytest.param([{"secret": "s"}, "plain"], id="list"),
        pytest.param(("a", 1), id="tuple"),
        pytest.param(object(), id="repr"),
    ],
)
def test_other_values_take_the_chain(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    chain, fast = _both({**LINE, "extra": value})
    assert _without_time(fast[0]) == _without_time(chain[0])
    if isinstance(value, dict | list):
        assert '"Authorization":"[redacted]"' in fast[0] or '"secret":"[redacted]"' in fast[0]


def test_sensitive_keys_are_redacted_whatever_their_value() -> None:
    _, fast = _both({**LINE, "params": {"name": "deploy"}, "handle": "h"})
    content = json.loads(fast[0])
    assert content["params"] == content["handle"] == REDACTED


def test_a_level_above_info_writes_nothing() -> None:
    stream = io.StringIO()
    configure(level="warning", fmt="json", stream=stream)
    info_line(structlog.get_logger("proxy.request"), "request", LINE)
    assert stream.getvalue() == ""


def test_console_output_takes_the_chain() -> None:
    stream = io.StringIO()
    configure(fmt="console", stream=stream)
    info_line(structlog.get_logger("proxy.request"), "request", LINE)
    text = stream.getvalue()
    assert "request" in text and "tools/call" in text and "s3cret" not in text
    assert not text.startswith("{")


def test_a_replaced_configuration_sees_the_line() -> None:
    stream = io.StringIO()
    configure(fmt="json", stream=stream)
    with capture_logs() as captured:
        info_line(structlog.get_logger("proxy.request"), "request", {"id": 1, "status": 200})
    assert captured == [{"id": 1, "status": 200, "event": "request", "log_level": "info"}]
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    "ns",
    [
        pytest.param(1_764_800_000_123_456_789, id="fraction"),
        pytest.param(1_764_800_000_000_000_999, id="whole-second"),  # isoformat leaves the fraction out
        pytest.param(1_764_800_001_000_010_000, id="leading-zeros"),
    ],
)
def test_the_timestamp_is_timestampers(ns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    configure(fmt="json", stream=stream)
    monkeypatch.setattr(logs.time, "time_ns", lambda: ns)
    info_line(structlog.get_logger("proxy.request"), "request", {"id": 1})
    when = datetime.datetime.fromtimestamp(ns // 10**9, tz=datetime.UTC).replace(
        microsecond=ns // 1000 % 10**6
    )
    assert json.loads(stream.getvalue())["timestamp"] == when.isoformat().replace("+00:00", "Z")


def test_a_reconfigured_structlog_sees_the_line() -> None:
    stream, other = io.StringIO(), io.StringIO()
    configure(fmt="json", stream=stream)
    structlog.configure(processors=[structlog.processors.KeyValueRenderer(key_order=["event"])])
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(other))
    info_line(structlog.get_logger("proxy.request"), "request", {"id": 1})
    assert stream.getvalue() == "" and other.getvalue() == "event='request' id=1\n"


def test_a_line_buffered_stream_gets_whole_lines(tmp_path: Path) -> None:
    with (tmp_path / "log").open("w", buffering=1, encoding="utf-8") as out:  # as sys.stderr is
        configure(fmt="json", stream=out)
        for n in range(3):
            info_line(structlog.get_logger("proxy.request"), "request", {"id": n})
        written = (tmp_path / "log").read_text(encoding="utf-8")  # before the file is closed
    assert [json.loads(raw)["id"] for raw in written.splitlines()] == [0, 1, 2]


def test_a_level_configured_since_is_respected() -> None:
    stream = io.StringIO()
    configure(fmt="json", stream=stream)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    info_line(structlog.get_logger("proxy.request"), "request", {"id": 1})
    assert stream.getvalue() == ""


@pytest.mark.parametrize("extra", [{}, {"subscription": {"tools": True, "uris": 2}}, {"left_out": ["b"]}])
def test_an_owned_line_is_the_same_bytes(extra: dict[str, Any]) -> None:
    """`owned=True` (the request line's rendered dict, completed in place): the same line as the chain,
    the nested values that take the chain included."""
    fields = {**LINE, **extra}
    chain, _ = _both(fields, request_id="0f3a9c2e5b7d4e1f", tenant="acme")
    stream = io.StringIO()
    configure(fmt="json", stream=stream)
    with structlog.contextvars.bound_contextvars(request_id="0f3a9c2e5b7d4e1f", tenant="acme"):
        info_line(structlog.get_logger("proxy.request"), "request", dict(fields), owned=True)
    (owned,) = stream.getvalue().splitlines()
    assert _without_time(owned) == _without_time(chain[0])
