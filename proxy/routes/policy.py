"""Tool-level policy of an aggregated route: which tools a client may see and call.

The route's rules match the names clients see (prefixed); an upstream's own rules in the route match the
names its server wrote, so they stay right whatever prefix the route gives it. Both apply: `allow` (empty:
everything) must match, `deny` must not, and each `require_scopes` glob that matches needs all its scopes
in the client's token (validate mode; without it the route has no scope rules, config/schema.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from proxy.config import ToolPolicy
from proxy.routes.table import Member, Route


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a tool is not this client's: `reason` is for the log and metrics, `message` for the client."""

    reason: str  # "not_allowed", "denied", "insufficient_scope"
    message: str


def judge(
    route: Route, member: Member, exposed: str, local: str, scopes: frozenset[str] | None
) -> Refused | None:
    """None when the client (its token's `scopes`; None: no validated token) may see and call the tool."""
    for policy, name in ((route.policy, exposed), (member.policy, local)):
        refused = _judge(policy, name, exposed, scopes)
        if refused is not None:
            return refused
    return None


def _judge(policy: ToolPolicy, name: str, exposed: str, scopes: frozenset[str] | None) -> Refused | None:
    if policy.allow and not _matches(name, policy.allow):
        return Refused("not_allowed", f"Tool {exposed!r} is not available on this route")
    if _matches(name, policy.deny):
        return Refused("denied", f"Tool {exposed!r} is not available on this route")
    for glob, needed in policy.require_scopes.items():
        if fnmatchcase(name, glob):
            missing = [s for s in needed if scopes is None or s not in scopes]
            if missing:
                return Refused(
                    "insufficient_scope",
                    f"Tool {exposed!r} needs the scope {' '.join(missing)}, which the access token lacks",
                )
    return None


def _matches(name: str, globs: Iterable[str]) -> bool:
    return any(fnmatchcase(name, glob) for glob in globs)
