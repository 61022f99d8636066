"""`check-config`'s check of the tool policy's globs, and its listing of each route member's own rules.

A rule whose glob matches no tool is accepted by the loader (the upstream's tools are not known then), yet
it is almost always a typo: a `deny` meant to hide a tool that is still served, an `allow` that hides
everything. With `--probe` the tools are known: each `allow`, `deny`, `require_scopes` and `require_claims`
glob, of a route (matched against the names clients see) and of a member (against the names its server
wrote), that matches none of them is one warning line naming the route, the member and the setting.
Without `--probe` nothing is checked, and `check-config` says so in one line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from proxy.config import Config, ToolPolicy
from proxy.routes.table import Route, RouteTable

NOT_CHECKED = (
    "tool policy globs: not checked against the upstreams' tools (check-config --probe lists the tools "
    "and warns of a glob that matches none)"
)


def _globs(policy: ToolPolicy) -> Iterable[tuple[str, str]]:
    """(setting, glob) for every glob of `policy`, in the order the configuration names them."""
    yield from (("tools.allow", glob) for glob in policy.allow)
    yield from (("tools.deny", glob) for glob in policy.deny)
    yield from (("tools.require_scopes", glob) for glob in policy.require_scopes)
    yield from (("tools.require_claims", glob) for glob in policy.require_claims)


def _has_globs(policy: ToolPolicy) -> bool:
    return bool(policy.allow or policy.deny or policy.require_scopes or policy.require_claims)


def rules_text(policy: ToolPolicy) -> str:
    """A policy's rules as `check-config` prints them, a route's (cli/routes.py) and a member's own."""
    parts = [f"{k} {list(v)}" for k, v in (("allow", policy.allow), ("deny", policy.deny)) if v]
    parts += [f"{glob} needs {' '.join(scopes)}" for glob, scopes in policy.require_scopes.items()]
    parts += [
        f"{glob} needs {' and '.join(f'{c} in {list(v)}' for c, v in claims.items())}"
        for glob, claims in policy.require_claims.items()
    ]
    return ", ".join(parts)


def describe(config: Config) -> list[str]:
    """One line per route member with rules of its own (the route's line shows only the route's)."""
    return [
        f"route {route.name}: member {member.upstream}: tools (its own names): {rules_text(member.policy)}"
        for route in RouteTable.of(config)
        for member in route.members
        if _has_globs(member.policy)
    ]


def unchecked(config: Config) -> list[str]:
    """Without `--probe`: the one line saying the globs were not checked (none when there are none)."""
    policies = [p for r in config.routes for p in (r.tools, *(m.tools for m in r.upstreams))]
    return [NOT_CHECKED] if any(_has_globs(p) for p in policies) else []


def probed(route: Route, lists: Mapping[str, Mapping[str, Mapping[str, Any]] | str]) -> list[str]:
    """`unmatched` over what `check-config --probe` listed (cli/routes.py: each upstream's lists, or why it
    could not be listed)."""
    listed: dict[str, Sequence[str] | None] = {}
    for member in route.members:
        found = lists.get(member.upstream)
        tools = found.get("tools/list", {}).get("tools") if not isinstance(found, str | None) else None
        listed[member.upstream] = (
            [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
            if isinstance(tools, list)
            else None
        )
    return unmatched(route, listed)


def unmatched(route: Route, listed: Mapping[str, Sequence[str] | None]) -> list[str]:
    """The warnings for `route`'s globs that match none of its tools. `listed`: each member's tool names as
    its server wrote them, or None when it could not be listed (then its globs, and the route's, are left
    unjudged: a tool it did not show could be the one a glob meant)."""
    lines = []
    everyone_listed = all(listed.get(m.upstream) is not None for m in route.members)
    if everyone_listed:
        exposed = [route.exposed(m, name) for m in route.members for name in listed[m.upstream] or ()]
        for setting, glob in _globs(route.policy):
            if not any(fnmatchcase(name, glob) for name in exposed):
                lines.append(
                    f"warning: route {route.name}: routes.{route.name}.{setting} glob {glob!r} matches no "
                    "tool of the route (globs match the names clients see)"
                )
    for member in route.members:
        names = listed.get(member.upstream)
        if names is None:
            continue
        for setting, glob in _globs(member.policy):
            if not any(fnmatchcase(name, glob) for name in names):
                lines.append(
                    f"warning: route {route.name}: member {member.upstream}: routes.{route.name}."
                    f"upstreams.{member.index}.{setting} glob {glob!r} matches no tool {member.upstream} "
                    "lists (a member's globs match its server's own names)"
                )
    return lines
