"""Each upstream's protocol era (legacy: 2024-11-05 … 2025-11-25, or modern: 2026-07-28), found the way the
specification tells a client that speaks both to find it (basic_versioning.mdx and the Streamable HTTP page,
"Backward Compatibility"): send a modern request, `server/discover`, and stay modern on a `DiscoverResult`
or on an error only a modern server gives (`UnsupportedProtocolVersion`, `HeaderMismatch`,
`MissingRequiredClientCapability`); anything else (a legacy server's 400 "missing session", a 404, an empty
body, a non-JSON-RPC body) means legacy, and the legacy `initialize` follows.

A server that answers `server/discover` is asked one legacy `initialize` too (era_initialize.py): if it
answers that as well it is a two-era server, verdict `both` (FastMCP 4.2.3, tmcp 1.20.0): a 2026-07-28 client
gets the native relay, a legacy client speaks legacy to it as going direct does, and the path is chosen per
tool (front/tool_paths.py). A stdio upstream's verdict is `modern` or `legacy`, never `both`.

`upstreams[].era` fixes the verdict (`legacy`, `modern`) or leaves it to the probe (`auto`). An `sse` upstream
(HTTP+SSE, 2024-11-05) is legacy by definition. A `stdio` upstream is probed on its 2026-07-28 child
(modern_stdio.py; the stdio page's "Backward Compatibility"): `server/discover` first, before anything else;
a `DiscoverResult` or a recognised modern error means modern (the child stays, and serves the upstream's
2026-07-28 requests), any other error or no answer within `timeouts.connect_s` means legacy (the child is
stopped: legacy sessions run children of their own, each with its `initialize`). The verdict holds for the
life of that child: when it dies the upstream is probed again at the next request, on the fresh child.

The probe's verdict is cached for the life of the process. It is probed again when it stops holding: a
legacy session of the upstream was lost (the server restarted, perhaps as a two-era or modern server: the
pool reports it), a legacy session could not be opened, or a modern request was answered the legacy way
(`modern.NotModern`). A probe that reaches nothing, or whose answer is a 401/403 (the credentials of the
request that triggered it were refused), decides nothing: the request goes on under the previous verdict
(legacy if none), whose own path reports the failure, and the next request probes again.

The probe is the proxy's own request: it never carries the client's `Via` (only the proxy's own entry, for
the loop check), and a refusal of the request itself (an upstream proxy's 400/431 with no JSON-RPC body)
while it carried the client's forwarded headers is asked again without them, so one client's headers never
decide the verdict every user shares.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import aiohttp
import structlog

from proxy.config import UpstreamConfig
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.era_initialize import answers_initialize
from proxy.upstream.modern import MODERN_ERRORS, ModernTarget, NotModern, post
from proxy.upstream.modern_stdio import ModernChildren
from proxy.upstream.propagation import own_only, propagating
from proxy.upstream.tool_paths import ToolPaths
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger(__name__)

EraName = Literal["legacy", "modern", "both"]
How = Literal["configured", "transport", "probe"]
PROBE_CLIENT = {"name": "mrtr-proxy", "version": "era-probe"}


@dataclass(frozen=True, slots=True)
class Verdict:
    era: EraName
    how: How
    versions: tuple[str, ...] = ()  # a modern server's supportedVersions
    detail: str = ""  # what the probe saw (a legacy server's answer), for the log and `probe`
    at: float = 0.0  # time.time() of the verdict


def speaks_modern(era: str | None) -> bool:
    """Whether 2026-07-28 requests go to an upstream of this era (modern, or two-era)."""
    return era in {"modern", "both"}


def discover_request(rid: jsonrpc.RequestId = 1) -> jsonrpc.Request:
    """The probe: `server/discover` with the per-request `_meta` of a client that declares nothing."""
    meta = {
        mcp.META_PROTOCOL_VERSION: mcp.MODERN_VERSION,
        mcp.META_CLIENT_INFO: PROBE_CLIENT,
        mcp.META_CLIENT_CAPABILITIES: {},
    }
    return jsonrpc.Request(rid, "server/discover", {"_meta": meta})


def judge_discover(answer: jsonrpc.Response) -> Verdict:
    """The verdict of a `server/discover` answer that `modern.post` let through (a modern-looking one)."""
    if isinstance(answer, jsonrpc.Result):
        versions = answer.result.get("supportedVersions")
        if isinstance(versions, list) and all(isinstance(v, str) for v in versions):
            return Verdict("modern", "probe", tuple(versions), at=time.time())
        return Verdict("legacy", "probe", detail="server/discover answered without supportedVersions")
    if answer.error.code in MODERN_ERRORS:
        versions = _supported(answer.error.data)
        return Verdict("modern", "probe", versions, detail=answer.error.message[:200], at=time.time())
    return Verdict("legacy", "probe", detail=f"server/discover: error {answer.error.code}", at=time.time())


def _supported(data: object) -> tuple[str, ...]:
    supported = data.get("supported") if isinstance(data, dict) else None
    return tuple(v for v in supported if isinstance(v, str)) if isinstance(supported, list) else ()


def fixed_verdict(upstream: UpstreamConfig) -> Verdict | None:
    """The verdict the configuration decides alone (None: `auto` on Streamable HTTP, the probe decides)."""
    if upstream.transport == "sse":
        return Verdict("legacy", "transport", detail="HTTP+SSE (2024-11-05) is a legacy transport")
    if upstream.era != "auto":
        return Verdict(upstream.era, "configured")
    return None


class EraBook:
    """The era of every upstream: fixed by the configuration, or probed once and cached."""

    def __init__(
        self,
        upstreams: Mapping[str, UpstreamConfig],
        clients: Mapping[str, aiohttp.ClientSession],
        children: ModernChildren | None = None,  # stdio upstreams' 2026-07-28 children (None: all legacy)
    ) -> None:
        self._upstreams = upstreams
        self._clients = clients
        self._children = children
        self._verdicts: dict[str, Verdict] = {}
        for name, up in upstreams.items():
            if up.transport == "stdio" and children is None:
                self._verdicts[name] = Verdict("legacy", "transport", detail="no 2026-07-28 stdio client")
            elif (fixed := fixed_verdict(up)) is not None:
                self._verdicts[name] = fixed
        if children is not None:
            children.on_lost = self.suspect  # the verdict holds for the life of the child that was probed
        self._suspect: set[str] = set()  # probe again at the next request
        self._locks = {name: asyncio.Lock() for name in upstreams}
        self._stdio_probes: dict[str, asyncio.Task[EraName]] = {}
        self.probes = 0  # how many probes were sent (tests, and the log)
        # Told when a configured verdict failed to hold for a request (process/app.py: era_setting.py).
        self.on_setting_doubted: Callable[[str, str], None] | None = None
        self.paths = ToolPaths(upstreams)  # the path of each tool of a two-era upstream (tool_paths.py)

    def verdict(self, name: str) -> Verdict | None:
        return self._verdicts.get(name)

    def held(self, name: str) -> EraName | None:
        """The upstream's era if a verdict holds (no probe needed), else None: `era` without its await, for
        the path every request takes."""
        known = self._verdicts.get(name)
        return known.era if known is not None and name not in self._suspect else None

    def describe(self) -> dict[str, str]:
        """Each upstream's era as /readyz and /metrics show it: legacy, modern, both (two eras), or unknown
        (not probed)."""
        return {name: v.era if (v := self._verdicts.get(name)) else "unknown" for name in self._upstreams}

    async def era(self, name: str, headers: Mapping[str, str] | None = None) -> EraName:
        """The upstream's era, probing it (with `headers`: the request's forwarded credentials) if no
        verdict holds."""
        known = self._verdicts.get(name)
        if known is not None and name not in self._suspect:
            return known.era
        if self._upstreams[name].url is None:  # stdio: the probe outlives a caller that stops waiting
            task = self._stdio_probes.get(name)
            if task is None:
                task = self._stdio_probes[name] = asyncio.ensure_future(self._decide(name, {}))
                task.add_done_callback(lambda _: self._stdio_probes.pop(name, None))
            return await asyncio.shield(task)
        return await self._decide(name, headers or {})

    async def _decide(self, name: str, headers: Mapping[str, str]) -> EraName:
        async with self._locks[name]:  # one probe at a time per upstream; those waiting share its verdict
            known = self._verdicts.get(name)
            if known is not None and name not in self._suspect:
                return known.era
            verdict = await self._probe(name, headers)
            if verdict is None:
                return known.era if known is not None else "legacy"
            self._suspect.discard(name)
            self._verdicts[name] = verdict
            if known is None or known.era != verdict.era:
                log.info(
                    "upstream.era",
                    upstream=name,
                    era=verdict.era,
                    previous=known.era if known else None,
                    versions=list(verdict.versions),
                    detail=verdict.detail or None,
                )
            return verdict.era

    def suspect(self, name: str, reason: str) -> None:
        """The cached verdict failed to hold (see the module's docstring): probe again at the next request.
        A configured or transport-given era is never probed."""
        known = self._verdicts.get(name)
        if known is not None and known.how == "configured" and self.on_setting_doubted is not None:
            self.on_setting_doubted(name, reason)  # era_setting.py: is the `era` setting wrong?
        if known is None or known.how != "probe" or name in self._suspect:
            return
        self._suspect.add(name)
        log.info("upstream.era_suspect", upstream=name, era=known.era, reason=reason)

    async def _probe(self, name: str, headers: Mapping[str, str]) -> Verdict | None:
        up = self._upstreams[name]
        self.probes += 1
        if up.url is None:  # stdio (fixed_verdict covers sse)
            return await self._probe_stdio(name, up)
        try:
            return await self._discover(name, up, headers)
        except NotModern as exc:
            if not (exc.refused_request and headers):
                return Verdict("legacy", "probe", detail=str(exc), at=time.time())
        # Refused before any MCP answer while it carried the client's forwarded headers: perhaps their doing
        # (a token or header an upstream proxy will not pass on), which says nothing of the era every user
        # shares. Asked again with the upstream's own headers alone; that answer decides.
        log.info("upstream.era_probe_refused", upstream=name, forwarded=sorted(headers))
        try:
            return await self._discover(name, up, {})
        except NotModern as exc:
            return Verdict("legacy", "probe", detail=str(exc), at=time.time())

    async def _discover(self, name: str, up: UpstreamConfig, headers: Mapping[str, str]) -> Verdict | None:
        """One `server/discover`, the proxy's own request: the upstream's headers and `headers` (the
        request's forwarded credentials), and of what the front propagates only the proxy's own (never the
        client's `Via`: propagation.own_only). Raises NotModern."""
        assert up.url is not None
        target = ModernTarget(
            up.url,
            {**up.headers, **headers},
            timeout=up.timeouts.initialize_s,
            max_message_bytes=up.max_message_bytes,
        )
        try:
            with propagating(own_only()):
                answer = await post(self._clients[name], target, discover_request())
        except NotModern:
            raise
        except (UpstreamAuthChallenge, UpstreamError, TimeoutError) as exc:
            log.info("upstream.era_probe_failed", upstream=name, error=str(exc) or type(exc).__name__)
            return None
        verdict = judge_discover(answer)
        if verdict.era != "modern":
            return verdict
        both = await answers_initialize(self._clients[name], up.url, target.headers, up.timeouts.initialize_s)
        if not both.legacy:
            return dataclasses.replace(verdict, detail=verdict.detail or both.detail)
        return dataclasses.replace(verdict, era="both", detail=f"initialize answered too ({both.version})")

    async def _probe_stdio(self, name: str, up: UpstreamConfig) -> Verdict | None:
        """`server/discover` on the upstream's 2026-07-28 child, before anything else is sent to it. No
        answer within `timeouts.connect_s` means legacy too (the stdio page: "or does not respond within a
        reasonable timeout"); a child that cannot be started decides nothing."""
        assert self._children is not None
        timeout = up.timeouts.connect_s
        try:
            answer = await self._children.request(name, discover_request(), timeout=timeout, probe=True)
        except TimeoutError:
            verdict = Verdict("legacy", "probe", detail=f"no answer to server/discover in {timeout:g}s")
        except UpstreamError as exc:
            log.info("upstream.era_probe_failed", upstream=name, error=str(exc))
            self._children.settled(name)  # why it failed may be on its stderr: logged as usual
            await self._children.retire(name)
            return None
        else:
            verdict = judge_discover(answer)
        if verdict.era == "legacy":  # its stderr (a legacy server's complaint at the probe): one debug line
            await self._children.retire(name)  # legacy sessions start children of their own
        else:
            self._children.settled(name)
        return verdict


__all__ = [
    "EraBook",
    "EraName",
    "Verdict",
    "discover_request",
    "fixed_verdict",
    "judge_discover",
    "speaks_modern",
]
