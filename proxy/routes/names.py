"""The entries of an upstream's list page as a route's clients see them, and a client's name or URI back
to the upstream that owns it and the name that upstream knows.

Tools and prompts are renamed (`table.Route.exposed`); resources and resource templates keep the URIs their
server wrote and are routed by the index of who listed them (index.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from proxy.routes.table import Member, Route

# What each merged list carries, and the field of an entry that names it.
LISTS: Final = {
    "tools/list": ("tools", "name"),
    "prompts/list": ("prompts", "name"),
    "resources/list": ("resources", "uri"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate"),
}
RENAMED: Final = frozenset({"tools", "prompts"})  # the kinds whose names carry the prefix


@dataclass(frozen=True, slots=True)
class Entry:
    """One list entry as the route's client sees it, with where it came from."""

    kind: str  # "tools", "prompts", "resources", "resourceTemplates"
    key: str  # the name (exposed) or URI (as written) clients use
    member: Member
    local: str  # the name or URI the upstream knows
    item: Mapping[str, Any]  # the entry as the client gets it


def entries(route: Route, member: Member, method: str, result: Mapping[str, Any]) -> list[Entry]:
    """The entries of one upstream's page of `method`, renamed for the route. Entries without a string
    name (a server's bug) are left out: nothing could route a call to them."""
    kind, field = LISTS[method]
    items = result.get(kind)
    out: list[Entry] = []
    for item in items if isinstance(items, list) else ():
        local = item.get(field) if isinstance(item, dict) else None
        if not isinstance(local, str) or not local:
            continue
        key = route.exposed(member, local) if kind in RENAMED else local
        out.append(Entry(kind, key, member, local, {**item, field: key} if key != local else item))
    return out


def items(kept: Iterable[Entry]) -> list[Mapping[str, Any]]:
    return [entry.item for entry in kept]
