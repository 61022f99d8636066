"""structlog, configured once: JSON lines when not on a terminal, a readable console otherwise.

A redaction step runs before rendering, so a secret logged by mistake under a sensitive key (tokens, keys,
handles, elicited content) is replaced, whatever module logged it.
"""

from __future__ import annotations

import functools
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


def configure(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    out = stream or sys.stderr
    as_json = fmt == "json" or (fmt == "auto" and not out.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
