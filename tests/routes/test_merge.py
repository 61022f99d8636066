"""A merged page: route order, the page ends at the first upstream that has more, failures left out."""

from __future__ import annotations

from proxy.routes.cursor import ListPosition
from proxy.routes.merge import Answered, assemble, pending

from .conftest import route


def tools(*names: str, more: str | None = None) -> dict[str, object]:
    out: dict[str, object] = {"tools": [{"name": n} for n in names]}
    if more:
        out["nextCursor"] = more
    return out


def test_pages_concatenate_in_route_order_until_one_has_more() -> None:
    r = route("a", "b", "c")
    a, b, c = r.members
    page = assemble(
        r,
        "tools/list",
        [Answered(a, tools("x")), Answered(b, tools("y", more="b2")), Answered(c, tools("z"))],
    )
    assert [t["name"] for t in page.items] == ["a__x", "b__y"]
    assert page.next == ListPosition(1, "b2")
    assert page.result("tools", "sealed") == {"tools": page.items, "nextCursor": "sealed"}


def test_pending_starts_at_the_cursor() -> None:
    r = route("a", "b", "c")
    assert [(m.upstream, c) for m, c in pending(r, ListPosition(1, "b2"))] == [("b", "b2"), ("c", None)]
    assert [m.upstream for m, _ in pending(r, ListPosition(0))] == ["a", "b", "c"]


def test_an_upstream_that_failed_is_left_out_and_the_rest_answered() -> None:
    r = route("a", "b", "c")
    a, b, c = r.members
    page = assemble(
        r, "tools/list", [Answered(a, None, "timeout"), Answered(b, tools("y")), Answered(c, tools("z"))]
    )
    assert [t["name"] for t in page.items] == ["b__y", "c__z"]
    assert page.left_out == [("a", "timeout")] and page.next is None


def test_never_mode_clash_first_wins_and_policy_filters() -> None:
    r = route("a", "b", mode="never")
    a, b = r.members
    page = assemble(
        r,
        "tools/list",
        [Answered(a, tools("echo", "secret")), Answered(b, tools("echo", "add"))],
        keep=lambda e: e.key != "secret",
    )
    assert [t["name"] for t in page.items] == ["echo", "add"]
    assert [(c.kept, c.dropped) for c in page.index.clashes] == [("a", "b")]
