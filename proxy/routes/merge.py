"""One page of a merged list, from the pages its upstreams answered.

A route's list is its upstreams' lists concatenated in route order. A page starts where the client's
cursor says (an upstream, and that upstream's own cursor) and takes every entry up to and including the
first upstream page that has a `nextCursor`; the proxy's `nextCursor` then names that upstream and its
cursor (cursor.py). An upstream that failed or was too slow is left out of the page (the front logs and
counts it) and the page goes on past it: one server down never fails the list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.routes.cursor import ListPosition
from proxy.routes.index import NameIndex
from proxy.routes.names import LISTS, Entry, entries
from proxy.routes.table import Member, Route


@dataclass(frozen=True, slots=True)
class Answered:
    """What one upstream answered for its page: the result, or why there is none (`failed`)."""

    member: Member
    result: Mapping[str, Any] | None
    failed: str | None = None  # "timeout", "unavailable", "error:<code>"


@dataclass(slots=True)
class Page:
    items: list[Mapping[str, Any]] = field(default_factory=list)
    next: ListPosition | None = None
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (upstream, why)
    index: NameIndex = field(default_factory=NameIndex)  # this page's entries; its clashes

    def result(self, kind: str, cursor: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {kind: self.items}
        if cursor is not None:
            out["nextCursor"] = cursor
        return out


def pending(route: Route, start: ListPosition) -> list[tuple[Member, str | None]]:
    """The upstreams a page starting at `start` may need, in route order, each with its cursor."""
    return [(m, start.cursor if m.index == start.member else None) for m in route.members[start.member :]]


def assemble(
    route: Route, method: str, answered: Sequence[Answered], keep: Callable[[Entry], bool] = lambda _: True
) -> Page:
    """The page from `answered` (the upstreams `pending` named, in that order). `keep` filters entries
    (tool policy); a key two upstreams list goes to the first (a clash, in `page.index.clashes`)."""
    page = Page()
    for one in answered:
        if one.result is None:
            page.left_out.append((one.member.upstream, one.failed or "unavailable"))
            continue
        kept = page.index.add(entries(route, one.member, method, one.result))
        page.items += [entry.item for entry in kept if keep(entry)]
        more = one.result.get("nextCursor")
        if isinstance(more, str) and more:
            page.next = ListPosition(one.member.index, more)
            break
    return page


def list_kind(method: str) -> str:
    return LISTS[method][0]
