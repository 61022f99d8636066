"""Who owns a name: the index of a route's merged lists (which upstream listed which tool, prompt, resource
URI and resource template), and the clashes it found.

Tools and prompts of a prefixing route are routed by their prefix alone (table.Route.split); the index
routes the rest: bare names (prefix_mode never, or one upstream), resource URIs (exact, then by the
templates each upstream listed) and completion references. Two upstreams claiming one key is a clash:
the first in route order keeps it, and the clash is recorded naming both.

What a route's upstreams list can differ between clients: each is asked with what goes to it of the
client (its token, in validate mode by default, or its forwarded headers; the claim headers), and an
upstream that refuses one client's credentials is left out of that client's lists only. So an index is
kept per view (`view_of`): clients the upstreams cannot tell apart share one, and one client's lists never
decide where another's calls go. `IndexBook` keeps them, a bounded number per route and list.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from proxy.routes.names import Entry

MAX_KEYS = 50_000  # per route: a server listing more than this is not indexed past it (counted as dropped)
MAX_VIEWS = 256  # indexes kept per route and list, one per view: the least recently used is dropped past it


@dataclass(frozen=True, slots=True)
class Clash:
    """`key` of `kind` is listed by `kept` and `dropped` (upstream names): `kept` is first in route order."""

    kind: str
    key: str
    kept: str
    dropped: str

    def describe(self) -> str:
        noun = {"resourceTemplates": "resource template"}.get(self.kind, self.kind.rstrip("s"))
        return f"{noun} {self.key!r} is listed by {self.kept!r} and {self.dropped!r}; {self.kept!r} keeps it"


@dataclass(slots=True)
class NameIndex:
    """Built from the merged lists of one route (every page of every reachable upstream)."""

    _owners: dict[tuple[str, str], Entry] = field(default_factory=dict)
    _templates: list[tuple[re.Pattern[str], Entry]] = field(default_factory=list)
    clashes: list[Clash] = field(default_factory=list)
    dropped: int = 0

    def add(self, entries: Iterable[Entry]) -> list[Entry]:
        """Index `entries` (in route order); returns those that are now the owners of their key (a later
        upstream's entry for a key already owned is a clash and is not returned)."""
        kept = []
        for entry in entries:
            slot = (entry.kind, entry.key)
            first = self._owners.get(slot)
            if first is not None:
                if first.member.index != entry.member.index:
                    clash = Clash(entry.kind, entry.key, first.member.upstream, entry.member.upstream)
                    if clash not in self.clashes:
                        self.clashes.append(clash)
                    continue
                kept.append(entry)  # the same upstream listing it again (a later page)
                continue
            if len(self._owners) >= MAX_KEYS:
                self.dropped += 1
                continue
            self._owners[slot] = entry
            if entry.kind == "resourceTemplates":
                self._templates.append((template_pattern(entry.key), entry))
            kept.append(entry)
        return kept

    def owner(self, kind: str, key: str) -> Entry | None:
        return self._owners.get((kind, key))

    def resource_owner(self, uri: str) -> Entry | None:
        """The upstream that listed `uri`, else the first (in route order) whose template matches it."""
        found = self._owners.get(("resources", uri))
        if found is not None:
            return found
        matches = [entry for pattern, entry in self._templates if pattern.fullmatch(uri)]
        return min(matches, key=lambda e: e.member.index) if matches else None

    def __len__(self) -> int:
        return len(self._owners)


def view_of(sent: Iterable[tuple[tuple[str, str], ...]]) -> str:
    """A digest of what a client's requests carry to each upstream of a route (in route order): clients
    with the same view are the same client to every upstream, so they share an index."""
    return hashlib.sha256(json.dumps([list(map(list, headers)) for headers in sent]).encode()).hexdigest()


@dataclass(slots=True)
class IndexBook:
    """The indexes of the routes' lists, by route, list method and view, each with when it was built (the
    caller's clock); at most MAX_VIEWS per route and method, the least recently used dropped."""

    _held: dict[tuple[str, str], OrderedDict[str, tuple[NameIndex, float]]] = field(default_factory=dict)

    def get(self, route: str, method: str, view: str) -> tuple[NameIndex, float] | None:
        views = self._held.get((route, method))
        held = views.get(view) if views is not None else None
        if views is not None and held is not None:
            views.move_to_end(view)
        return held

    def forget(self, methods: Iterable[str]) -> None:
        """The indexes of these lists, on every route and view: an upstream said one of them changed."""
        gone = set(methods)
        for held in [held for held in self._held if held[1] in gone]:
            del self._held[held]

    def put(self, route: str, method: str, view: str, index: NameIndex, built: float) -> None:
        views = self._held.setdefault((route, method), OrderedDict())
        views[view] = (index, built)
        views.move_to_end(view)
        while len(views) > MAX_VIEWS:
            views.popitem(last=False)


_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")


def template_pattern(template: str) -> re.Pattern[str]:
    """An RFC 6570 URI template as a regular expression matching the URIs it expands to: a simple `{var}`
    matches one path segment, a reserved `{+var}` / fragment `{#var}` anything, the other operators
    their prefix and what follows."""
    out, last = [], 0
    for m in _EXPRESSION.finditer(template):
        out.append(re.escape(template[last : m.start()]))
        op = m.group(1)
        if op == "":
            out.append(r"[^/?#]*")
        elif op == "+":
            out.append(r".*")
        else:  # an operator expands to itself and what follows, or to nothing when undefined
            out.append(f"(?:{re.escape(op)}.*)?" if op == "#" else f"(?:{re.escape(op)}[^#]*)?")
        last = m.end()
    out.append(re.escape(template[last:]))
    return re.compile("".join(out), re.DOTALL)
