"""Tool-level policy of an aggregated route: which tools a client may see and call.

The rules are judged on names as a member listed them to the client: a called name is first resolved
through that client's list and refused as unknown when no member listed it so spelled
(front/modern/aggregate/front.py), so no other spelling of a name is judged by its text. The route's rules
match the names clients see (prefixed); an upstream's own rules in the route match the
names its server wrote, so they stay right whatever prefix the route gives it. Both apply: `allow` (empty:
everything) must match, `deny` must not, each `require_scopes` glob that matches needs all its scopes in
the client's token, and each `require_claims` glob that matches needs every claim it names to have (or, for
a list claim such as groups, to contain) one of the values given (validate mode; without it the route has
no such rules, config/schema.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from proxy.config import ToolPolicy
from proxy.routes.table import Member, Route


@dataclass(frozen=True, slots=True)
class Grant:
    """What a validated access token grants: its scopes and its claims."""

    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a tool is not this client's: `reason` is for the log and metrics, `message` for the client."""

    reason: str  # "not_allowed", "denied", "insufficient_scope", "claim_mismatch"
    message: str


def judge(route: Route, member: Member, exposed: str, local: str, grant: Grant | None) -> Refused | None:
    """None when the client (its token's `grant`; None: no validated token) may see and call the tool."""
    if not route.policed:  # no rule anywhere on the route (the usual case): nothing to judge
        return None
    for policy, name in ((route.policy, exposed), (member.policy, local)):
        refused = _judge(policy, name, exposed, grant)
        if refused is not None:
            return refused
    return None


def per_token(route: Route) -> bool:
    """Does the route judge tools by the client's token (so what one client lists is its own)?"""
    policies = (route.policy, *(m.policy for m in route.members))
    return any(p.require_scopes or p.require_claims for p in policies)


def _judge(policy: ToolPolicy, name: str, exposed: str, grant: Grant | None) -> Refused | None:
    if policy.allow and not _matches(name, policy.allow):
        return Refused("not_allowed", f"Tool {exposed!r} is not available on this route")
    if _matches(name, policy.deny):
        return Refused("denied", f"Tool {exposed!r} is not available on this route")
    for glob, needed in policy.require_scopes.items():
        if fnmatchcase(name, glob):
            missing = [s for s in needed if grant is None or s not in grant.scopes]
            if missing:
                return Refused(
                    "insufficient_scope",
                    f"Tool {exposed!r} needs the scope {' '.join(missing)}, which the access token lacks",
                )
    for glob, wanted in policy.require_claims.items():
        if fnmatchcase(name, glob):
            for claim, accepted in wanted.items():
                if not _claim_holds(grant.claims.get(claim) if grant else None, accepted):
                    return Refused(
                        "claim_mismatch",
                        f"Tool {exposed!r} is not available to this access token (claim {claim!r})",
                    )
    return None


def _claim_holds(value: object, accepted: Iterable[str]) -> bool:
    """A string claim equal to one accepted value, or a list claim containing one (numbers as text)."""
    values = value if isinstance(value, list) else [value]
    have = {str(v) for v in values if isinstance(v, str | int) and not isinstance(v, bool)}
    return bool(have & set(accepted))


def _matches(name: str, globs: Iterable[str]) -> bool:
    return any(fnmatchcase(name, glob) for glob in globs)
