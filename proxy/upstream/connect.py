"""Opening a legacy session to a configured upstream, whatever its transport: the one place that builds a
transport's settings from the configuration. Used by the session pools and by the legacy-client bridge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from proxy.config import UpstreamConfig
from proxy.upstream.base import HttpRefused, ServerInfo, UpstreamError, UpstreamSession
from proxy.upstream.http_settings import SessionSettings
from proxy.upstream.http_sse import HttpSseSession, serves_http_sse
from proxy.upstream.lean_http import LeanClient
from proxy.upstream.router import NoCallAnswer
from proxy.upstream.stdio import StdioSession, StdioSettings
from proxy.upstream.streamable_http import StreamableHttpSession


def stdio_settings(
    upstream: UpstreamConfig,
    versions: tuple[str, ...],
    capabilities: Mapping[str, Any],
    *,
    initialize_timeout: float | None = None,
) -> StdioSettings:
    """The child process of a stdio upstream (`command` is set), as the configuration describes it."""
    assert upstream.command is not None
    timeouts = upstream.timeouts
    return StdioSettings(
        upstream=upstream.name,
        command=upstream.command,
        args=upstream.args,
        env=upstream.env,
        cwd=upstream.cwd,
        versions=versions,
        capabilities=capabilities,
        initialize_timeout=timeouts.initialize_s if initialize_timeout is None else initialize_timeout,
        connect_timeout=timeouts.connect_s,
        max_line_bytes=upstream.max_message_bytes,
    )


async def open_upstream_session(
    http: aiohttp.ClientSession,
    upstream: UpstreamConfig,
    *,
    versions: tuple[str, ...],
    capabilities: Mapping[str, Any],
    headers: Mapping[str, str],
    no_call: NoCallAnswer,
    lean: LeanClient | None = None,
) -> UpstreamSession:
    """A new, initialized session to `upstream` offering `versions` (newest first) and declaring
    `capabilities`; closed again if opening fails. `headers` (forwarded client headers) go on the HTTP
    transports, after the upstream's static ones; a child process cannot take them. A Streamable HTTP
    session POSTs on `lean` (the process's pooled client; None: one of its own). Raises UpstreamError."""
    session: StreamableHttpSession | HttpSseSession | StdioSession
    if upstream.transport == "stdio" and upstream.command is not None:
        session = StdioSession(stdio_settings(upstream, versions, capabilities), no_call)
    elif upstream.transport in ("streamable-http", "sse") and upstream.url is not None:
        settings = _http_settings(upstream, upstream.url, versions, capabilities, headers)
        if upstream.transport == "sse":
            session = HttpSseSession(http, settings, no_call)
        else:
            session = StreamableHttpSession(http, settings, no_call, lean)
    else:  # unreachable after config validation (a url for the HTTP transports, a command for stdio)
        raise UpstreamError(f"upstream {upstream.name!r}: transport {upstream.transport!r} is misconfigured")
    try:
        await session.open()
    except UpstreamError as exc:
        await session.close()
        if isinstance(exc, HttpRefused) and exc.not_an_endpoint and upstream.transport == "streamable-http":
            raise await _sse_hint(http, upstream, upstream.url or "", exc) from None
        raise _tls_hint(upstream, exc) from None
    except BaseException:
        await session.close()
        raise
    return session


SNIFF_S = 5.0  # an HTTP+SSE server sends its endpoint event at once
SSE_HINT = "this looks like an HTTP+SSE (2024-11-05) server: set transport: sse"


async def _sse_hint(
    http: aiohttp.ClientSession, upstream: UpstreamConfig, url: str, exc: HttpRefused
) -> UpstreamError:
    """A Streamable HTTP `initialize` refused at the HTTP level (FastMCP's /sse answers POST with 405,
    Express with an HTML 404): when a GET of the same URL opens an HTTP+SSE stream, say so — the
    configuration, not the server, is wrong."""
    timeout = min(upstream.timeouts.connect_s, upstream.timeouts.initialize_s, SNIFF_S)
    if await serves_http_sse(http, url, upstream.headers, timeout, upstream.max_message_bytes):
        return UpstreamError(f"{exc}; {SSE_HINT} for upstream {upstream.name!r}")
    return exc


_HANGUPS = ("ServerDisconnected", "Connection reset by peer")


def _tls_hint(upstream: UpstreamConfig, exc: UpstreamError) -> UpstreamError:
    """An https upstream that hangs up during the handshake without a reason most often wants a client
    certificate (TLS 1.3 sends that alert after the handshake, which the client sees as a disconnect, or as
    a reset when its request was written after the server closed)."""
    text = str(exc)
    hangup = any(sign in text for sign in _HANGUPS) or "certificate required" in text.lower()
    if (upstream.url or "").startswith("https://") and hangup and type(exc) is UpstreamError:
        has = (
            f"presents {upstream.tls.cert_file}"
            if upstream.tls.cert_file
            else "presents no client certificate"
        )
        return UpstreamError(
            f"{text} (TLS: the upstream closed the connection; the proxy {has} — does it require "
            "another one? see upstreams[].tls.cert_file)"
        )
    return exc


async def adopt_upstream_session(
    http: aiohttp.ClientSession,
    upstream: UpstreamConfig,
    *,
    session_id: str,
    info: ServerInfo,
    capabilities: Mapping[str, Any],
    headers: Mapping[str, str],
    no_call: NoCallAnswer,
    lean: LeanClient | None = None,
) -> UpstreamSession:
    """Attach to legacy session `session_id`, which another replica opened (takeover). Only Streamable HTTP
    sessions outlive the connection that opened them; raises UpstreamError for the other transports."""
    if upstream.transport != "streamable-http" or upstream.url is None:
        raise UpstreamError(
            f"upstream {upstream.name!r}: a {upstream.transport} session cannot be taken over"
        )
    settings = _http_settings(upstream, upstream.url, upstream.protocol_versions, capabilities, headers)
    return await StreamableHttpSession.adopt(http, settings, no_call, session_id, info, lean=lean)


def _http_settings(
    upstream: UpstreamConfig,
    url: str,
    versions: tuple[str, ...],
    capabilities: Mapping[str, Any],
    headers: Mapping[str, str],
) -> SessionSettings:
    return SessionSettings(
        url=url,
        versions=versions,
        capabilities=capabilities,
        headers={**upstream.headers, **headers},
        initialize_timeout=upstream.timeouts.initialize_s,
        connect_timeout=upstream.timeouts.connect_s,
        max_message_bytes=upstream.max_message_bytes,
    )
