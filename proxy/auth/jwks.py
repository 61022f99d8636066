"""Signing keys for validate mode: a JWKS document from a URL (cached; fetched again when it is older than
its TTL or, at most once per `min_refresh`, when a token names a kid it lacks; one fetch at a time, and a
request whose key is known never waits for one) or static keys from a file.

A flood of tokens with made-up kids costs one fetch per `min_refresh`, never one per request; a failed
fetch keeps the keys already known; a document is read up to MAX_BYTES and MAX_KEYS keys."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import structlog

from proxy.auth.tokens import JoseHeader, Rejected

log = structlog.get_logger(__name__)

MAX_BYTES = 512 * 1024
MAX_KEYS = 64
FETCH_TIMEOUT_S = 5.0
Fetch = Callable[[], Awaitable[Any]]  # the parsed JWKS document; raises JwksUnavailable


class JwksUnavailable(Exception):
    """No signing keys can be had right now (the JWKS endpoint failed and none are cached)."""


class KeySet:
    """A parsed JWKS: the signature keys by kid. Keys the library cannot load are left out."""

    def __init__(self, doc: Any) -> None:
        keys = doc.get("keys") if isinstance(doc, dict) else None
        if not isinstance(keys, list):
            raise JwksUnavailable("not a JWKS document (no 'keys' list)")
        self._jwks: list[Mapping[str, Any]] = [
            k for k in keys[:MAX_KEYS] if isinstance(k, dict) and k.get("use", "sig") == "sig"
        ]
        self._loaded: dict[tuple[int, str], jwt.PyJWK | None] = {}

    @property
    def kids(self) -> tuple[str, ...]:
        return tuple(str(k.get("kid")) for k in self._jwks)

    def find(self, header: JoseHeader) -> jwt.PyJWK | None:
        """The key for this header: same kid (or, with no kid, the only key usable with its alg) whose own
        `alg`, if it names one, is the header's."""
        candidates = [
            i
            for i, k in enumerate(self._jwks)
            if (header.kid is None or k.get("kid") == header.kid) and k.get("alg", header.alg) == header.alg
        ]
        usable = [key for i in candidates if (key := self._load(i, header.alg)) is not None]
        if header.kid is None and len(usable) != 1:
            return None
        return usable[0] if usable else None

    def _load(self, index: int, alg: str) -> jwt.PyJWK | None:
        if (index, alg) not in self._loaded:
            try:
                self._loaded[index, alg] = jwt.PyJWK(dict(self._jwks[index]), algorithm=alg)
            except (jwt.PyJWTError, ValueError, TypeError, KeyError):
                self._loaded[index, alg] = None  # wrong key type for the alg, or an unsupported key
        return self._loaded[index, alg]


UNKNOWN_KEY = ("unknown_key", "the access token's signing key is unknown")


class StaticKeys:
    def __init__(self, keys: KeySet) -> None:
        self._keys = keys

    async def key(self, header: JoseHeader) -> jwt.PyJWK:
        found = self._keys.find(header)
        if found is None:
            raise Rejected(401, "invalid_token", *UNKNOWN_KEY)
        return found


