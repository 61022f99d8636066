"""TLS to `https://` upstreams: a private CA bundle instead of the system CAs, and a client certificate
for mutual TLS. Built once at start; a file that cannot be used stops the start naming the file and why."""

from __future__ import annotations

import ssl
import weakref
from collections.abc import Mapping

import aiohttp

from proxy.config import TlsConfig
from proxy.upstream.lean_http import IDLE_TTL

# The context each upstream's own HTTP client was made with, for what opens its connections itself (the
# standalone GET streams, event_stream.py): an aiohttp session does not say which context it verifies with.
_CONTEXTS: weakref.WeakKeyDictionary[aiohttp.ClientSession, ssl.SSLContext] = weakref.WeakKeyDictionary()


class TlsSetupError(ValueError):
    """A configured TLS file cannot be used; the message names the setting, the file and the reason."""


def client_context(tls: TlsConfig, where: str) -> ssl.SSLContext | None:
    """The SSL context for an upstream (`where`: its config path, for messages); None: aiohttp's default
    (system CAs, no client certificate)."""
    if not tls.configured:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.ca_file is not None:
        try:
            ctx.load_verify_locations(cafile=str(tls.ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise TlsSetupError(
                f"{where}.tls.ca_file: cannot load CA bundle {tls.ca_file}: {_why(exc)}"
            ) from None
    if tls.cert_file is not None:
        key = tls.key_file or tls.cert_file
        try:
            ctx.load_cert_chain(certfile=str(tls.cert_file), keyfile=str(key))
        except (OSError, ssl.SSLError) as exc:
            raise TlsSetupError(
                f"{where}.tls.cert_file: cannot load client certificate {tls.cert_file} with key {key}: "
                f"{_why(exc)}"
            ) from None
    return ctx


def _why(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def tls_sessions(
    contexts: Mapping[str, ssl.SSLContext | None], timeout: aiohttp.ClientTimeout
) -> dict[str, aiohttp.ClientSession]:
    """An HTTP client of its own for each upstream with an SSL context (the others share the proxy's).
    No cookie jar: the client is shared by every user's sessions and calls to that upstream, so a cookie
    the upstream set in answer to one user's request would go out on the next user's."""
    clients = {}
    for name, ctx in contexts.items():
        if ctx is not None:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ssl=ctx, keepalive_timeout=IDLE_TTL)
            clients[name] = aiohttp.ClientSession(
                connector=connector, timeout=timeout, cookie_jar=aiohttp.DummyCookieJar()
            )
            _CONTEXTS[clients[name]] = ctx
    return clients


def context_of(http: aiohttp.ClientSession) -> ssl.SSLContext | None:
    """The SSL context `http` was made with by `tls_sessions`; None: the default (system CAs)."""
    return _CONTEXTS.get(http)
