"""structlog, configured once: JSON lines when not on a terminal, a readable console otherwise.

A redaction step runs before rendering, so a secret logged by mistake under a sensitive key (tokens, keys,
handles, elicited content) is replaced, whatever module logged it.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

import structlog

REDACTED = "[redacted]"
SENSITIVE_KEYS = frozenset(
    {
        "authorization", "proxy-authorization", "cookie", "set-cookie", "bearer", "key", "keys",
        "request_state", "requeststate", "input_responses", "inputresponses", "content", "arguments",
        "params", "result", "plaintext", "claims", "handle",
    }
)  # fmt: skip
# Any key containing one of these is sensitive too (access_token, client_secret, x-api-key, …).
SENSITIVE_PARTS = ("token", "secret", "password", "passwd", "credential", "api_key", "api-key", "apikey")


@functools.lru_cache(maxsize=4096)
def is_sensitive(key: object) -> bool:
    """Memoized: log keys are a small vocabulary, and this runs for every key of every line."""
    name = str(key).lower()
    return (
        name in SENSITIVE_KEYS
        or any(part in name for part in SENSITIVE_PARTS)
        or name.endswith(("_key", "-key"))
    )


def _redact_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: REDACTED if is_sensitive(k) else _redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    return value


def redact(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event_dict):
        if is_sensitive(key):
            event_dict[key] = REDACTED
        elif isinstance(event_dict[key], Mapping | list | tuple):
            event_dict[key] = _redact_value(event_dict[key])
    return event_dict


_rendering = {"json": False}  # what `configure` chose last: JSON lines, or the console


def renders_json() -> bool:
    """Whether the configured renderer writes JSON lines (`logging.format: json`, or auto off a terminal)."""
    return _rendering["json"]


def configure(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    out = stream or sys.stderr
    as_json = fmt == "json" or (fmt == "auto" and not out.isatty())
    _rendering["json"] = as_json
    renderer: Any = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact,
        structlog.processors.format_exc_info,
        renderer,
    ]
    threshold = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    _fast.clear()  # the fast path of `info_line`: JSON lines at info
    if as_json and threshold <= logging.INFO:
        _fast["json"] = _FastJson(processors, structlog.PrintLogger(out))


# The canonical request line, once per request, is the hot path's one log line. Through the processor chain
# it costs ~18 µs (context copy, five processors, a json.dumps with a `default`, so no cached encoder);
# `info_line` writes the same bytes in ~7 µs when it can prove they are the same: JSON output configured
# here (and not replaced since, e.g. by `structlog.testing.capture_logs`), and every value a plain scalar
# (anything else, nested values included, takes the chain: redaction inside, the fallback handler).
_PLAIN = frozenset({str, int, float, bool, type(None)})


class _FastJson:
    def __init__(self, processors: list[Any], printer: structlog.PrintLogger) -> None:
        self.processors = processors
        self.chain = tuple(processors)  # capture_logs swaps the list's items, keeping the list
        self.printer = printer

    def current(self) -> bool:
        processors = structlog.get_config()["processors"]
        return processors is self.processors and tuple(processors) == self.chain


_fast: dict[str, _FastJson] = {}


def info_line(logger: Any, event: str, fields: Mapping[str, Any]) -> None:
    """`logger.info(event, **fields)`, fast when possible; the same JSON content either way."""
    fast = _fast.get("json")
    if fast is None or not fast.current():
        logger.info(event, **fields)
        return
    line: dict[str, Any] = {**fields, "event": event}
    for key, value in structlog.contextvars.get_contextvars().items():
        line.setdefault(key, value)
    line["level"] = "info"
    line["timestamp"] = datetime.datetime.now(tz=datetime.UTC).isoformat().replace("+00:00", "Z")
    for key, value in line.items():
        if is_sensitive(key):
            line[key] = REDACTED
        elif type(value) not in _PLAIN:  # nested (redacted inside), or rendered by the fallback handler
            logger.info(event, **fields)
            return
    fast.printer.msg(json.dumps(line))


class StructlogHandler(logging.Handler):
    """The standard library's records (aiohttp's, asyncio's, the `warnings` module's) through structlog, so
    there is one logging path: with JSON, every line the process writes is a JSON object."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {"logger": record.name}
            if record.exc_info and record.exc_info[1] is not None:
                fields["exc_info"] = record.exc_info
            event = "python.warning" if record.name == "py.warnings" else record.getMessage()
            if record.name == "py.warnings":
                fields["warning"] = record.getMessage().strip()
            structlog.get_logger(record.name).log(record.levelno, event, **fields)
        except Exception:  # pragma: no cover - logging must never raise into its caller
            self.handleError(record)


def capture_stdlib(level: str = "info") -> None:
    """Route the standard library's logging and `warnings.warn` through structlog (see StructlogHandler)."""
    root = logging.getLogger()
    root.handlers[:] = [StructlogHandler()]
    root.setLevel(logging.getLevelNamesMapping()[level.upper()])
    logging.captureWarnings(True)
