"""How a pool reaches one upstream: the sessions it opens (declaring what the pool key's client declared,
carrying its forwarded headers), the sessions it adopts from another replica (takeover), and what a
session answers when the server asks something with no call in flight."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp

from proxy.config import UpstreamConfig
from proxy.translate.capabilities import shared_legacy
from proxy.upstream.base import ServerInfo, SessionListener, UpstreamSession
from proxy.upstream.connect import adopt_upstream_session, open_upstream_session
from proxy.upstream.lean_http import LeanClient
from proxy.upstream.pool import PoolKey, SessionAdopter, SessionFactory
from proxy.upstream.session_roots import RootsBook, SessionRoots, StartupWindow
from proxy.wire import jsonrpc, mcp


def no_call_answer(upstream: UpstreamConfig) -> Callable[[jsonrpc.Request], jsonrpc.Response]:
    roots = [{"uri": r.uri, **({"name": r.name} if r.name else {})} for r in upstream.static_roots]

    def answer(req: jsonrpc.Request) -> jsonrpc.Response:
        """A server request with no call in flight (SEP-2260): only ping and static roots are answered."""
        if req.method == mcp.PING:
            return jsonrpc.Result(req.id, {})
        if req.method == mcp.ROOTS and roots:
            return jsonrpc.Result(req.id, {"roots": roots})
        return jsonrpc.error(
            req.id,
            jsonrpc.INVALID_PARAMS,
            f"{req.method} is only answered during a client request (no call is in flight)",
        )

    return answer


def session_factory(
    upstream: UpstreamConfig,
    http: aiohttp.ClientSession,
    roots: RootsBook | None = None,
    heard: SessionListener | None = None,
    lean: LeanClient | None = None,
) -> SessionFactory:
    """Sessions for a pool: declaring what the pool key's client declared, carrying its forwarded headers.
    On stdio the forwarded headers cannot reach the child; as part of the pool key they still keep the
    children of different principals apart. With `roots`, each session holds the roots/list its server
    sends before any call, for the first call to ask its client (calls/roots.py). `heard` is told every
    session-wide notification of every session (list changes: the aggregated routes' list cache). Streamable
    HTTP sessions POST on `lean`, the process's pooled client (None: each its own)."""
    answer = no_call_answer(upstream)
    window = StartupWindow()  # learnt from this upstream's sessions (session_roots.py)

    async def open_for(key: PoolKey) -> UpstreamSession:
        state = SessionRoots(answer, hold=key.capabilities.roots and not upstream.static_roots, window=window)
        session = await open_upstream_session(
            http,
            upstream,
            versions=upstream.protocol_versions,
            capabilities=shared_legacy(key.capabilities, upstream.protocol_versions[0]),
            headers=dict(key.forwarded),
            no_call=state.answer if roots is not None else answer,
            lean=lean,
        )
        if roots is not None:
            state.opened()
            roots.add(session, state)
        if heard is not None:
            session.hear(heard)
        return session

    return open_for


def session_adopter(
    upstream: UpstreamConfig, http: aiohttp.ClientSession, lean: LeanClient | None = None
) -> SessionAdopter | None:
    """How to attach to another replica's legacy session (takeover), where the transport allows it: only
    Streamable HTTP sessions outlive the connection that opened them and can be resumed by id."""
    if upstream.transport != "streamable-http" or upstream.url is None:
        return None
    answer = no_call_answer(upstream)

    async def adopt(key: PoolKey, session_id: str, info: ServerInfo) -> UpstreamSession:
        return await adopt_upstream_session(
            http,
            upstream,
            session_id=session_id,
            info=info,
            capabilities=key.capabilities.legacy(info.protocol_version),
            headers=dict(key.forwarded),
            no_call=answer,
            lean=lean,
        )

    return adopt
