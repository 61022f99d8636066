"""structlog, configured once: JSON lines when not on a terminal, a readable console otherwise.

A redaction step runs before rendering, so a secret logged by mistake under a sensitive key (tokens, keys,
handles, elicited content) is replaced, whatever module logged it.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import json
import logging
import sys
import threading
import time
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

import orjson
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
        structlog.processors.JSONRenderer(serializer=_serialize)
        if as_json
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
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
    wrapper = structlog.make_filtering_bound_logger(threshold)
    structlog.configure(
        processors=processors,
        wrapper_class=wrapper,
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    _fast.clear()  # the fast path of `info_line`: JSON lines at info
    if as_json and threshold <= logging.INFO:
        _fast["json"] = _FastJson(processors, wrapper, out)


# JSON lines are compact (no spaces after `,` and `:`) and ASCII: orjson writes them, a few times faster than
# json.dumps; what it cannot write as ASCII (non-ASCII text, integers beyond 64 bits, lone surrogates)
# json.dumps writes, with the same separators and `\uXXXX` escapes. Every line takes this one serializer: the
# processor chain's JSONRenderer and the request line's fast path alike.
#
# The canonical request line, once per request, is the hot path's one log line. Through the processor chain
# it costs ~18 µs (context copy, five processors, a serializer call with a `default`); `info_line` writes the
# same bytes for a fraction of that when it can prove they are the same: JSON output configured here (and not
# replaced since, e.g. by `structlog.testing.capture_logs`), and every value a plain scalar (anything else,
# nested values included, takes the chain: redaction inside, the fallback handler). Its pieces are bound
# once: whether each key is sensitive, the timestamp's whole second.
_PLAIN = frozenset({str, int, float, bool, type(None)})
_SEPARATORS = (",", ":")
# Dataclasses and datetimes go to `default` (structlog's repr fallback), as json.dumps sends them: orjson
# would otherwise write a dataclass's fields out one by one (a field kept out of its repr included).
_ORJSON = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _ascii_or_none(obj: Any, default: Any = None) -> str | None:
    try:
        raw = orjson.dumps(obj, default=default, option=_ORJSON)
    except TypeError:  # orjson.JSONEncodeError: a big integer, a lone surrogate, a key that is not a str …
        return None
    return raw.decode("ascii") if raw.isascii() else None


def _serialize(obj: Any, **kw: Any) -> str:
    """JSONRenderer's serializer (see above); `kw` is what it passes json.dumps (its `default`)."""
    text = _ascii_or_none(obj, kw.get("default"))
    return text if text is not None else json.dumps(obj, separators=_SEPARATORS, **kw)


def _live_configuration() -> Any:
    """structlog's live configuration object, read without `get_config`'s copy into a new dict per line
    (None if structlog ever moves it: then `get_config` it is)."""
    try:
        from structlog import _config  # noqa: PLC0415 - a private module, hence the guard

        live = _config._CONFIG
        known = hasattr(live, "default_processors") and hasattr(live, "default_wrapper_class")
        return live if known else None
    except (ImportError, AttributeError):  # pragma: no cover - structlog 24-26 have it
        return None


_STRUCTLOG = _live_configuration()


class _FastJson:
    def __init__(self, processors: list[Any], wrapper: type[Any], out: TextIO) -> None:
        self.processors = processors
        self.wrapper = wrapper  # its level: another one configured since may filter info out
        self.chain = list(processors)  # capture_logs swaps the list's items, keeping the list
        self.file = out
        # The lock structlog's PrintLoggers of this stream share, so a line of the chain's never interleaves.
        self.lock = getattr(structlog.PrintLogger(out), "_lock", None) or threading.Lock()
        # A line-buffered stream (sys.stderr, since Python 3.9) flushes on the newline itself.
        self.flush = not getattr(self.file, "line_buffering", False)

    def current(self) -> bool:
        """Whether structlog still has the processors and the level `configure` gave it, unchanged."""
        if _STRUCTLOG is None:  # pragma: no cover
            config = structlog.get_config()
            processors, wrapper = config["processors"], config["wrapper_class"]
        else:
            processors, wrapper = _STRUCTLOG.default_processors, _STRUCTLOG.default_wrapper_class
        return processors is self.processors and processors == self.chain and wrapper is self.wrapper

    def write(self, text: str) -> None:
        """What `PrintLogger.msg` writes (the line, a newline, a flush), in one write."""
        with self.lock:
            self.file.write(text + "\n")
            if self.flush:
                self.file.flush()


class _Stamp:
    """The timestamp `TimeStamper(fmt="iso", utc=True)` writes, `datetime.now(UTC).isoformat()` with "Z":
    the same clock, the same floor to microseconds, the date and time formatted once a second."""

    second = -1
    whole = ""  # "YYYY-MM-DDTHH:MM:SS"

    def __call__(self) -> str:
        micros = time.time_ns() // 1000
        second = micros // 1_000_000
        if second != self.second:
            whole = datetime.datetime.fromtimestamp(second, tz=datetime.UTC).isoformat()
            self.whole, self.second = whole.removesuffix("+00:00"), second
        fraction = str(micros)[-6:]  # zero-padded: micros has more than six digits
        return f"{self.whole}Z" if fraction == "000000" else f"{self.whole}.{fraction}Z"


_timestamp = _Stamp()
_fast: dict[str, _FastJson] = {}
# Keys known not sensitive (is_sensitive), bounded: the request line's keys are a small vocabulary.
_plain_keys: set[str] = set()


def info_line(logger: Any, event: str, fields: Mapping[str, Any], *, owned: bool = False) -> None:
    """`logger.info(event, **fields)`, fast when possible; the same JSON content either way. `owned`: `fields`
    is a dict made for this line alone (RequestLine.render's), completed in place rather than copied."""
    fast = _fast.get("json")
    if fast is None or not fast.current():
        logger.info(event, **fields)
        return
    line: dict[str, Any]
    if owned and isinstance(fields, dict):
        line = fields
        line["event"] = event
    else:
        line = {**fields, "event": event}
    for key, value in structlog.contextvars.get_contextvars().items():
        line.setdefault(key, value)
    line["level"] = "info"
    line["timestamp"] = _timestamp()
    # The usual line: every key known plain, every value a plain scalar (both checks in C).
    if not (_plain_keys.issuperset(line) and _PLAIN.issuperset(map(type, line.values()))):
        for key, value in line.items():
            if is_sensitive(key):
                line[key] = REDACTED
                continue
            if len(_plain_keys) < 1024:
                _plain_keys.add(key)
            if type(value) not in _PLAIN:  # nested (redacted inside), or rendered by the fallback handler
                if line is fields:  # owned: the keys before "event" (the chain adds the rest again)
                    fields = dict(itertools.takewhile(lambda item: item[0] != "event", line.items()))
                logger.info(event, **fields)
                return
    fast.write(_serialize(line))  # plain scalars: no `default` needed


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
