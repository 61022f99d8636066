"""Validation: the JSON Schema, plus the checks it cannot express, as ``<dotted.path>: <reason>`` lines."""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

KEY_HINT = (
    "key material never goes in the config: list key files under keys.files, "
    "key directories under keys.dirs, or environment variable names under keys.env"
)
# Headers the proxy sets itself (never static, never forwarded) and headers carrying credentials.
MANAGED_HEADERS = frozenset(
    {"host", "content-length", "content-type", "connection", "transfer-encoding", "accept"}
    | {"mcp-session-id", "mcp-protocol-version", "last-event-id"}
)
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
UPSTREAM_REQUIRED = "upstreams: at least one upstream is required"


@functools.cache
def load_schema() -> Mapping[str, Any]:
    """The JSON Schema (draft 2020-12) of the configuration file, ``proxy/config.schema.json``."""
    text = resources.files("proxy").joinpath("config.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_type(path: list[str]) -> Any:
    """The JSON type the schema expects at a path (None if unknown, "enum" for enums)."""
    node: Any = load_schema()
    for part in path:
        node = node.get("items") if part.isdigit() else node.get("properties", {}).get(part)
        while isinstance(node, dict) and "$ref" in node and "type" not in node:
            node = load_schema()["$defs"][node["$ref"].rsplit("/", 1)[1]]
        if not isinstance(node, dict):
            return None
    return node.get("type", "enum" if "enum" in node else None)


def fmt(path: list[Any], reason: str, hint: bool = False) -> str:
    line = f"{'.'.join(map(str, path)) or '(top level)'}: {reason}"
    return f"{line} ({KEY_HINT})" if hint or path[:1] == ["keys"] else line


def path_order(line: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key for problem lines: grouped by path, list indices in numeric order."""
    parts = line.split(": ", 1)[0].split(".")
    return tuple((0, int(s), "") if s.isdigit() else (1, 0, s) for s in parts)


def schema_problems(raw: Mapping[str, Any]) -> Iterator[str]:
    for err in Draft202012Validator(load_schema()).iter_errors(raw):
        path, inst = list(err.absolute_path), err.instance
        if err.validator == "additionalProperties" and isinstance(inst, dict):
            known = err.schema.get("properties", {})
            for k in (k for k in inst if k not in known):
                yield fmt(
                    path, f"unknown key {k!r}", hint=bool(re.search("key|secret|token|passw", str(k), re.I))
                )
        elif err.validator == "required" and isinstance(inst, dict):
            for k in (k for k in err.validator_value if k not in inst):
                yield UPSTREAM_REQUIRED if not path and k == "upstreams" else fmt([*path, k], "required")
        elif err.validator == "minItems" and path == ["upstreams"]:
            yield UPSTREAM_REQUIRED
        elif "propertyNames" in err.absolute_schema_path:
            yield fmt(path, f"invalid key: {err.message}")
        else:
            yield fmt(path, err.message)


def semantic_problems(raw: Mapping[str, Any]) -> Iterator[str]:
    """Checks the schema cannot express; robust to input the schema rejects."""
    calls = raw.get("calls")
    if isinstance(calls, dict):
        per, most = calls.get("max_parked_per_principal", 100), calls.get("max_parked", 10000)
        if isinstance(per, int) and isinstance(most, int) and per > most:
            yield f"calls.max_parked_per_principal: {per} is more than calls.max_parked ({most})"
    replica, listen = raw.get("replica"), raw.get("listen")
    if isinstance(replica, dict) and isinstance(listen, dict):
        peer, main = replica.get("peer_port"), listen.get("port", 8080)
        if peer is not None and peer == main:
            yield f"replica.peer_port: {peer} is also listen.port; the peer port must differ (or be null)"
    yield from _replica_problems(replica)
    yield from _admin_problems(raw)
    hosts_seen: dict[str, str] = {}
    for section in ("upstreams", "routes"):  # a host routes /mcp to one upstream or route
        items = raw.get(section)
        for i, item in enumerate(items if isinstance(items, list) else ()):
            for host in (item.get("hosts") or []) if isinstance(item, dict) else ():
                if isinstance(host, str):
                    if host.lower() in hosts_seen:
                        yield f"{section}.{i}.hosts: {host!r} already routes to {hosts_seen[host.lower()]}"
                    hosts_seen.setdefault(host.lower(), f"{section}.{i}")
    principal = raw.get("principal")
    if isinstance(principal, dict) and principal.get("source") == "header" and not principal.get("header"):
        yield "principal.header: required when principal.source is 'header'"
    ups = raw.get("upstreams")
    seen: dict[str, int] = {}
    listen_url = listen.get("public_url") if isinstance(listen, dict) else None
    for i, up in enumerate(ups if isinstance(ups, list) else ()):
        if isinstance(up, dict):
            yield from _upstream_problems(f"upstreams.{i}", up, seen)
            yield from _auth_problems(f"upstreams.{i}", up, listen_url)
            if isinstance(up.get("name"), str):
                seen.setdefault(up["name"], i)
    yield from _route_problems(raw, listen_url)


def wildcard_host(address: str) -> str | None:
    """The host of "host:port" (IPv6 in brackets) when it is an unspecified address (0.0.0.0, ::): every
    local interface to listen on, but nowhere another replica can connect to. Else None."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    host = host.strip("[]")
    try:
        return host if ipaddress.ip_address(host).is_unspecified else None
    except ValueError:
        return None


def _replica_problems(replica: object) -> Iterator[str]:
    """Handles name the replica address as a parked call's owner, and peers forward retries to it: a
    wildcard there sends them to whichever replica makes the connection. Refused when set; derived from a
    wildcard listen.host (the chart's config, whose pods set MRTR_PROXY_REPLICA_ADDRESS), `serve` and
    `check-config` warn (cli/keys.py)."""
    replica = replica if isinstance(replica, dict) else {}
    address = replica.get("address")
    if isinstance(address, str) and (host := wildcard_host(address)) is not None:
        yield (
            f"replica.address: {address!r} is no address another replica can reach ({host} means every "
            "local interface); set this replica's own IP or DNS name (the Helm chart uses the pod IP)"
        )


def _admin_problems(raw: Mapping[str, Any]) -> Iterator[str]:
    admin, metrics = (raw.get(k) for k in ("admin", "metrics"))
    admin = admin if isinstance(admin, dict) else {}
    metrics = metrics if isinstance(metrics, dict) else {}
    listen = admin.get("listen")
    if isinstance(listen, str) and not admin.get("token_file"):
        yield "admin.token_file: required when admin.listen is set (the admin listener has no open mode)"
    if metrics.get("public") is False and not listen:
        yield "metrics.public: false needs admin.listen (else /metrics is served nowhere)"
    if isinstance(listen, str) and ":" in listen:
        port = listen.rsplit(":", 1)[1]
        main = raw.get("listen", {}).get("port", 8080) if isinstance(raw.get("listen"), dict) else 8080
        peer = raw.get("replica", {}).get("peer_port") if isinstance(raw.get("replica"), dict) else None
        if port.isdigit() and int(port) in (main, peer):
            yield f"admin.listen: port {port} is also listen.port or replica.peer_port; it must differ"


def _upstream_problems(p: str, up: dict[str, Any], seen: dict[str, int]) -> Iterator[str]:
    name, url, cmd, tr = up.get("name"), up.get("url"), up.get("command"), up.get("transport")
    if isinstance(name, str) and name in seen:
        yield f"{p}.name: duplicate upstream name {name!r} (also upstreams.{seen[name]}.name)"
    if url is not None and cmd is not None:
        yield f"{p}: give either url (streamable-http, sse) or command (stdio), not both"
    elif tr == "stdio" and cmd is None:
        yield f"{p}.command: required for transport 'stdio'" + (
            " (url is for HTTP transports)" if url else ""
        )
    elif tr in ("streamable-http", "sse") and url is None:
        yield f"{p}.url: required for transport {tr!r}" + (" (command is for stdio)" if cmd else "")
    elif url is None and cmd is None:
        yield f"{p}: needs url (streamable-http, sse) or command (stdio)"
    if url is None or cmd is None:
        stdio = tr == "stdio" or (tr is None and cmd is not None)
        for k in ("headers",) if stdio else ("args", "env", "cwd"):
            if up.get(k):
                yield f"{p}.{k}: only used with transport " + (
                    "stdio" if k != "headers" else "streamable-http or sse"
                )
    yield from _era_problems(p, up)
    headers, forward = up.get("headers"), up.get("forward_headers")
    for h in headers if isinstance(headers, dict) else ():
        if isinstance(h, str) and h.lower() in CREDENTIAL_HEADERS:
            yield f"{p}.headers: {h!r} carries credentials, and secrets never go in the config"
        elif isinstance(h, str) and h.lower() in MANAGED_HEADERS:
            yield f"{p}.headers: {h!r} is set by the proxy"
    for j, h in enumerate(forward if isinstance(forward, list) else ()):
        if isinstance(h, str) and h in MANAGED_HEADERS:  # (the schema says what else is wrong with it)
            yield f"{p}.forward_headers.{j}: {h!r} is set by the proxy and cannot be forwarded"


def _era_problems(p: str, up: dict[str, Any]) -> Iterator[str]:
    """era and protocol_versions: an HTTP+SSE upstream is never a 2026-07-28 one, and they agree."""
    era, listed = up.get("era", "auto"), up.get("protocol_versions")
    modern_listed = isinstance(listed, list) and "2026-07-28" in listed
    only_modern = modern_listed and len(listed) == 1  # type: ignore[arg-type]
    transport = up.get("transport") or ("stdio" if up.get("command") is not None else "streamable-http")
    if (era == "modern" or only_modern) and transport == "sse":
        what = "era: modern" if era == "modern" else "protocol_versions: [2026-07-28]"
        why = "an sse upstream is legacy by definition"
        yield f"{p}: {what} needs transport streamable-http or stdio ({why})"
    if era == "legacy" and modern_listed:
        yield f"{p}.protocol_versions: 2026-07-28 is listed but era is legacy (drop one of them)"


def _auth_problems(p: str, up: dict[str, Any], listen_url: object) -> Iterator[str]:
    """auth and tls: what validate mode needs, credentials never inline, TLS only where it applies."""
    tls, auth, url = up.get("tls"), up.get("auth"), up.get("url")
    if isinstance(tls, dict) and any(tls.get(k) for k in ("ca_file", "cert_file", "key_file")):
        if not (isinstance(url, str) and url.startswith("https://")):
            yield f"{p}.tls: only used with an https:// url"
        if tls.get("key_file") and not tls.get("cert_file"):
            yield f"{p}.tls.key_file: needs tls.cert_file (the certificate it belongs to)"
    if not isinstance(auth, dict):
        return
    if auth.get("mode") == "validate":
        if not auth.get("authorization_servers"):
            yield f"{p}.auth.authorization_servers: validate mode needs at least one (clients discover it)"
        jwks = [k for k in ("jwks_url", "jwks_file") if auth.get(k)]
        if len(jwks) != 1:
            yield f"{p}.auth: validate mode needs exactly one of jwks_url or jwks_file" + (
                f" (got {' and '.join(jwks)})" if jwks else ""
            )
        if not auth.get("public_url") and not listen_url:
            yield (
                f"{p}.auth.public_url: validate mode needs the resource URL clients call (auth.public_url "
                "or listen.public_url): the token audience is checked against it, never the Host header"
            )
        stdio = up.get("transport") == "stdio" or up.get("command") is not None
        if stdio and _credential_source(auth) != "none":
            yield f"{p}.auth.upstream_credential: a stdio child takes no credentials; use source: none"
    elif any(auth.get(k) for k in VALIDATE_ONLY) or _credential_source(auth) != "client_token":
        used = ", ".join(k for k in VALIDATE_ONLY if auth.get(k)) or "upstream_credential.source"
        yield f"{p}.auth: {used} only used with mode: validate"
    cred = auth.get("upstream_credential")
    if isinstance(cred, dict):
        source = cred.get("source", "client_token")
        for k in ("file", "env"):
            if source == k and not cred.get(k):
                yield f"{p}.auth.upstream_credential.{k}: required when source is {k!r}"
            elif source != k and cred.get(k):
                yield f"{p}.auth.upstream_credential.{k}: only used when source is {k!r}"
        header = cred.get("header", "authorization")
        if isinstance(header, str) and header in MANAGED_HEADERS:
            yield f"{p}.auth.upstream_credential.header: {header!r} is set by the proxy"
    claims = auth.get("claim_headers")
    for h in claims if isinstance(claims, dict) else ():
        if isinstance(h, str) and (h in MANAGED_HEADERS or h in CREDENTIAL_HEADERS):
            yield f"{p}.auth.claim_headers: {h!r} cannot carry a claim"


VALIDATE_ONLY = ("issuer", "jwks_url", "jwks_file", "audience", "required_scopes", "claim_headers")


def _credential_source(auth: dict[str, Any]) -> object:
    cred = auth.get("upstream_credential")
    return cred.get("source", "client_token") if isinstance(cred, dict) else "client_token"


def _route_problems(raw: Mapping[str, Any], listen_url: object) -> Iterator[str]:
    """Aggregated routes: members that exist, once each, prefixes that keep names apart, one default
    route, validate mode wherever a member needs it, scope rules only where tokens are validated."""
    ups, routes = raw.get("upstreams"), raw.get("routes")
    by_name = {
        up["name"]: up
        for up in (ups if isinstance(ups, list) else ())
        if isinstance(up, dict) and isinstance(up.get("name"), str)
    }
    defaults: list[int] = []
    route_names: dict[str, int] = {}
    listed = {
        m if isinstance(m, str) else m.get("upstream") if isinstance(m, dict) else None
        for r in (routes if isinstance(routes, list) else ())
        if isinstance(r, dict) and isinstance(r.get("upstreams"), list)
        for m in r["upstreams"]
    }
    for i, up in enumerate(ups if isinstance(ups, list) else ()):
        if isinstance(up, dict) and up.get("standalone") is False:
            if up.get("name") not in listed:
                yield f"upstreams.{i}.standalone: false, but no route lists it (it would be served nowhere)"
            if up.get("hosts"):
                yield f"upstreams.{i}.hosts: only used when the upstream is standalone"
    for i, route in enumerate(routes if isinstance(routes, list) else ()):
        if not isinstance(route, dict):
            continue
        p, name = f"routes.{i}", route.get("name")
        if isinstance(name, str) and name in by_name:
            yield f"{p}.name: {name!r} is also an upstream's name (both would be /servers/{name}/mcp)"
        elif isinstance(name, str) and name in route_names:
            yield f"{p}.name: duplicate route name {name!r} (also routes.{route_names[name]}.name)"
        if isinstance(name, str):
            route_names.setdefault(name, i)
        if route.get("default") is True:
            defaults.append(i)
        auth = route.get("auth")
        validate = isinstance(auth, dict) and auth.get("mode") == "validate"
        if isinstance(auth, dict):
            yield from _auth_problems(p, {"auth": auth}, listen_url)
        members = route.get("upstreams")
        members = members if isinstance(members, list) else []
        yield from _member_problems(p, members, by_name, validate, route.get("prefix_mode"))
        if not validate and _has_scope_rules(route.get("tools")):
            yield f"{p}.tools: {VALIDATE_ONLY_RULES}"
    if len(defaults) > 1:
        yield f"routes.{defaults[1]}.default: only one route is served at /mcp (also routes.{defaults[0]})"


def _member_problems(
    p: str, members: list[Any], by_name: Mapping[str, Any], validate: bool, mode: object
) -> Iterator[str]:
    seen: dict[str, int] = {}
    prefixes: dict[str, int] = {}
    for j, member in enumerate(members):
        name = (
            member
            if isinstance(member, str)
            else member.get("upstream")
            if isinstance(member, dict)
            else None
        )
        if not isinstance(name, str):
            continue
        where = f"{p}.upstreams.{j}"
        if name not in by_name:
            yield f"{where}: no upstream named {name!r} (routes list upstreams defined under upstreams)"
            continue
        if name in seen:
            yield f"{where}: upstream {name!r} is already in this route (upstreams.{seen[name]})"
        seen.setdefault(name, j)
        prefix = member.get("prefix") if isinstance(member, dict) else None
        prefix = prefix if isinstance(prefix, str) else name
        if prefix in prefixes and mode != "never":
            yield f"{where}.prefix: {prefix!r} is also the prefix of {p}.upstreams.{prefixes[prefix]}"
        prefixes.setdefault(prefix, j)
        up_auth = by_name[name].get("auth")
        if isinstance(up_auth, dict) and up_auth.get("mode") == "validate" and not validate:
            yield (
                f"{where}: upstream {name!r} validates tokens (auth.mode validate), so the route must too "
                "(auth.mode validate on the route), or the route would serve it without a token check"
            )
        if isinstance(member, dict) and not validate and _has_scope_rules(member.get("tools")):
            yield f"{where}.tools: {VALIDATE_ONLY_RULES}"


VALIDATE_ONLY_RULES = "require_scopes and require_claims are only used with auth.mode validate on the route"


def _has_scope_rules(tools: object) -> bool:
    return isinstance(tools, dict) and bool(tools.get("require_scopes") or tools.get("require_claims"))
