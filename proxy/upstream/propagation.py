"""Headers that follow one client request upstream: its `X-Request-Id` and, when tracing, `traceparent`.

The front sets them for the request it is handling (`propagating`); the HTTP transports add them to what
they send (`with_propagated`). A `ContextVar` carries them, so the `UpstreamSession` protocol does not change:
asyncio copies the context into every task created while the request is handled (the call's POST, the
answers to server requests, plain requests, a takeover's stream), and into nothing else.

A session outlives the request that opened it. Its long-lived tasks (the standalone GET stream, a stdio
child's readers) call `detach_from_request` first, so neither their requests nor their log lines carry the
opening request's ids.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from contextvars import ContextVar
from types import MappingProxyType

import structlog
from multidict import istr

_NONE: Mapping[str, str] = MappingProxyType({})
_PROPAGATED: ContextVar[Mapping[str, str]] = ContextVar("mrtr_proxy_propagated_headers", default=_NONE)


class propagating:
    """Send `headers` upstream with every HTTP request made inside this block (and the tasks it starts).

    A class rather than a `contextlib.contextmanager` generator: it is entered once per client request."""

    __slots__ = ("_headers", "_token")

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = MappingProxyType(dict(headers))

    def __enter__(self) -> None:
        self._token = _PROPAGATED.set(self._headers)

    def __exit__(self, *_: object) -> None:
        _PROPAGATED.reset(self._token)


def propagated() -> Mapping[str, str]:
    """The headers of the client request being handled (empty outside one)."""
    return _PROPAGATED.get()


def with_propagated(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` plus the propagated ones, which replace any header of the same name (in any case)."""
    extra = _PROPAGATED.get()
    if not extra:
        return dict(headers)
    names = {name.lower() for name in extra}
    out = {name: value for name, value in headers.items() if name.lower() not in names}
    out.update(extra)
    return out


@functools.lru_cache(maxsize=256)  # names come from the configuration and this module: a few dozen at most
def header_name(name: str) -> istr:
    """`name` as aiohttp keeps a header name (case-insensitive `istr`), one object per name. aiohttp makes an
    `istr` of every name that is not one already, and a response keeps its request's headers (its request
    info) for as long as it lives: a parked call's held ~0.5 KB of names of its own."""
    return istr(name)


def own_only() -> Mapping[str, str]:
    """The propagated headers as a request the proxy makes on its own account carries them (the era probe:
    a verdict every user then shares): `Via` reduced to its last entry, the one this proxy added
    (front/loops.py appends it after whatever the client's request said), so the loop check still works and
    nothing the client wrote in it goes along. The request id and trace context are the proxy's own
    (bounded, or drawn by it)."""
    out = dict(_PROPAGATED.get())
    for name, value in out.items():
        if name.lower() == "via":
            out[name] = value.rsplit(",", 1)[-1].strip()
    return out


def forget_propagated() -> None:
    """In a task that has sent all it will send for its request: let its context drop the headers (a parked
    call's delivery task waits for minutes)."""
    _PROPAGATED.set(_NONE)


def detach_from_request() -> None:
    """First thing in a task that lives as long as its session: forget the request that happened to start it
    (its propagated headers and its structlog context). Only ever call it at the top of such a task."""
    _PROPAGATED.set(_NONE)
    structlog.contextvars.clear_contextvars()
