"""`check-config` on aggregated routes: each route described, and with --probe its merged tool names and any
name clash, read live from real servers (FastMCP 1.30 and server-everything both have `echo`)."""

from __future__ import annotations

import sys
from pathlib import Path

import peers
import pytest

from proxy.cli import glob_check
from proxy.cli.main import main


def write(tmp_path: Path, fast: str, everything: str, mode: str) -> Path:
    path = tmp_path / "proxy.yaml"
    path.write_text(
        f"upstreams: [{{name: fast, url: '{fast}'}}, {{name: everything, url: '{everything}'}}]\n"
        f"routes:\n  - {{name: fleet, default: true, prefix_mode: {mode}, upstreams: [fast, everything],\n"
        "     tools: {deny: ['*ask_*'], require_scopes: {}}}\n"
    )
    return path


def test_check_config_describes_each_route(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "check-config",
                str(write(tmp_path, "http://127.0.0.1:1/mcp", "http://127.0.0.1:2/mcp", "always")),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "-> /servers/fast/mcp," in out  # the default route has /mcp now
    route = "route fleet: /servers/fleet/mcp and /mcp -> fast (fast__*), everything (everything__*)"
    assert f"{route}; prefixed names; tools: deny ['*ask_*']" in out


@pytest.mark.peers
@pytest.mark.asyncio(loop_scope="session")
async def test_probe_prints_merged_names_and_the_clash(
    tmp_path: Path, fastmcp_url: str, server_everything_url: str
) -> None:
    path = write(tmp_path, fastmcp_url, server_everything_url, "never")
    run = await peers.run_once(
        [sys.executable, "-m", "proxy", "check-config", str(path), "--probe"], limit_s=90
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = [line for line in run.stdout.splitlines() if line.startswith("route fleet: ")]
    merged = next(line for line in lines if " tools: " in line and "->" not in line)
    names = merged.split(" tools: ", 1)[1].split(", ")
    assert names[0] == "echo" and names.count("echo") == 1  # FastMCP's: first in route order
    assert "get-sum" in names and "ask_name" not in names  # deny applies
    clashes = [line for line in lines if ": clash: " in line]  # tools, prompts, resources, templates
    assert clashes == [
        "route fleet: clash: tool 'echo' is listed by 'fast' and 'everything'; 'fast' keeps it"
    ]


@pytest.mark.peers
@pytest.mark.asyncio(loop_scope="session")
async def test_probe_fails_when_an_upstream_cannot_be_listed(tmp_path: Path, fastmcp_url: str) -> None:
    path = write(tmp_path, fastmcp_url, f"http://127.0.0.1:{peers.closed_port()}/mcp", "conditional")
    run = await peers.run_once(
        [sys.executable, "-m", "proxy", "check-config", str(path), "--probe"], limit_s=90
    )
    assert run.returncode == 1
    assert "route fleet: upstream everything could not be listed:" in run.stdout
    assert "fast__echo" in run.stdout  # the rest is still shown


def test_check_config_says_which_route_and_member_pairs_bind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: one line per (route, member) pair, decided by what that route sends upstream: the member
    that passes the client's token on its own route is bound on a route that sends a service credential."""
    token = tmp_path / "svc-token"
    token.write_text("svc\n")
    keys = "jwks_url: 'http://127.0.0.1:3/jwks', authorization_servers: ['https://as']"
    path = tmp_path / "proxy.yaml"
    path.write_text(
        "upstreams: [{name: mod, url: 'http://127.0.0.1:1/mcp'}, {name: raw, url: 'http://127.0.0.1:2/mcp',"
        " forward_headers: []}]\n"
        "routes:\n"
        f"  - {{name: team, upstreams: [mod, raw], auth: {{mode: validate, {keys},"
        " public_url: 'https://x/servers/team/mcp',"
        f" upstream_credential: {{source: file, file: '{token}'}}}}}}\n"
        "  - {name: open, upstreams: [mod, raw]}\n"
    )
    assert main(["check-config", str(path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("binding ")]
    bound, passed = "requestState and task ids bound to the principal", "requestState and task ids passed"
    assert lines == [
        f"binding /servers/mod/mcp -> mod: {passed} as the upstream gives them (the client's own token goes"
        " upstream)",
        f"binding /servers/raw/mcp -> raw: {bound} (the client's Authorization is not forwarded)",
        f"binding /servers/team/mcp -> mod: {bound} (the upstream gets the file credential, not the client's"
        " token)",
        f"binding /servers/team/mcp -> raw: {bound} (the upstream gets the file credential, not the client's"
        " token)",
        f"binding /servers/open/mcp -> mod: {passed} as the upstream gives them (the client's own token goes"
        " upstream)",
        f"binding /servers/open/mcp -> raw: {bound} (the client's Authorization is not forwarded)",
    ]


def write_policed(tmp_path: Path, fast: str, everything: str) -> Path:
    """Issue 45 item 5: globs with typos, of the route and of a member, and ones that match."""
    keys = "jwks_url: 'http://127.0.0.1:3/jwks', authorization_servers: ['https://as']"
    path = tmp_path / "policed.yaml"
    path.write_text(
        f"upstreams: [{{name: fast, url: '{fast}'}}, {{name: everything, url: '{everything}'}}]\n"
        "routes:\n"
        "  - name: fleet\n"
        f"    auth: {{mode: validate, {keys}, public_url: 'https://x/servers/fleet/mcp'}}\n"
        "    upstreams:\n"
        "      - fast\n"
        "      - {upstream: everything, tools: {allow: ['get-*', 'echoo'], deny: ['get-sum', 'get-summ*']}}\n"
        "    tools:\n"
        "      deny: ['*ask_*', 'fast__ask_nmae']\n"
        "      require_scopes: {'fast__nothing*': [admin], 'fast__echo': [read]}\n"
        "      require_claims: {'zzz*': {groups: [ops]}}\n"
    )
    return path


def test_check_config_prints_a_members_own_rules_and_says_globs_were_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The member's own deny was not printed (only the route's), and no glob was checked, silently."""
    path = write_policed(tmp_path, "http://127.0.0.1:1/mcp", "http://127.0.0.1:2/mcp")
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        "route fleet: member everything: tools (its own names): allow ['get-*', 'echoo'], "
        "deny ['get-sum', 'get-summ*']"
    ) in out
    assert out.count(glob_check.NOT_CHECKED) == 1
    assert not [line for line in out if line.startswith("warning:")]


@pytest.mark.peers
@pytest.mark.asyncio(loop_scope="session")
async def test_probe_warns_of_each_glob_that_matches_no_tool(
    tmp_path: Path, fastmcp_url: str, server_everything_url: str
) -> None:
    """Issue 45 item 5: a deny glob with a typo was accepted silently, even by --probe, which printed the
    tool right under the rule meant to hide it. Now each glob that matches nothing is one warning line
    naming the route, the member and the setting; the globs that match say nothing."""
    path = write_policed(tmp_path, fastmcp_url, server_everything_url)
    run = await peers.run_once(
        [sys.executable, "-m", "proxy", "check-config", str(path), "--probe"], limit_s=90
    )
    assert run.returncode == 0, run.stderr[-2000:]
    warnings = [line for line in run.stdout.splitlines() if line.startswith("warning:")]
    route = "warning: route fleet: routes.fleet.tools"
    member = "warning: route fleet: member everything: routes.fleet.upstreams.1.tools"
    assert warnings == [
        f"{route}.deny glob 'fast__ask_nmae' matches no tool of the route (globs match the names clients"
        " see)",
        f"{route}.require_scopes glob 'fast__nothing*' matches no tool of the route (globs match the names"
        " clients see)",
        f"{route}.require_claims glob 'zzz*' matches no tool of the route (globs match the names clients"
        " see)",
        f"{member}.allow glob 'echoo' matches no tool everything lists (a member's globs match its server's"
        " own names)",
        f"{member}.deny glob 'get-summ*' matches no tool everything lists (a member's globs match its"
        " server's own names)",
    ]
    assert glob_check.NOT_CHECKED not in run.stdout
    assert "ask_name" not in run.stdout.split("tools: ")[-1]  # the rules still apply as before
