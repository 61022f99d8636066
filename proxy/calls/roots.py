"""Roots a legacy server asks for outside any call, and the roots each upstream session was last given.

server-filesystem and server-everything send `roots/list` right after `initialized`, before any client
request, and act on the answer for the rest of the session (server-filesystem: its allowed directories).
A 2026-07-28 client can only be asked inside one of its own requests, so the session *holds* such a request
(`SessionRoots.answer` returns None: answered later) instead of refusing it, and the first call that takes
the session asks its client, in that call's first `input_required` round, before the call itself is sent
upstream — the server then serves that call with the client's own roots.

A server's start-up request is told apart from a tool's own question by time (upstream/session_roots.py): a
new session's first call waits for the upstream's learnt start-up window before it is sent, so the start-up
request arrives with no call in flight and is held; a roots/list that arrives once a call is under way is
that call's, asked in its round, and costs later calls nothing.

Sessions are pooled per principal and declared capabilities (pool.py), so several clients of one principal
(two windows of one user) may use one session in turn, each with its roots. On a session whose server asked
for roots unprompted, every later call is asked for its client's roots too (one extra round, answered by the
SDKs' roots handlers without the user); when they differ from what the session was last given, the proxy
sends `notifications/roots/list_changed` upstream, answers the server's re-fetch with the new roots, and only
then sends the call. Calls never share a session at the same time, so each call runs with its own client's
roots as last told (a server that applies them asynchronously may still be applying them).

Only when the client declared `roots` (and no `static_roots` are configured for the upstream: those answer
every such request, as before).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from proxy.calls.registry import LiveCall
from proxy.translate.exchange import PROXY_ASKED, PendingInput, cancel_reply
from proxy.upstream.base import UpstreamError
from proxy.upstream.session_roots import REFETCH_WAIT, STALE_AFTER, RootsBook, SessionRoots
from proxy.wire import jsonrpc, mcp

__all__ = [
    "REFETCH_WAIT",
    "STALE_AFTER",
    "RootsBook",
    "SessionRoots",
    "answered_roots",
    "ask_first",
    "deliver_input",
    "settle_unasked",
]

log = structlog.get_logger(__name__)


def answered_roots(
    pending: Mapping[str, PendingInput], responses: Mapping[str, Any]
) -> list[tuple[PendingInput, Any]]:
    """The roots/list requests among `pending` that `responses` answers, with their answers."""
    return [(p, responses[k]) for k, p in pending.items() if p.method == mcp.ROOTS and k in responses]


def ask_first(call: LiveCall, roots: SessionRoots | None) -> bool:
    """Before `call` is sent: queue the roots requests its session holds or, on a session whose server
    asked unprompted before, the proxy's own; True if the call's first round must ask them first."""
    if roots is None:
        return False
    roots.begin_call()
    held = roots.take_held()
    for request in held:
        call.exchange.on_server_request(request)  # roots are declared: queued, never refused
    if not held and roots.asks_unprompted:
        call.exchange.ask(mcp.ROOTS)
    return call.exchange.has_pending


async def deliver_input(call: LiveCall, responses: Mapping[str, Any], roots: SessionRoots | None) -> None:
    """Send the client's answers the upstream waits for; tell the server changed roots (list_changed,
    then its re-fetch answered); send the call itself once nothing it waited for is pending. Raises
    UpstreamError."""
    answered = answered_roots(call.exchange.pending, responses) if roots is not None else []
    for reply in call.exchange.accept(responses):
        if reply.for_upstream:
            await call.session.send(reply.message())
    if roots is not None and any([roots.answered(p.legacy_id, answer) for p, answer in answered]):
        await roots.tell_changed(call.session)
    if call.unsent is not None and not call.exchange.has_pending:
        (method, params), call.unsent = call.unsent, None
        call.upstream_id = await call.session.call(method, params, call.inbox)


async def settle_unasked(call: LiveCall, roots: SessionRoots | None) -> None:
    """`call` completed while the upstream still awaited input it asked during the gather window: a
    roots/list waits on the session for the next call, the rest are cancelled upstream."""
    for pending in call.exchange.take_pending():
        if pending.legacy_id == PROXY_ASKED:
            continue
        if roots is not None and pending.method == mcp.ROOTS:
            roots.hold(jsonrpc.Request(pending.legacy_id, pending.method, pending.params))
            continue
        try:
            await call.session.send(cancel_reply(pending, "the call completed first").message())
        except UpstreamError:
            log.info("upstream.cancel_failed", request=pending.legacy_id)
