"""The route table: prefixing by mode, the longest prefix winning, the default route."""

from __future__ import annotations

from pathlib import Path

from proxy.config import RouteMember, load_config
from proxy.routes.table import RouteTable

from .conftest import route


def test_conditional_prefixes_only_with_several_upstreams() -> None:
    two, one = route("a", "b"), route("a")
    assert two.prefixed and not one.prefixed
    assert two.exposed(two.members[1], "echo") == "b__echo"
    assert one.exposed(one.members[0], "echo") == "echo"


def test_always_and_never() -> None:
    assert route("a", mode="always").exposed(route("a").members[0], "x") == "a__x"
    never = route("a", "b", mode="never")
    assert never.exposed(never.members[1], "x") == "x"
    assert never.split("x") is None  # bare names: the index routes them


def test_split_gives_the_member_and_the_upstreams_own_name() -> None:
    r = route("a", RouteMember("b", prefix="files"), separator=".")
    member, local = r.split("files.read.all") or (None, None)
    assert member is not None and (member.upstream, local) == ("b", "read.all")
    assert r.split("zzz.read") is None
    assert r.split("files.") is None  # a prefix and nothing else names no tool


def test_the_longest_prefix_wins() -> None:
    r = route(RouteMember("a", prefix="x"), RouteMember("b", prefix="x__y"))
    member, local = r.split("x__y__tool") or (None, None)
    assert member is not None and (member.upstream, local) == ("b", "tool")
    member, local = r.split("x__z") or (None, None)
    assert member is not None and (member.upstream, local) == ("a", "z")


def test_table_from_config(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "upstreams: [{name: a, url: 'http://127.0.0.1:1/mcp'}, {name: b, command: x}]\n"
        "routes: [{name: all, default: true, upstreams: [a, b]}, {name: solo, upstreams: [b]}]\n"
    )
    table = RouteTable.of(load_config(path, env={}))
    assert table.default == "all"
    assert "solo" in table and "a" not in table
    assert [r.name for r in table] == ["all", "solo"]
    solo = table.get("solo")
    assert solo is not None and solo.upstreams == ("b",) and not solo.prefixed