class JwksCache:
    """The keys of one `jwks_url`, with at most one fetch in flight whatever `min_refresh_s` is.

    A request whose key is known never waits for a fetch: past the TTL the known keys answer while one
    fetch runs in the background. Only a request with no usable key waits — for the fetch in flight, or
    one it starts (at most once per `min_refresh_s`), bounded by FETCH_TIMEOUT_S."""

    def __init__(
        self,
        fetch: Fetch,
        *,
        ttl_s: float,
        min_refresh_s: float,
        clock: Callable[[], float] = time.monotonic,
        source: str = "jwks_url",
    ) -> None:
        self._fetch = fetch
        self._ttl, self._min_refresh, self._clock, self._source = ttl_s, min_refresh_s, clock, source
        self._keys: KeySet | None = None
        self._fetched_at = float("-inf")  # the last successful fetch
        self._tried_at = float("-inf")  # the last attempt, successful or not
        self._fetches = 0
        self._inflight: asyncio.Task[None] | None = None
        self._failure = ""  # why the last fetch failed

    @property
    def fetches(self) -> int:
        return self._fetches

    async def key(self, header: JoseHeader) -> jwt.PyJWK:
        """The signing key for `header`. Raises Rejected (unknown key) or JwksUnavailable."""
        found = self._keys.find(header) if self._keys is not None else None
        if found is not None:
            if self._clock() - self._fetched_at >= self._ttl:
                self._start()  # stale: refreshed in the background, the known key answers now
            return found
        fetch = self._inflight or self._start()  # keys may have rotated: once per min_refresh at most
        if fetch is None and self._keys is None:
            raise JwksUnavailable(f"the {self._source} fetch failed moments ago")
        if fetch is not None:
            try:
                async with asyncio.timeout(FETCH_TIMEOUT_S + 1):
                    await asyncio.shield(fetch)
            except TimeoutError:
                pass  # the fetch's own timeout is FETCH_TIMEOUT_S: this bounds a fetch that ignores it
            found = self._keys.find(header) if self._keys is not None else None
        if found is not None:
            return found
        if self._keys is None:
            raise JwksUnavailable(self._failure or f"no keys from {self._source} yet")
        raise Rejected(401, "invalid_token", *UNKNOWN_KEY)

    def _start(self) -> asyncio.Task[None] | None:
        """The fetch in flight, else a new one unless the last attempt is under `min_refresh_s` old."""
        if self._inflight is not None:
            return self._inflight
        now = self._clock()
        if now - self._tried_at < self._min_refresh:
            return None
        self._tried_at = now
        self._fetches += 1
        self._inflight = asyncio.ensure_future(self._refresh())
        return self._inflight

    async def _refresh(self) -> None:
        try:
            keys = KeySet(await self._fetch())
        except JwksUnavailable as exc:
            self._failure = str(exc)
            log.warning("auth.jwks_fetch_failed", source=self._source, error=str(exc), kept=bool(self._keys))
            return
        except Exception as exc:  # a bug must not leave an exception nobody retrieves
            self._failure = f"the {self._source} fetch failed: {type(exc).__name__}"
            log.exception("auth.jwks_fetch_crashed", source=self._source)
            return
        finally:
            self._inflight = None
        self._keys, self._fetched_at = keys, self._clock()
        log.info("auth.jwks_fetched", source=self._source, keys=len(keys.kids))

    async def close(self) -> None:
        """Stop a fetch still in flight (at shutdown)."""
        if self._inflight is not None:
            self._inflight.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._inflight


def http_fetcher(http: aiohttp.ClientSession, url: str) -> Fetch:
    async def fetch() -> Any:
        try:
            async with http.get(
                url,
                headers={"Accept": "application/json"},
                timeout=aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S),
            ) as resp:
                if resp.status != 200:
                    raise JwksUnavailable(f"{url} answered HTTP {resp.status}")
                body = await resp.content.read(MAX_BYTES + 1)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise JwksUnavailable(f"{url}: {type(exc).__name__}: {exc}") from None
        if len(body) > MAX_BYTES:
            raise JwksUnavailable(f"{url}: the document is larger than {MAX_BYTES} bytes")
        try:
            return json.loads(body)
        except ValueError:
            raise JwksUnavailable(f"{url}: not JSON") from None

    return fetch


def static_keys(path: Path) -> StaticKeys:
    """Keys from a JWKS file, read once at start. Raises JwksUnavailable naming the file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise JwksUnavailable(f"auth.jwks_file {path}: {exc}") from None
    try:
        return StaticKeys(KeySet(doc))
    except JwksUnavailable as exc:
        raise JwksUnavailable(f"auth.jwks_file {path}: {exc}") from None
