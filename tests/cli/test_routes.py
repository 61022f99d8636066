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


def _upstream_line(stdout: str, name: str) -> str:
    """The --probe line of upstream `name` (not the description's, which names its /servers/ path)."""
    (line,) = [
        line
        for line in stdout.splitlines()
        if line.startswith(f"upstream {name}: ") and "/servers/" not in line
    ]
    return line


@pytest.mark.peers
@pytest.mark.asyncio(loop_scope="session")
async def test_probe_lists_a_mixed_fleet_each_in_its_era(tmp_path: Path, fastmcp_url: str) -> None:
    """A 2026-07-28-only upstream (the mcp 2.3.0 server) is listed with 2026-07-28 requests, so a mixed
    route's merged names and clashes are right (before: "initialize failed … speaks MCP 2026-07-28 only",
    exit 1, even under era: modern)."""
    async with peers.start_mcp2_server() as modern:
        path = tmp_path / "proxy.yaml"
        path.write_text(
            f"upstreams: [{{name: fast, url: '{fastmcp_url}'}}, "
            f"{{name: new, url: '{modern}', era: modern}}]\n"
            "routes:\n  - {name: fleet, prefix_mode: never, upstreams: [new, fast]}\n"
        )
        run = await peers.run_once(
            [sys.executable, "-m", "proxy", "check-config", str(path), "--probe"], limit_s=90
        )
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert (
        _upstream_line(run.stdout, "new")
        == "upstream new: era modern, listed with 2026-07-28 requests: 6 tools"
    )
    assert _upstream_line(run.stdout, "fast").startswith(
        "upstream fast: era legacy, listed over a legacy session"
    )
    assert "route fleet: clash: tool 'echo' is listed by 'new' and 'fast'; 'new' keeps it" in run.stdout
    merged = next(
        line for line in run.stdout.splitlines() if line.startswith("route fleet: ") and " tools: " in line
    )
    assert "guard_name" in merged and "ask_name" in merged  # each side's own tools


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
async def test_probe_names_each_wrong_era_setting_in_one_line(tmp_path: Path, fastmcp_url: str) -> None:
    """A legacy server under era: modern (before: it passed, and every call then failed with "Missing session
    ID") and a 2026-07-28-only server under era: legacy (before: four refusals of initialize, the setting
    never named): one line each, naming the setting; exit 1."""
    async with peers.start_mcp2_server() as modern:
        path = tmp_path / "proxy.yaml"
        path.write_text(
            f"upstreams: [{{name: old, url: '{fastmcp_url}', era: modern}}, "
            f"{{name: new, url: '{modern}', era: legacy}}]\n"
        )
        run = await peers.run_once(
            [sys.executable, "-m", "proxy", "check-config", str(path), "--probe"], limit_s=90
        )
    assert run.returncode == 1
    old = _upstream_line(run.stdout, "old")
    assert old.startswith(
        "upstream old: era: modern is set, but it is a legacy MCP server (server/discover answered HTTP 400"
    )
    assert old.endswith("so every request sent to it the 2026-07-28 way fails: set era: auto (or legacy)")
    assert _upstream_line(run.stdout, "new") == (
        "upstream new: era: legacy is set, but it speaks MCP 2026-07-28 only (server/discover answered, "
        "supportedVersions 2026-07-28; initialize refused), so no legacy session opens: "
        "set era: auto (or modern)"
    )
    assert "initialize failed" not in run.stdout


@pytest.mark.peers
@pytest.mark.asyncio(loop_scope="session")
async def test_probe_lists_as_a_real_client_declares(tmp_path: Path, server_everything_url: str) -> None:
    """server-everything registers five of its tools only for a client that declares roots, elicitation
    (form; url for one more) and sampling: listed as a client that declares them all (and said so), it shows
    17 tools (before: 12, as a client declaring nothing)."""
    path = tmp_path / "proxy.yaml"
    path.write_text(f"upstreams: [{{name: everything, url: '{server_everything_url}'}}]\n")
    run = await peers.run_once(
        [sys.executable, "-m", "proxy", "check-config", str(path), "--probe"], limit_s=90
    )
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert (
        "listed as a client that declares elicitation, sampling and roots, as real clients do" in run.stdout
    )
    assert _upstream_line(run.stdout, "everything") == (
        "upstream everything: era legacy, listed over a legacy session: 17 tools"
    )


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
