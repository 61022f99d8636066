"""An aggregated route's merged lists, its `server/discover`, and the index that routes its bare names.

Each upstream's page is asked for at once (each on a session of the client's own key, bounded by the
route's `list_timeout_s`); the page the client gets is their entries concatenated in route order up to the
first upstream with more (proxy/routes/merge.py), with the proxy's sealed cursor. An upstream that fails or
is too slow is left out: logged (`route.upstream_left_out`), counted in
`mrtr_proxy_route_left_out_total`, and shown on /readyz until it answers again. A page an upstream gave is
given again within the route's `list_cache_ms` (aggregate/list_cache.py).
"""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import structlog

from proxy.calls.wording import no_route_member
from proxy.front.modern.aggregate.list_cache import Freshness, ListCache
from proxy.front.modern.plain import complete
from proxy.front.modern.relay.native import NativeRelay
from proxy.handle import HandleError, KeyRing
from proxy.observe.line import Outcome, RequestLine
from proxy.routes.cursor import ListPosition, open_cursor, seal_cursor
from proxy.routes.health import RouteHealth
from proxy.routes.index import Clash, IndexBook, NameIndex, view_of
from proxy.routes.merge import Answered, Page, assemble, list_kind, pending
from proxy.routes.names import RENAMED, Entry, entries
from proxy.routes.page_cache import merged_hints
from proxy.routes.policy import per_token
from proxy.routes.table import Member, Route
from proxy.tasks.front import TaskFront
from proxy.translate.request import ModernRequest
from proxy.upstream.base import ServerInfo, UpstreamAuthChallenge, UpstreamError
from proxy.upstream.pool import PoolExhausted, PoolKey, SessionPool
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger("proxy.routes")

KeyFor = Callable[[str], PoolKey]  # the client's pool key at one upstream (its forwarded headers differ)
MAX_PAGES = 100  # pages of one upstream read to index its names
REFRESH_EVERY = 1.0  # seconds: an unknown name refreshes the index at most this often
PROXY_META = {  # a 2026-07-28 request of the proxy's own (indexing a modern upstream's names)
    mcp.META_PROTOCOL_VERSION: mcp.MODERN_VERSION,
    mcp.META_CLIENT_INFO: {"name": "mrtr-proxy", "version": "1"},
    mcp.META_CLIENT_CAPABILITIES: {},
}
UNAUTHORIZED = "unauthorized"  # the upstream refused this client's credentials: left out of its answer only
INDEX_TTL = 30.0  # seconds: how long a list trusts the index of who listed a key first


class LeftOutObserver(Protocol):
    """Counts what lists left out (the metrics)."""

    def left_out(self, route: str, upstream: str, why: str) -> None: ...


class _NoObserver:
    def left_out(self, route: str, upstream: str, why: str) -> None:
        pass


