"""Pass-through mode: the upstream's own protected-resource metadata (RFC 9728), fetched from where its
challenge said (when that is on the upstream's own origin) or from its well-known URLs, cached briefly.
The proxy serves it with `resource` rewritten to the route the client called (front/oauth.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import structlog

from proxy.auth import challenge
from proxy.auth.metadata import same_origin, upstream_metadata_urls

log = structlog.get_logger(__name__)

MAX_BYTES = 64 * 1024
TTL_S = 300.0
FAILURE_TTL_S = 10.0
TIMEOUT_S = 5.0


class UpstreamMetadata:
    def __init__(
        self, http: aiohttp.ClientSession, upstream_url: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._http, self._url, self._clock = http, upstream_url, clock
        self._hint: str | None = None
        self._doc: Mapping[str, Any] | None = None
        self._until = float("-inf")
        self._lock = asyncio.Lock()

    def saw_challenge(self, www_authenticate: str | None) -> None:
        """Remember where the upstream's challenge says its document is (only on its own origin: the
        proxy never fetches a URL an upstream response names elsewhere)."""
        found = challenge.bearer(challenge.parse(www_authenticate or ""))
        hint = found.params.get("resource_metadata") if found is not None else None
        if hint and hint != self._hint and same_origin(hint, self._url):
            self._hint, self._until = hint, float("-inf")

    async def document(self) -> Mapping[str, Any] | None:
        """The upstream's document, or None when it has none (or cannot be reached just now)."""
        if self._clock() < self._until:
            return self._doc
        async with self._lock:
            if self._clock() < self._until:
                return self._doc
            doc = None
            for url in dict.fromkeys(
                [*([self._hint] if self._hint else []), *upstream_metadata_urls(self._url)]
            ):
                doc = await self._fetch(url)
                if doc is not None:
                    break
            self._doc = doc
            self._until = self._clock() + (TTL_S if doc is not None else FAILURE_TTL_S)
            return doc

    async def _fetch(self, url: str) -> Mapping[str, Any] | None:
        try:
            timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
            async with self._http.get(url, headers={"Accept": "application/json"}, timeout=timeout) as resp:
                if resp.status != 200:
                    return None
                body = await resp.content.read(MAX_BYTES + 1)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.info("auth.upstream_metadata_unreachable", url=url, error=type(exc).__name__)
            return None
        try:
            doc = json.loads(body) if len(body) <= MAX_BYTES else None
        except ValueError:
            doc = None
        return doc if isinstance(doc, dict) and isinstance(doc.get("resource"), str) else None
