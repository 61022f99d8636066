"""RFC 9728 protected-resource metadata: a route's resource URL, where its document is served, and the
document itself (the upstream's with `resource` rewritten, a static one, or one generated for validate
mode). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from proxy.config import AuthConfig

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def resource_url(
    auth: AuthConfig, listen_public_url: str | None, route_path: str, request_origin: str
) -> str:
    """The resource URL (RFC 8707 resource indicator, RFC 9728 `resource`) of a route such as `/mcp` or
    `/servers/<name>/mcp`: `auth.public_url`, else `listen.public_url` + the route, else (pass-through
    only: config validation requires a configured one for validate mode) the request's own origin."""
    if auth.public_url:
        return auth.public_url
    base = (listen_public_url or request_origin).rstrip("/")
    return base + route_path


def metadata_url(resource: str) -> str:
    """Where the document of `resource` is served (RFC 9728 §3.1): the well-known prefix inserted between
    the host and the path (`https://h/.well-known/oauth-protected-resource/mcp`); the root form when the
    resource has no path."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN + path, "", ""))


def upstream_metadata_urls(upstream_url: str) -> tuple[str, ...]:
    """Where an upstream's own document may be, in the order clients try (path-suffixed, then root)."""
    parts = urlsplit(upstream_url)
    root = urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN, "", ""))
    suffixed = metadata_url(upstream_url)
    return (suffixed, root) if suffixed != root else (root,)


def same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme.lower(), pa.hostname, pa.port) == (pb.scheme.lower(), pb.hostname, pb.port)


def rewritten(document: Mapping[str, Any], resource: str) -> dict[str, Any]:
    """The upstream's (or a static) document as the proxy serves it: `resource` is the proxy's route."""
    return {**document, "resource": resource}


def generated(auth: AuthConfig, resource: str) -> dict[str, Any]:
    """validate mode: the proxy is the resource server; it names the configured authorization servers."""
    if auth.metadata is not None:
        return rewritten(auth.metadata, resource)
    doc: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": list(auth.authorization_servers),
        "bearer_methods_supported": ["header"],
    }
    if auth.required_scopes:
        doc["scopes_supported"] = list(auth.required_scopes)
    return doc
