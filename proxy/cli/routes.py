"""`check-config`'s view of the aggregated routes: what each serves, and with `--probe` the merged tool
names a client would see, read live from the upstreams (and any name clash, named as /readyz would)."""

from __future__ import annotations

from proxy.cli import glob_check
from proxy.cli.listing import DECLARED, list_upstreams
from proxy.config import Config, ToolPolicy
from proxy.routes.binding import bindings
from proxy.routes.index import NameIndex
from proxy.routes.names import LISTS, entries
from proxy.routes.policy import judge
from proxy.routes.table import RouteTable


def describe(config: Config) -> list[str]:
    """One line per route: its path, its upstreams in route order with their prefixes, its policy."""
    table = RouteTable.of(config)
    lines = []
    for route in table:
        paths = f"/servers/{route.name}/mcp" + (" and /mcp" if table.default == route.name else "")
        members = ", ".join(
            f"{m.upstream} ({m.prefix}{route.separator}*)" if route.prefixed else m.upstream
            for m in route.members
        )
        naming = (
            "prefixed names" if route.prefixed else "bare names (a clash: the first in route order keeps it)"
        )
        lines.append(f"route {route.name}: {paths} -> {members}; {naming}{_policy(route.policy)}")
    return lines


def describe_bindings(config: Config) -> list[str]:
    """One line per (route, member) pair: whether a 2026-07-28 upstream's requestState and task ids are
    sealed to the principal there (routes/binding.py), and why."""
    lines = []
    for b in bindings(config):
        path = f"/servers/{b.route or b.upstream}/mcp"
        verdict = "bound to the principal" if b.bound else "passed as the upstream gives them"
        lines.append(f"binding {path} -> {b.upstream}: requestState and task ids {verdict} ({b.why})")
    return lines


def _policy(policy: ToolPolicy) -> str:
    rules = glob_check.rules_text(policy)  # the same words as a member's own rules
    return f"; tools: {rules}" if rules else ""


async def probe(config: Config) -> tuple[list[str], bool]:
    """Each upstream's era and lists, read live in its era (cli/listing.py), then each route's merged tool
    names with the tool policy applied (token rules shown, not applied), and every clash of tools, prompts,
    resources and templates named. False when an upstream could not be listed or its `era` is wrong."""
    listed = await list_upstreams(list(config.upstreams))
    lines = [f"listed as a client that declares {DECLARED}, as real clients do"]
    ok = True
    for up in config.upstreams:
        found = listed[up.name]
        if found.wrong_era is not None:
            lines.append(found.wrong_era)
        elif found.problem is not None:
            lines.append(f"upstream {up.name}: could not be listed: {found.problem}")
        else:
            how = "with 2026-07-28 requests" if found.modern else "over a legacy session"
            tools = len(found.lists["tools/list"]["tools"]) if found.lists else 0
            lines.append(f"upstream {up.name}: era {found.era}, listed {how}: {tools} tools")
        ok = ok and found.problem is None
    # each upstream's lists, or why it could not be listed: what the glob check judges the policy against
    lists_of = {
        name: got.lists if got.lists is not None else (got.problem or "") for name, got in listed.items()
    }
    for route in RouteTable.of(config):
        index = NameIndex()
        merged: list[str] = []
        for method in LISTS:
            for member in route.members:
                lists = listed[member.upstream].lists
                if lists is None:
                    if method == "tools/list":
                        lines.append(
                            f"route {route.name}: upstream {member.upstream} could not be listed: "
                            f"{listed[member.upstream].problem}"
                        )
                    continue
                for entry in index.add(entries(route, member, method, lists[method])):
                    refused = judge(route, member, entry.key, entry.local, None)
                    if method != "tools/list":
                        continue
                    if refused is None:
                        merged.append(entry.key)
                    elif refused.reason in ("insufficient_scope", "claim_mismatch"):
                        merged.append(f"{entry.key} (token rule)")
        lines.append(f"route {route.name}: {len(merged)} tools: {', '.join(merged)}")
        lines += [f"route {route.name}: clash: {clash.describe()}" for clash in index.clashes]
        lines += glob_check.probed(route, lists_of)  # a policy glob that matches no tool: a warning
    return lines, ok
