"""Tool policy: the route's globs on the names clients see, an upstream's on its own names, scopes."""

from __future__ import annotations

from types import MappingProxyType

from proxy.config import RouteMember, ToolPolicy
from proxy.routes.policy import Grant, judge

from .conftest import route


def test_allow_and_deny_on_the_route_match_the_names_clients_see() -> None:
    r = route("a", "b", tools=ToolPolicy(allow=("a__*", "b__echo"), deny=("a__delete_*",)))
    a, b = r.members
    assert judge(r, a, "a__read", "read", None) is None
    assert judge(r, b, "b__echo", "echo", None) is None
    refused = judge(r, b, "b__add", "add", None)
    assert refused is not None and refused.reason == "not_allowed"
    refused = judge(r, a, "a__delete_all", "delete_all", None)
    assert refused is not None and refused.reason == "denied"
    assert refused.message == "Tool 'a__delete_all' is not available on this route"


def test_an_upstreams_rules_match_its_own_names() -> None:
    r = route("a", RouteMember("b", prefix="x", tools=ToolPolicy(deny=("rm*",))))
    b = r.members[1]
    refused = judge(r, b, "x__rmdir", "rmdir", None)
    assert refused is not None and refused.reason == "denied"
    assert judge(r, b, "x__ls", "ls", None) is None


def test_scopes_per_tool_glob() -> None:
    rules = MappingProxyType({"a__admin_*": ("admin", "write"), "*": ("read",)})
    r = route("a", "b", tools=ToolPolicy(require_scopes=rules))
    a = r.members[0]
    assert judge(r, a, "a__admin_reset", "admin_reset", Grant(frozenset({"read", "admin", "write"}))) is None
    refused = judge(r, a, "a__admin_reset", "admin_reset", Grant(frozenset({"read", "admin"})))
    assert refused is not None and refused.reason == "insufficient_scope"
    assert "needs the scope write" in refused.message
    refused = judge(r, a, "a__list", "list", Grant())
    assert refused is not None and "read" in refused.message
    assert judge(r, a, "a__list", "list", Grant(frozenset({"read"}))) is None


def test_claims_per_tool_glob() -> None:
    rules = MappingProxyType(
        {"a__billing_*": MappingProxyType({"groups": ("finance",), "tenant": ("blue", "7")})}
    )
    r = route("a", "b", tools=ToolPolicy(require_claims=rules))
    a = r.members[0]
    finance = Grant(claims={"groups": ["staff", "finance"], "tenant": "blue"})
    assert judge(r, a, "a__billing_pay", "billing_pay", finance) is None
    assert (
        judge(r, a, "a__billing_pay", "billing_pay", Grant(claims={"groups": "finance", "tenant": 7})) is None
    )
    for claims in (
        {"groups": ["staff"], "tenant": "blue"},
        {"groups": ["finance"]},
        {"groups": [True], "tenant": True},
    ):
        refused = judge(r, a, "a__billing_pay", "billing_pay", Grant(claims=claims))
        assert refused is not None and refused.reason == "claim_mismatch"
    refused = judge(r, a, "a__billing_pay", "billing_pay", None)
    assert refused is not None and refused.message == (
        "Tool 'a__billing_pay' is not available to this access token (claim 'groups')"
    )
    assert judge(r, a, "a__read", "read", None) is None  # no rule matches


def test_a_route_without_rules_is_not_judged_and_one_with_any_rule_is() -> None:
    assert not route("a", "b").policed
    assert route("a", RouteMember("b", tools=ToolPolicy(deny=("x",)))).policed
    assert route("a", tools=ToolPolicy(allow=("a__*",))).policed
