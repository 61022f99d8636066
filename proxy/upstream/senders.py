"""How a 2026-07-28 request reaches a modern upstream, whatever its transport: one small Protocol,
`ModernSender`, made per request by `ModernSenders.sender` — a POST on the process's lean client (or, when
none is given, the upstream's aiohttp client) for a Streamable HTTP upstream (modern.py), a line on the
upstream's shared child for a stdio one (modern_stdio.py). The native relay, the mirror and the era probe
send through it and never ask which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import aiohttp

from proxy.config import UpstreamConfig
from proxy.upstream.lean_http import LeanClient
from proxy.upstream.modern import ModernTarget, Notify, post
from proxy.upstream.modern_stdio import ModernChildren
from proxy.upstream.tls import context_of
from proxy.wire import jsonrpc

_MAX_BARE = 256


class ModernSender(Protocol):
    """Send one 2026-07-28 request and return the upstream's answer to it; its notifications go to `note`
    meanwhile. Raises UpstreamAuthChallenge (HTTP 401/403), NotModern (HTTP: a legacy server's answer),
    UpstreamError (unreachable, or the child died) and TimeoutError."""

    async def __call__(self, msg: jsonrpc.Request, note: Notify | None = None) -> jsonrpc.Response: ...


class ModernSenders:
    def __init__(
        self,
        upstreams: Mapping[str, UpstreamConfig],
        clients: Mapping[str, aiohttp.ClientSession],
        children: ModernChildren | None = None,
        lean: LeanClient | None = None,
    ) -> None:
        """`lean`: the process's pooled client, which every HTTP request is sent on (its TLS context is the
        upstream's aiohttp client's: tls.py); None: each upstream's aiohttp client in `clients`."""
        self._upstreams = upstreams
        self._clients = clients
        self._lean = lean
        self.children = children if children is not None else ModernChildren(upstreams)
        # The sender of a request with no header of its own (the common case: nothing forwarded, no
        # Mcp-Param-*), and the target every HTTP sender posts to (its headers and URL in aiohttp's forms:
        # modern.py), per upstream and timeout: made once, not per request. Both mappings are fixed and
        # every timeout is a configured one; the cap only guards against a caller that computes them.
        self._bare: dict[tuple[str, float | None], ModernSender] = {}
        self._targets: dict[tuple[str, float | None], ModernTarget] = {}

    def sender(
        self,
        name: str,
        *,
        timeout: float | None,
        headers: Mapping[str, str] | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> ModernSender:
        """A sender to upstream `name`. `headers` (forwarded credentials) and `extra_headers` (the client's
        `Mcp-Param-*`) go with an HTTP request; a stdio one has no header layer (its `_meta` says it all)."""
        if not headers and not extra_headers:
            bare = self._bare.get((name, timeout))
            if bare is None:
                bare = self._make(name, timeout, None, None)
                if len(self._bare) < _MAX_BARE:
                    self._bare[(name, timeout)] = bare
            return bare
        return self._make(name, timeout, headers, extra_headers)

    def _make(
        self,
        name: str,
        timeout: float | None,
        headers: Mapping[str, str] | None,
        extra_headers: Mapping[str, str] | None,
    ) -> ModernSender:
        up = self._upstreams[name]
        if up.command is not None:
            children = self.children

            async def over_stdio(msg: jsonrpc.Request, note: Notify | None = None) -> jsonrpc.Response:
                return await children.request(name, msg, note, timeout)

            return over_stdio
        target = self._targets.get((name, timeout))
        if target is None:
            assert up.url is not None
            target = ModernTarget(
                up.url,
                up.headers,
                timeout=timeout,
                max_message_bytes=up.max_message_bytes,
                tls=context_of(self._clients[name]),
                connect_timeout=up.timeouts.connect_s,
            )
            if len(self._targets) < _MAX_BARE:
                self._targets[(name, timeout)] = target
        http = self._lean if self._lean is not None else self._clients[name]
        # The forwarded headers over the upstream's static ones, the client's Mcp-Param-* over both (post).
        extra = {**headers, **extra_headers} if headers and extra_headers else (headers or extra_headers)

        async def over_http(msg: jsonrpc.Request, note: Notify | None = None) -> jsonrpc.Response:
            return await post(http, target, msg, on_note=note, extra_headers=extra)

        return over_http

    async def close(self) -> None:
        await self.children.close()


__all__ = ["ModernSender", "ModernSenders"]
