"""One probe, start to end: which transport answers, then the same MCP-level steps over it. Every step has
its own timeout and the whole probe one more (`Options.total_s`), so it always ends well under a minute."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from proxy.probe import oauth, steps
from proxy.probe.channel import ProbeError, Recorder
from proxy.probe.discover import probe_modern
from proxy.probe.findings import Check, Findings, ModernSide, Resumability, Session, Transport
from proxy.probe.http import Unauthorized
from proxy.probe.sse import SseConversation
from proxy.probe.stdio import StdioConversation, stdio_era
from proxy.probe.streamable import StreamableConversation
from proxy.wire import mcp


@dataclass(frozen=True, slots=True)
class Options:
    url: str | None = None
    command: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    # stdio: variables over the minimal environment the proxy gives its children
    env: Mapping[str, str] = field(default_factory=dict)
    call: str | None = None
    call_arguments: Mapping[str, Any] = field(default_factory=dict)
    step_s: float = 10.0  # one request, one connection
    call_s: float = 20.0  # --call
    window_s: float = 1.0  # how long to watch for server requests outside calls
    total_s: float = 50.0

    @property
    def target(self) -> str:
        return self.url if self.url is not None else " ".join(self.command)


async def probe(options: Options) -> Findings:
    base = Findings(target=options.target, transport=None, url=options.url, command=options.command)
    try:
        async with asyncio.timeout(options.total_s):
            if options.url is not None:
                return await _probe_url(options, base)
            return await _probe_stdio(options, base)
    except TimeoutError:
        return replace(base, error=f"the probe did not finish within {options.total_s:g}s")
    except (ProbeError, aiohttp.ClientError, OSError) as exc:  # a step that has no better answer of its own
        return replace(base, error=f"the probe failed: {exc}")


def _legacy_call(options: Options, modern: ModernSide) -> Options:
    """The legacy steps' options after the 2026-07-28 steps: `--call` again only when the 2026-07-28 call
    failed (a two-era server's tool that asks inline is refused there, having asked nothing: its legacy
    call shows what it asks). A call that answered `input_required` or a result is not made twice."""
    call = modern.call
    if call is not None and call.outcome in ("tool_error", "error"):
        return options
    return replace(options, call=None)


# -- HTTP ---------------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _http(options: Options) -> AsyncIterator[aiohttp.ClientSession]:
    timeout = aiohttp.ClientTimeout(total=None, connect=options.step_s, sock_connect=options.step_s)
    # No cookie jar, as the proxy has none: what the probe finds works must work through the proxy.
    jar = aiohttp.DummyCookieJar()
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=True, cookie_jar=jar) as http:
        yield http


async def _probe_url(options: Options, base: Findings) -> Findings:
    """`server/discover` first (the era, as the proxy would judge it), then the legacy steps: a two-era
    server is probed as both. `--call` is made at 2026-07-28 if the server is modern, and again on the
    legacy session only when that call failed (`_legacy_call`)."""
    assert options.url is not None
    url = options.url
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        return replace(base, error=f"not an http(s) URL: {url}")
    async with _http(options) as http:
        modern = await probe_modern(
            http,
            url,
            options.headers,
            step_s=options.step_s,
            call=options.call,
            call_arguments=options.call_arguments,
            call_s=options.call_s,
        )
        if modern is None or modern.era == "legacy":
            return replace(await _probe_legacy_url(options, base, http), modern=modern)
        found = await _probe_legacy_url(_legacy_call(options, modern), base, http)
    if found.negotiated is None and found.authorization is None:  # modern only: no legacy side
        detail = f"answers 2026-07-28 requests only (supportedVersions: {', '.join(modern.versions)})"
        return replace(
            base,
            transport="streamable-http",
            transports={
                "streamable_http": Check("yes", detail),
                "legacy_initialize": Check("no", found.error or ""),
            },
            server_info=modern.server_info,
            capabilities=modern.capabilities,
            modern=modern,
        )
    return replace(found, modern=modern)


async def _probe_legacy_url(options: Options, base: Findings, http: aiohttp.ClientSession) -> Findings:
    url = options.url
    assert url is not None
    streamable = StreamableConversation(http, url, options.headers, Recorder())
    try:
        try:
            result = await steps.initialize(streamable, mcp.LEGACY_VERSIONS[0], options.step_s)
        except Unauthorized as exc:
            transport: Transport = "sse" if url.rstrip("/").endswith("/sse") else "streamable-http"
            return replace(
                base,
                transport=transport,
                authorization=await oauth.describe(http, url, exc, options.step_s),
            )
        except aiohttp.ClientConnectorError as exc:
            why = (
                "connection refused"
                if isinstance(exc.os_error, ConnectionRefusedError)
                else str(exc.os_error)
            )
            return replace(base, error=f"cannot connect to {url}: {why}")
        except (ProbeError, aiohttp.ClientError) as exc:
            post = Check("no", str(exc))
        else:
            post = Check("yes", ", ".join(sorted(streamable.content_types)))
            return await _streamable(
                options,
                base=replace(
                    base, authorization=await oauth.required(http, url, options.headers, options.step_s)
                ),
                http=http,
                conv=streamable,
                result=result,
                post=post,
            )
    finally:
        await streamable.close()
    return await _try_sse(options, base, http, post)


async def _streamable(
    options: Options,
    *,
    base: Findings,
    http: aiohttp.ClientSession,
    conv: StreamableConversation,
    result: Mapping[str, Any],
    post: Check,
) -> Findings:
    conv.version = str(result["protocolVersion"])
    capabilities = _mapping(result.get("capabilities"))
    get_stream = await conv.open_get_stream(options.step_s)
    items, notes = await steps.list_items(conv, capabilities, options.step_s)
    await asyncio.sleep(max(0.0, options.window_s))  # server-everything asks roots/list ~350 ms in
    outside = tuple(conv.recorder.outside)
    resumability = await conv.resumability(min(options.step_s, 5.0))
    call = None
    if options.call is not None:
        call = await steps.call_tool(conv, options.call, options.call_arguments, options.call_s)
    versions = await _versions(
        lambda: StreamableConversation(http, conv.url, options.headers, Recorder()), options.step_s
    )
    delete = await conv.delete(options.step_s)
    return replace(
        base,
        transport="streamable-http",
        transports={"streamable_http": post, "get_stream": get_stream, "http_sse": Check("not tried")},
        versions=versions,
        negotiated=conv.version,
        server_info=_mapping(result.get("serverInfo")),
        capabilities=capabilities,
        items=items,
        resumability=resumability,
        session=Session(
            session_id_issued=conv.session_id is not None,
            get_stream=get_stream,
            requests_outside_calls=outside,
            requests_on_get_stream=tuple(conv.recorder.on_get_stream),
            delete=delete,
        ),
        call=call,
        notes=notes,
    )


async def _try_sse(options: Options, base: Findings, http: aiohttp.ClientSession, post: Check) -> Findings:
    assert options.url is not None
    conv = SseConversation(http, options.url, options.headers, Recorder())
    try:
        try:
            await conv.open(options.step_s)
            result = await steps.initialize(conv, mcp.LEGACY_VERSIONS[0], options.step_s)
        except Unauthorized as exc:
            return replace(
                base,
                transport="sse",
                authorization=await oauth.describe(http, options.url, exc, options.step_s),
            )
        except (ProbeError, aiohttp.ClientError) as exc:
            return replace(
                base,
                transports={"streamable_http": post, "http_sse": Check("no", str(exc))},
                error=f"no MCP server at {options.url}: {post.detail}; {exc}",
            )

        def fresh() -> _Opened:
            return _Opened(
                SseConversation(http, options.url or "", options.headers, Recorder()), options.step_s
            )

        found = await _over_channel(
            options, base=base, conv=conv, result=result, transport="sse", fresh=fresh
        )
        return replace(
            found,
            transports={"streamable_http": post, "http_sse": Check("yes", f"endpoint {conv.endpoint}")},
        )
    finally:
        await conv.close()


# -- stdio ---------------------------------------------------------------------------------------------------


async def _probe_stdio(options: Options, base: Findings) -> Findings:
    """`server/discover` first on a child of its own, then the legacy steps on others, as over HTTP."""
    if not options.command:
        return replace(base, error="no command given")
    modern = await stdio_era(
        options.command,
        options.env,
        step_s=options.step_s,
        call=options.call,
        call_arguments=options.call_arguments,
        call_s=options.call_s,
    )
    if modern is None or modern.era == "legacy":
        return replace(await _probe_legacy_stdio(options, base), modern=modern)
    found = await _probe_legacy_stdio(_legacy_call(options, modern), base)
    if found.negotiated is None:  # modern only: no legacy side
        return replace(
            base,
            transport="stdio",
            transports={
                "stdio": Check("yes", f"answers 2026-07-28 requests only ({', '.join(modern.versions)})"),
                "legacy_initialize": Check("no", found.error or ""),
            },
            server_info=modern.server_info,
            capabilities=modern.capabilities,
            modern=modern,
            cwd=os.getcwd(),
            env=dict(options.env),
        )
    return replace(found, modern=modern)


async def _probe_legacy_stdio(options: Options, base: Findings) -> Findings:
    conv = StdioConversation(options.command, Recorder(), options.env)
    try:
        try:
            await conv.open()
            result = await steps.initialize(conv, mcp.LEGACY_VERSIONS[0], options.step_s)
        except ProbeError as exc:
            tail = conv.stderr_tail()
            detail = f"{exc}" + (f" (stderr: {tail})" if tail and tail not in str(exc) else "")
            return replace(
                base, transports={"stdio": Check("no", detail)}, error=f"no MCP server on stdio: {detail}"
            )

        def fresh() -> _Opened:
            return _Opened(StdioConversation(options.command, Recorder(), options.env), options.step_s)

        found = await _over_channel(
            options, base=base, conv=conv, result=result, transport="stdio", fresh=fresh
        )
        return replace(
            found,
            transports={"stdio": Check("yes", "initialize answered on stdout")},
            cwd=os.getcwd(),
            env=dict(options.env),
        )
    finally:
        await conv.close()


# -- shared by the message-stream transports (HTTP+SSE, stdio) ----------------------------------------------


class _Opened:
    """A fresh conversation for one version check: opened on enter, closed on exit."""

    def __init__(self, conv: SseConversation | StdioConversation, timeout: float) -> None:
        self.conv = conv
        self._timeout = timeout

    async def __aenter__(self) -> SseConversation | StdioConversation:
        if isinstance(self.conv, SseConversation):
            await self.conv.open(self._timeout)
        else:
            await self.conv.open()
        return self.conv

    async def __aexit__(self, *exc: object) -> None:
        await self.conv.close()


async def _over_channel(
    options: Options,
    *,
    base: Findings,
    conv: SseConversation | StdioConversation,
    result: Mapping[str, Any],
    transport: Transport,
    fresh: Callable[[], _Opened],
) -> Findings:
    capabilities = _mapping(result.get("capabilities"))
    items, notes = await steps.list_items(conv, capabilities, options.step_s)
    await asyncio.sleep(max(0.0, options.window_s))
    outside = tuple(conv.recorder.outside)
    call = None
    if options.call is not None:
        call = await steps.call_tool(conv, options.call, options.call_arguments, options.call_s)

    async def one(version: str) -> bool | None:
        try:
            async with fresh() as other:
                return await steps.offered_alone(other, version, options.step_s)
        except (ProbeError, aiohttp.ClientError):
            return None

    results = await asyncio.gather(*(one(v) for v in mcp.LEGACY_VERSIONS))
    return replace(
        base,
        transport=transport,
        versions=dict(zip(mcp.LEGACY_VERSIONS, results, strict=True)),
        negotiated=str(result["protocolVersion"]),
        server_info=_mapping(result.get("serverInfo")),
        capabilities=capabilities,
        items=items,
        resumability=Resumability(
            "not applicable", f"a session over {transport} is one stream that cannot be resumed elsewhere"
        ),
        session=Session(requests_outside_calls=outside),
        call=call,
        notes=notes,
    )


async def _versions(make: Callable[[], StreamableConversation], timeout: float) -> dict[str, bool | None]:
    async def one(version: str) -> bool | None:
        conv = make()
        try:
            accepted = await steps.offered_alone(conv, version, timeout)
            if conv.session_id is not None:  # no MCP-Protocol-Version on it: the server may have refused ours
                await conv.delete(timeout)
            return accepted
        except (ProbeError, aiohttp.ClientError):
            return None
        finally:
            await conv.close()

    results = await asyncio.gather(*(one(v) for v in mcp.LEGACY_VERSIONS))
    return dict(zip(mcp.LEGACY_VERSIONS, results, strict=True))


def _mapping(value: object) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}
