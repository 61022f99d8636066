"""Whether a 2026-07-28 upstream's `requestState` and task ids must be bound to the principal, for each way a
request reaches it: the upstream's own route and every aggregated route that lists it. Pure: no I/O.

What goes upstream for a request is decided by the route the request came by, not by the upstream alone: on
an aggregated route in validate mode the route's `upstream_credential` goes to every member (front/oauth.py
`route_as_upstream`), in pass-through mode the member's own `forward_headers`. An upstream that receives
anything but the client's own token (a service credential, nothing, or a header the principal does not come
from) cannot tell one user from another, so what it hands out (a `requestState`, a task id) would be a
bearer token any user could replay: the relay seals it, bound to the principal (front/modern/relay/native.py,
relay/tasks.py). Worked out once per (route, member) from the configuration, which is exact: the headers
that go upstream for a request are a function of that pair and the client's own headers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from proxy.config import AuthConfig, Config, PrincipalSource, UpstreamConfig

OWN = ""  # the route name of an upstream's own route (/servers/<upstream>/mcp) in a BindingTable's keys


@dataclass(frozen=True, slots=True)
class Binding:
    """One (route, member) pair: whether it binds, and why, in words for `check-config`."""

    route: str  # OWN: the upstream's own route
    upstream: str
    bound: bool
    why: str


def binding(
    upstream: UpstreamConfig, principal_source: PrincipalSource, auth: AuthConfig
) -> tuple[bool, str]:
    """Whether `upstream` reached through a route with `auth` (its own route: its own `auth`) must have its
    state bound, and why. Bound unless the client's own credential, the one its principal comes from, goes
    upstream with every request."""
    if upstream.command is not None:
        return True, "a stdio child sees no client credential"
    if auth.mode == "validate":
        source = auth.upstream_credential.source
        if source == "client_token":
            return False, "the client's own token goes upstream"
        return True, f"the upstream gets the {source} credential, not the client's token"
    if "authorization" not in upstream.forward_headers:
        return True, "the client's Authorization is not forwarded"
    if principal_source == "header":
        return True, "the principal comes from a header the upstream does not judge"
    return False, "the client's own token goes upstream"


def bindings(config: Config) -> Iterator[Binding]:
    """Every (route, member) pair of `config`: each standalone upstream's own route, then each aggregated
    route's members in route order."""
    source = config.principal.source
    for up in config.upstreams:
        if up.standalone:
            yield Binding(OWN, up.name, *binding(up, source, up.auth))
    for route in config.routes:
        for member in route.upstreams:
            up = config.upstream(member.upstream)
            yield Binding(route.name, up.name, *binding(up, source, route.auth))


class BindingTable:
    """The decision of `bindings` for a request: by the route it came by (None: the upstream's own route)
    and the upstream it goes to. A pair the configuration does not have (a non-standalone upstream's own
    route, which nothing serves) binds: never less than the strictest reading."""

    def __init__(self, config: Config) -> None:
        # Nested by route, then upstream: a lookup per relayed request builds no key tuple.
        self._bound: dict[str, dict[str, bool]] = {}
        for b in bindings(config):
            self._bound.setdefault(b.route, {})[b.upstream] = b.bound

    def binds(self, route: str | None, upstream: str) -> bool:
        members = self._bound.get(route or OWN)
        return True if members is None else members.get(upstream, True)
