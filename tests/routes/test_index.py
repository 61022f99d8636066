"""The name index: the first upstream in route order keeps a clashing key; URIs routed by templates."""

from __future__ import annotations

import pytest

from proxy.routes.index import MAX_VIEWS, IndexBook, NameIndex, template_pattern, view_of
from proxy.routes.names import entries

from .conftest import route


def test_first_in_route_order_keeps_a_clashing_name() -> None:
    r = route("a", "b", mode="never")
    index = NameIndex()
    kept = index.add(entries(r, r.members[0], "tools/list", {"tools": [{"name": "echo"}]}))
    kept += index.add(entries(r, r.members[1], "tools/list", {"tools": [{"name": "echo"}, {"name": "add"}]}))
    assert [(e.member.upstream, e.key) for e in kept] == [("a", "echo"), ("b", "add")]
    owner = index.owner("tools", "echo")
    assert owner is not None and owner.member.upstream == "a"
    assert [c.describe() for c in index.clashes] == ["tool 'echo' is listed by 'a' and 'b'; 'a' keeps it"]


def test_the_same_upstream_listing_a_key_twice_is_no_clash() -> None:
    r = route("a", "b")
    index = NameIndex()
    page = entries(r, r.members[0], "tools/list", {"tools": [{"name": "x"}]})
    index.add(page)
    assert index.add(page) == page and not index.clashes


def test_resources_by_uri_then_by_template() -> None:
    r = route("a", "b")
    index = NameIndex()
    index.add(entries(r, r.members[0], "resources/list", {"resources": [{"uri": "mem://x", "name": "x"}]}))
    templates = {"resourceTemplates": [{"uriTemplate": "file:///{path}", "name": "f"}]}
    index.add(entries(r, r.members[1], "resources/templates/list", templates))
    found = index.resource_owner("mem://x")
    assert found is not None and found.member.upstream == "a"
    found = index.resource_owner("file:///notes")
    assert found is not None and (found.member.upstream, found.key) == ("b", "file:///{path}")
    assert index.resource_owner("other://y") is None


def test_entries_without_a_name_are_left_out_and_uris_are_not_renamed() -> None:
    r = route("a", "b")
    got = entries(r, r.members[1], "resources/list", {"resources": [{"uri": "u://1"}, {"name": "no uri"}, 3]})
    assert [(e.key, e.local, dict(e.item)) for e in got] == [("u://1", "u://1", {"uri": "u://1"})]
    tools = entries(r, r.members[1], "tools/list", {"tools": [{"name": "t", "description": "d"}]})
    assert [dict(e.item) for e in tools] == [{"name": "b__t", "description": "d"}]


@pytest.mark.parametrize(
    ("template", "uri", "matches"),
    [
        ("file:///{path}", "file:///notes.txt", True),
        ("file:///{path}", "file:///dir/notes.txt", False),
        ("file:///{+path}", "file:///dir/notes.txt", True),
        ("test://static/resource/{id}", "test://static/resource/7", True),
        ("test://static/resource/{id}", "test://other/7", False),
        ("search://q{?term,limit}", "search://q?term=x&limit=2", True),
        ("search://q{?term}", "search://q", True),
        ("a.b://{x}", "aXb://1", False),  # literal parts are escaped
    ],
)
def test_template_patterns(template: str, uri: str, matches: bool) -> None:
    assert bool(template_pattern(template).fullmatch(uri)) is matches


def test_a_view_is_what_goes_to_each_upstream_in_route_order() -> None:
    alice = (("authorization", "Bearer a"),)
    bob = (("authorization", "Bearer b"),)
    assert view_of([alice, ()]) == view_of([alice, ()])
    assert len({view_of([alice, ()]), view_of([bob, ()]), view_of([(), alice]), view_of([(), ()])}) == 4
    assert "Bearer a" not in view_of([alice])  # a digest: the book holds no credential


def test_the_book_keeps_one_index_per_view_and_drops_the_least_recently_used() -> None:
    book = IndexBook()
    first = NameIndex()
    book.put("r", "tools/list", "v0", first, 1.0)
    for i in range(1, MAX_VIEWS):
        book.put("r", "tools/list", f"v{i}", NameIndex(), 1.0)
    assert book.get("r", "tools/list", "v0") == (first, 1.0)  # used: now the most recent
    assert book.get("r", "prompts/list", "v0") is None and book.get("other", "tools/list", "v0") is None
    book.put("r", "tools/list", "new", NameIndex(), 2.0)
    assert book.get("r", "tools/list", "v1") is None  # the least recently used went
    assert book.get("r", "tools/list", "v0") == (first, 1.0)


def test_a_changed_list_forgets_its_indexes_on_every_route_and_view() -> None:
    book = IndexBook()
    for name, method, view in (
        ("r1", "tools/list", "v1"),
        ("r2", "tools/list", "v2"),
        ("r1", "prompts/list", "v1"),
    ):
        book.put(name, method, view, NameIndex(), 0.0)
    book.forget(("tools/list",))
    assert book.get("r1", "tools/list", "v1") is None and book.get("r2", "tools/list", "v2") is None
    assert book.get("r1", "prompts/list", "v1") is not None