class RouteLists:
    def __init__(
        self,
        pools: Mapping[str, SessionPool],
        ring: Callable[[], KeyRing],
        health: RouteHealth,
        tasks: TaskFront | None,
        *,
        observer: LeftOutObserver | None = None,
        judges: Callable[[str], bool] = lambda _: False,  # OAuthFront.upstream_judges
        relay: NativeRelay | None = None,  # to the modern (2026-07-28) upstreams of a route
        cache: ListCache | None = None,  # upstreams' list pages (aggregate/list_cache.py)
    ) -> None:
        self.cache = cache if cache is not None else ListCache()
        self._pools = pools
        self._judges = judges
        self._relay = relay
        self._ring = ring
        self._health = health
        self._tasks = tasks
        self._observer = observer or _NoObserver()
        self._indexes = IndexBook()  # per route, list and view (routes/index.py)
        self.cache.changed = self._indexes.forget  # a list_changed heard: built again when next needed
        self._locks: weakref.WeakValueDictionary[tuple[str, str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()  # a refresh's lock lives as long as someone holds or awaits it
        )

    async def merged(
        self,
        route: Route,
        req: ModernRequest,
        *,
        principal: str,
        key_for: KeyFor,
        line: RequestLine,
        keep: Callable[[Entry], bool],
    ) -> jsonrpc.Response:
        msg = req.request
        cursor = msg.params.get("cursor")
        bound = {"route": route.name, "method": msg.method, "principal": principal}
        try:
            start = ListPosition(0) if cursor is None else open_cursor(self._ring(), cursor, **bound)
        except HandleError as exc:
            line.set_outcome(Outcome.FAILED, jsonrpc.INVALID_PARAMS, reason=f"cursor_{exc.reason}")
            return jsonrpc.error(msg.id, jsonrpc.INVALID_PARAMS, "Invalid cursor")
        if start.member >= len(route.members):
            line.set_outcome(Outcome.FAILED, jsonrpc.INVALID_PARAMS, reason="cursor_out_of_range")
            return jsonrpc.error(msg.id, jsonrpc.INVALID_PARAMS, "Invalid cursor")
        params = {k: v for k, v in req.upstream_params.items() if k != "cursor"}
        meta = msg.params.get("_meta")  # the client's own, for a modern upstream
        todo = pending(route, start)
        fetched, owners = await asyncio.gather(
            asyncio.gather(
                *(
                    self._cached(route, m, msg.method, c, params=params, key_for=key_for, meta=meta)
                    for m, c in todo
                )
            ),
            self._owners(route, msg.method, key_for),  # at the same time: the list waits for the slower
        )
        answered = [one for one, _ in fetched]

        def kept(entry: Entry) -> bool:  # a key another upstream listed first (maybe on an earlier page)
            owner = owners.owner(entry.kind, entry.key) if owners is not None else None
            return keep(entry) and (owner is None or owner.member.index == entry.member.index)

        page = assemble(route, msg.method, answered, kept)
        self._report(route, page, answered)
        sealed = None if page.next is None else seal_cursor(self._ring(), position=page.next, **bound)
        line.set_outcome(Outcome.COMPLETE)
        if page.left_out:
            line.left_out = [up for up, _ in page.left_out]
        last = page.next.member if page.next is not None else len(route.members)
        used = [fresh for (one, fresh) in fetched if one.member.index <= last]  # the page's upstreams
        hints = merged_hints(
            (fresh for fresh in used if fresh is not None),
            complete=not page.left_out and None not in used,
            per_client=page.next is not None or per_token(route),
        )
        result = {**page.result(list_kind(msg.method), sealed), **hints}
        return jsonrpc.Result(msg.id, complete(msg.method, result))

    async def discover(
        self, route: Route, msg: jsonrpc.Request, key_for: KeyFor, line: RequestLine
    ) -> jsonrpc.Response:
        """The aggregate as one server: capabilities the union, instructions under each upstream's name."""
        meta = msg.params.get("_meta")
        infos = await asyncio.gather(*(self._info(route, m, key_for, meta) for m in route.members))
        reached = [(m, info) for m, info in zip(route.members, infos, strict=True) if info is not None]
        if not reached:
            line.set_outcome(Outcome.FAILED, jsonrpc.UPSTREAM_FAILED)
            return jsonrpc.Error(msg.id, no_route_member(route.name))
        capabilities: dict[str, Any] = {}
        for _, info in reached:
            for name, value in info.capabilities.items():
                mine = capabilities.get(name)
                if isinstance(mine, dict) and isinstance(value, dict):
                    capabilities[name] = {**mine, **value}
                elif mine is None:
                    capabilities[name] = value
        texts = [f"## {m.upstream}\n{info.instructions}" for m, info in reached if info.instructions]
        tasks = self._tasks
        result: dict[str, Any] = {
            "supportedVersions": list(mcp.MODERN_VERSIONS),
            "capabilities": tasks.capabilities(capabilities) if tasks else capabilities,
            "_meta": {mcp.META_SERVER_INFO: {"name": f"mrtr-proxy route {route.name}", "version": "1"}},
        }
        if texts:
            result["instructions"] = "\n\n".join(texts)
        line.set_outcome(Outcome.COMPLETE)
        return jsonrpc.Result(msg.id, complete(msg.method, result))

    async def owner(self, route: Route, method: str, key: str, key_for: KeyFor) -> Entry | None:
        """Which upstream listed `key` in `method`'s list (resources/list: a URI, also matched against the
        templates), as the client sees the route's upstreams (its view's index). An unknown key refreshes
        that index first (at most every REFRESH_EVERY seconds), and so does an index older than INDEX_TTL
        (an upstream that never says its list changed may have dropped the key since)."""
        view = _view(route, key_for)
        held = self._indexes.get(route.name, method, view)
        if held is not None and time.monotonic() - held[1] < INDEX_TTL:
            found = _looked(held[0], method, key)
            if found is not None:
                return found
        return _looked(await self._index(route, method, key_for, REFRESH_EVERY), method, key)

    async def _index(self, route: Route, method: str, key_for: KeyFor, max_age: float) -> NameIndex:
        """The index of `method` on `route` for the client's view, refreshed first when older than `max_age`
        seconds; the requests of one view that find it stale together share one refresh."""
        view = _view(route, key_for)
        lock = self._locks.get((route.name, method, view))
        if lock is None:
            self._locks[(route.name, method, view)] = lock = asyncio.Lock()
        async with lock:
            held = self._indexes.get(route.name, method, view)
            if held is not None and time.monotonic() - held[1] < max_age:
                return held[0]
            return await self.refresh(route, method, key_for)

    async def refresh(self, route: Route, method: str, key_for: KeyFor) -> NameIndex:
        """Read every page of `method` from every upstream of `route`, as the client of `key_for` sees them,
        and index it for that view (clashes reported); resources/list's index has the templates too."""
        methods = (method, "resources/templates/list") if method == "resources/list" else (method,)
        index = NameIndex()
        for one in methods:
            pages = await asyncio.gather(*(self._all_pages(route, m, one, key_for) for m in route.members))
            for answered in pages:  # route order: the first upstream keeps a clashing key
                for page in answered:
                    if page.result is None:
                        self._left_out(route, page.member.upstream, page.failed or "unavailable")
                        break
                    self._health.listed(route.name, page.member.upstream)
                    index.add(entries(route, page.member, one, page.result))
        self._clashes(route, index.clashes)
        self._indexes.put(route.name, method, _view(route, key_for), index, time.monotonic())
        return index

    async def _owners(self, route: Route, method: str, key_for: KeyFor) -> NameIndex | None:
        """For a list whose keys two upstreams may share (bare names, URIs): the route's index, so the first
        upstream in route order keeps a key across pages too (refreshed when older than INDEX_TTL)."""
        if len(route.members) < 2 or (route.prefixed and list_kind(method) in RENAMED):
            return None
        return await self._index(route, method, key_for, INDEX_TTL)

    async def _cached(
        self,
        route: Route,
        member: Member,
        method: str,
        cursor: str | None,
        *,
        params: Mapping[str, Any],
        key_for: KeyFor,
        meta: object,
    ) -> tuple[Answered, Freshness | None]:
        """One upstream's page for a merged list, from the cache while fresh (aggregate/list_cache.py)."""
        key = key_for(member.upstream)
        return await self.cache.page(
            route,
            member,
            method,
            cursor,
            params=params,
            key=key,
            fetch=functools.partial(
                self._page, route, member, method, params, cursor, key_for=key_for, meta=meta
            ),
            modern=functools.partial(self._modern, member.upstream, key),
        )

    async def _all_pages(self, route: Route, member: Member, method: str, key_for: KeyFor) -> list[Answered]:
        """Every page of one upstream's list, up to MAX_PAGES; the last is a failure when one failed."""
        out: list[Answered] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            one = await self._page(route, member, method, {}, cursor, key_for=key_for)
            out.append(one)
            more = one.result.get("nextCursor") if one.result is not None else None
            if not isinstance(more, str) or not more:
                break
            cursor = more
        return out

    async def _page(
        self,
        route: Route,
        member: Member,
        method: str,
        params: Mapping[str, Any],
        cursor: str | None,
        *,
        key_for: KeyFor,
        meta: object = None,
    ) -> Answered:
        wanted = {**params, "cursor": cursor} if cursor is not None else dict(params)
        key = key_for(member.upstream)
        try:
            async with asyncio.timeout(route.list_timeout):
                reply = await self._ask(
                    member.upstream, key, method, wanted, meta=meta, timeout=route.list_timeout
                )
        except TimeoutError:
            return Answered(member, None, "timeout")
        except PoolExhausted:
            return Answered(member, None, "pool_full")
        except UpstreamAuthChallenge:  # this client's credentials, not the upstream's health
            return Answered(member, None, UNAUTHORIZED)
        except UpstreamError as exc:
            log.info("route.upstream_failed", route=route.name, upstream=member.upstream, error=str(exc))
            return Answered(member, None, "unavailable")
        if isinstance(reply, jsonrpc.Error):
            if reply.error.code == jsonrpc.METHOD_NOT_FOUND:  # it has no such list: nothing to leave out
                return Answered(member, {})
            return Answered(member, None, f"error:{reply.error.code}")
        return Answered(member, reply.result)

    async def _modern(self, upstream: str, key: PoolKey) -> bool:
        return self._relay is not None and await self._relay.modern(upstream, key.forwarded)

    async def _ask(
        self,
        upstream: str,
        key: PoolKey,
        method: str,
        params: Mapping[str, Any],
        *,
        meta: object,
        timeout: float,
    ) -> jsonrpc.Response:
        """`method` of one upstream: on a legacy session of the client's key, or to a modern upstream as a
        2026-07-28 request carrying the client's `_meta` (the proxy's own when it has none)."""
        if self._relay is None or not await self._modern(upstream, key):
            return await self._pools[upstream].request(key, method, params, timeout)
        body = {**params, "_meta": meta if isinstance(meta, dict) else PROXY_META}
        return await self._relay.plain(upstream, jsonrpc.Request(0, method, body), key.forwarded, timeout)

    async def _info(
        self, route: Route, member: Member, key_for: KeyFor, meta: object = None
    ) -> ServerInfo | None:
        pool, key = self._pools[member.upstream], key_for(member.upstream)
        try:
            async with asyncio.timeout(route.list_timeout):
                if await self._modern(member.upstream, key):
                    reply = await self._ask(
                        member.upstream, key, "server/discover", {}, meta=meta, timeout=route.list_timeout
                    )
                    info = _discovered(reply)
                else:
                    if self._judges(
                        member.upstream
                    ):  # as on its own route: its cache answers none it refuses
                        pool.release(key, await pool.acquire(key), reusable=True)
                    info = await pool.server_info(key)
        except (TimeoutError, UpstreamError, PoolExhausted, ValueError) as exc:
            why = "timeout" if isinstance(exc, TimeoutError) else "unavailable"
            self._left_out(
                route, member.upstream, UNAUTHORIZED if isinstance(exc, UpstreamAuthChallenge) else why
            )
            return None
        self._health.listed(route.name, member.upstream)
        return info

    def _report(self, route: Route, page: Page, answered: Sequence[Answered]) -> None:
        for one in answered:
            if one.result is not None:
                self._health.listed(route.name, one.member.upstream)
        for upstream, why in page.left_out:
            self._left_out(route, upstream, why)
        self._clashes(route, page.index.clashes)

    def _left_out(self, route: Route, upstream: str, why: str) -> None:
        if why == UNAUTHORIZED:  # one client's credentials refused: not the upstream's health
            log.info("route.upstream_left_out", route=route.name, upstream=upstream, reason=why)
            return
        log.warning("route.upstream_left_out", route=route.name, upstream=upstream, reason=why)
        self._observer.left_out(route.name, upstream, why)
        self._health.left_out(route.name, upstream, why, time.monotonic())

    def _clashes(self, route: Route, clashes: Sequence[Clash]) -> None:
        for clash in self._health.clashed(route.name, clashes):
            log.warning(
                "route.name_clash",
                route=route.name,
                kind=clash.kind,
                name=clash.key,
                kept=clash.kept,
                dropped=clash.dropped,
                hint="prefix_mode never: the first upstream in route order keeps the name",
            )


def _view(route: Route, key_for: KeyFor) -> str:
    """The client's view of `route`: what its requests carry to each upstream (routes/index.py)."""
    return view_of(key_for(m.upstream).forwarded for m in route.members)


def _looked(index: NameIndex, method: str, key: str) -> Entry | None:
    return index.resource_owner(key) if method == "resources/list" else index.owner(list_kind(method), key)


def _discovered(reply: jsonrpc.Response) -> ServerInfo:
    """A modern upstream's `server/discover` result as what the route's discover reads (ValueError: none)."""
    if not isinstance(reply, jsonrpc.Result):
        raise ValueError(f"server/discover answered {reply.error.code}")
    caps, text = reply.result.get("capabilities"), reply.result.get("instructions")
    caps = {k: v for k, v in caps.items() if k != "extensions"} if isinstance(caps, dict) else {}
    return ServerInfo(mcp.MODERN_VERSION, caps, {}, text if isinstance(text, str) else None)
