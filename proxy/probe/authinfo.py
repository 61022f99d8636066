"""Reading a 401's `WWW-Authenticate` and where RFC 9728 protected-resource metadata may live. Pure."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


def challenge_params(header: str) -> dict[str, str]:
    """The auth-params of a Bearer challenge (`resource_metadata`, `scope`, `error`, …); lowercase names."""
    return {
        m[1].lower(): (m[2] if m[2] is not None else m[3]).replace('\\"', '"')
        for m in _PARAM.finditer(header)
    }


def same_resource(url: str, resource: object) -> bool:
    """Does the metadata's `resource` identify the URL probed (RFC 9728 section 3.3)? Scheme and host
    compare case-insensitively, a trailing slash is ignored; the path must be the same."""
    if not isinstance(resource, str):
        return False
    a, b = urlsplit(url), urlsplit(resource)
    return (a.scheme.lower(), (a.hostname or "").lower(), a.port, a.path.rstrip("/")) == (
        b.scheme.lower(),
        (b.hostname or "").lower(),
        b.port,
        b.path.rstrip("/"),
    )


def metadata_urls(resource_url: str, header: str) -> list[str]:
    """Where to look, in order: the challenge's `resource_metadata`, then the path-suffixed well-known URL,
    then the root one (RFC 9728 section 3.1)."""
    found: list[str] = []
    pointed = challenge_params(header).get("resource_metadata")
    if pointed:
        found.append(pointed)
    parts = urlsplit(resource_url)
    path = parts.path.rstrip("/")
    if path:
        found.append(urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN + path, "", "")))
    found.append(urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN, "", "")))
    return list(dict.fromkeys(found))
