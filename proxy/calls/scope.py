"""Per-round notification scope and the upstream session's log level, for the call service.

A call's rounds are separate client requests: `scoped_sink` gives each round's sink only what that request
asked for (its own progress token, its log level; see translate/notes.py). Upstream, the log level belongs
to the legacy *session*, which the pool hands to one call at a time and reuses across calls of the same
pool key (same principal, capabilities and forwarded credentials): `SessionLevels` remembers the level last
set on each session and sends `logging/setLevel` only when a call that opted in wants another one. The
proxy filters every message by the request's own level anyway, so a session left at a lower level by an
earlier call costs traffic, never a message the client did not ask for.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import structlog

from proxy.calls.outcomes import NotificationSink
from proxy.translate.notes import RoundScope, call_progress_token
from proxy.upstream.base import UpstreamError, UpstreamSession
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger(__name__)

SET_LEVEL_TIMEOUT = 10.0


def scoped_sink(
    notify: NotificationSink | None, params: Mapping[str, Any], log_level: str | None, call_id: str
) -> NotificationSink | None:
    """`notify`, seeing only the notifications of call `call_id` that this round's request asked for."""
    if notify is None:
        return None
    scope = RoundScope.of(params, log_level)
    token = call_progress_token(call_id)
    target = notify

    async def sink(note: jsonrpc.Notification) -> None:
        relayed = scope.relay(note, token)
        if relayed is not None:
            await target(relayed)

    return sink


class SessionLevels:
    """The log level last set on each live upstream session (forgotten with the session)."""

    def __init__(self) -> None:
        self._levels: weakref.WeakKeyDictionary[UpstreamSession, str] = weakref.WeakKeyDictionary()

    def level(self, session: UpstreamSession) -> str | None:
        return self._levels.get(session)

    async def ensure(self, session: UpstreamSession, level: str | None) -> None:
        """Set `level` on `session` if a request asked for one, the upstream declares `logging`, and the
        session is not at that level already. A refusal is logged; the call goes on (filtered here)."""
        if level is None or self._levels.get(session) == level:
            return
        if "logging" not in session.info.capabilities:
            return
        try:
            reply = await session.request(mcp.SET_LOG_LEVEL, {"level": level}, SET_LEVEL_TIMEOUT)
        except UpstreamError as exc:
            log.info("upstream.set_level_failed", level=level, error=str(exc))
            return
        if isinstance(reply, jsonrpc.Error):
            log.info("upstream.set_level_refused", level=level, error=reply.error.message)
            return
        self._levels[session] = level
