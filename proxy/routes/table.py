"""The route table: each aggregated route's upstreams in route order, and the names clients see.

A route's tools and prompts are exposed as `<prefix><separator><name>` when it prefixes (prefix_mode
`always`, or `conditional` with more than one upstream), else under the upstream's own names (`never`, or a
route of one upstream), when a name two upstreams share is a clash the first in route order wins (index.py).
How an upstream is reached (its transport, its protocol era) is no concern of the table: a member is only
the upstream's name, so any kind of upstream can join a route.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from proxy.config import Config, RouteConfig, ToolPolicy


@dataclass(frozen=True, slots=True)
class Member:
    """One upstream in a route: its place in route order, its prefix, its own tool policy."""

    index: int
    upstream: str
    prefix: str
    policy: ToolPolicy


@dataclass(frozen=True, slots=True)
class Route:
    name: str
    members: tuple[Member, ...]
    prefixed: bool
    separator: str
    list_timeout: float
    policy: ToolPolicy
    validates: bool = False  # auth.mode validate: the route's tokens carry the scopes its rules need
    hosts: tuple[str, ...] = ()  # Host names that route /mcp here
    list_cache: float = 0.0  # seconds an upstream's list page is given again without asking it (0: never)
    # Worked out once (Route.of) rather than on every call: each member's `<prefix><separator>`, longest
    # first (route order among equals), and whether any tool rule applies at all (True: judge every call).
    heads: tuple[tuple[str, Member], ...] = ()
    policed: bool = True

    @classmethod
    def of(cls, config: RouteConfig) -> Route:
        members = tuple(
            Member(i, m.upstream, m.prefix if m.prefix is not None else m.upstream, m.tools)
            for i, m in enumerate(config.upstreams)
        )
        mode = config.prefix_mode
        prefixed = mode == "always" or (mode == "conditional" and len(members) > 1)
        heads = sorted(((m.prefix + config.separator, m) for m in members), key=_longest)
        policies = (config.tools, *(m.policy for m in members))
        policed = any(p.allow or p.deny or p.require_scopes or p.require_claims for p in policies)
        return cls(
            config.name,
            members,
            prefixed,
            config.separator,
            config.list_timeout_s,
            config.tools,
            validates=config.auth.mode == "validate",
            hosts=config.hosts,
            list_cache=config.list_cache_ms / 1000,
            heads=tuple(heads),
            policed=policed,
        )

    @property
    def upstreams(self) -> tuple[str, ...]:
        return tuple(m.upstream for m in self.members)

    def exposed(self, member: Member, name: str) -> str:
        """The name clients see for `member`'s tool or prompt `name`."""
        return f"{member.prefix}{self.separator}{name}" if self.prefixed else name

    def split(self, exposed: str) -> tuple[Member, str] | None:
        """A prefixed name's member and the upstream's own name (the longest prefix that matches wins);
        None when no member's prefix matches, or when the route does not prefix (ask the index)."""
        if not self.prefixed:
            return None
        heads = self.heads or sorted(((m.prefix + self.separator, m) for m in self.members), key=_longest)
        for head, member in heads:
            if exposed.startswith(head) and len(exposed) > len(head):
                return member, exposed[len(head) :]
        return None


def _longest(head: tuple[str, Member]) -> int:
    return -len(head[0])


@dataclass(frozen=True, slots=True)
class RouteTable:
    """Every aggregated route by name; `default` is the one also served at /mcp (None: the first upstream)."""

    routes: Mapping[str, Route]
    default: str | None = None

    @classmethod
    def of(cls, config: Config) -> RouteTable:
        routes = {r.name: Route.of(r) for r in config.routes}
        default = next((r.name for r in config.routes if r.default), None)
        return cls(MappingProxyType(routes), default)

    def __contains__(self, name: object) -> bool:
        return name in self.routes

    def __iter__(self) -> Iterator[Route]:
        return iter(self.routes.values())

    def get(self, name: str) -> Route | None:
        return self.routes.get(name)


def members(config: Config) -> dict[str, tuple[str, ...]]:
    """Each aggregated route's upstream names, in route order."""
    return {r.name: tuple(m.upstream for m in r.upstreams) for r in config.routes}
