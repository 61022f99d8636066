"""Requests a modern client sends that are no call: `server/discover`, answered from the upstream session's
`initialize` result, and the lists and completion requests (`mcp.FORWARDED_METHODS`), relayed on a session.

Their answers become 2026-07-28 results (`complete`): `resultType`, and caching hints where the method has
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.calls.service import CallService
from proxy.calls.wording import unavailable_answer
from proxy.front.modern.limits import pool_full
from proxy.front.oauth import OAuthFront
from proxy.migration.tally import MigrationBook
from proxy.observe.line import Outcome, RequestLine
from proxy.tasks.front import TaskFront
from proxy.translate.request import ModernRequest
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.pool import PoolExhausted, PoolKey, SessionPool
from proxy.wire import jsonrpc, mcp

PLAIN_TIMEOUT = 60.0


class PlainRequests:
    def __init__(
        self,
        *,
        pools: Mapping[str, SessionPool],
        calls: CallService,
        tasks: TaskFront | None,
        oauth: OAuthFront | None,
    ) -> None:
        self._pools = pools
        self.migration: MigrationBook | None = None  # told the tools an upstream lists (proxy/migration)
        self._calls = calls
        self._tasks = tasks
        self._oauth = oauth

    async def discover(
        self, upstream: str, msg: jsonrpc.Request, key: PoolKey, line: RequestLine
    ) -> jsonrpc.Response:
        pool = self._pools[upstream]
        try:
            if self._oauth is not None and self._oauth.upstream_judges(upstream):
                # The cached initialize result must not answer a client the upstream has not accepted:
                # a session of this client's own credentials (an idle one is reused) lets it judge them.
                pool.release(key, await pool.acquire(key), reusable=True)
            info = await pool.server_info(key)
        except UpstreamAuthChallenge:
            raise
        except PoolExhausted as exc:
            return pool_full(self._calls.registry, msg, exc, line)
        except (UpstreamError, TimeoutError) as exc:
            return unavailable_answer(msg.id, upstream, exc, line)
        tasks = self._tasks
        result: dict[str, Any] = {
            "supportedVersions": list(mcp.MODERN_VERSIONS),
            "capabilities": tasks.capabilities(info.capabilities) if tasks else dict(info.capabilities),
            "_meta": {mcp.META_SERVER_INFO: dict(info.server_info)},
        }
        if info.instructions is not None:
            result["instructions"] = info.instructions
        line.set_outcome(Outcome.COMPLETE)
        return jsonrpc.Result(msg.id, complete(msg.method, result))

    async def forward(
        self, upstream: str, req: ModernRequest, key: PoolKey, line: RequestLine
    ) -> jsonrpc.Response:
        msg = req.request
        try:
            reply = await self._pools[upstream].request(key, msg.method, req.upstream_params, PLAIN_TIMEOUT)
        except UpstreamAuthChallenge:
            raise
        except PoolExhausted as exc:
            return pool_full(self._calls.registry, msg, exc, line)
        except UpstreamError as exc:
            return unavailable_answer(msg.id, upstream, exc, line)
        if isinstance(reply, jsonrpc.Error):
            line.set_outcome(Outcome.UPSTREAM_ERROR, reply.error.code)
            return jsonrpc.Error(msg.id, reply.error)
        line.set_outcome(Outcome.COMPLETE)
        if self.migration is not None:
            self.migration.listed_result(upstream, msg.method, reply.result)
        return jsonrpc.Result(msg.id, complete(msg.method, reply.result))


def complete(method: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """A legacy result as a 2026-07-28 one: `resultType`, and caching hints where the method has them."""
    out = {**result, "resultType": mcp.RESULT_COMPLETE}
    if method in mcp.CACHEABLE_METHODS:
        for name, value in mcp.DEFAULT_CACHE_HINT.items():
            out.setdefault(name, value)
    return out
