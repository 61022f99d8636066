"""The migration report (issue 44) over a mixed fleet and a mixed client population (migration_fleet.py):
every figure and every verdict of `GET /admin/migration` against what was sent, on one replica; the same
summed over three replicas by `mrtr-proxy migration` (JSON and table); and the admin page in headless
Chromium showing the same numbers as the JSON."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import RawClient
from e2e.migration_fleet import (
    EXPECTED,
    LEGACY_CLIENTS,
    PARKED,
    STATES,
    TOKEN,
    Replica,
    drive,
    replica,
    report,
    verdict_texts,
)
from e2e.replicas import cluster, url_of
from e2e.test_browser import browser_python, require_browser
from proxy.migration.report import combine
from proxy.migration.tally import PATHS
from proxy.migration.verdict import ago, span

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

SERIES = r"^mrtr_proxy_migration_(calls|asked)_total\{([^}]*)\} (\S+)$"
PAGE_DRIVER = Path(__file__).resolve().parent / "clients" / "admin_page_driver.py"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fleet(fastmcp_url: str) -> AsyncIterator[tuple[str, str, str]]:
    async with peers.start_fastmcp4() as fastmcp4, peers.start_mcp2_server() as mcp2:
        yield fastmcp_url, fastmcp4, mcp2


def timeless(text: str) -> str:
    """A verdict without its stretches of time ("last 3 minutes ago", "for 2 hours", "in 5 seconds")."""
    return re.sub(r"(last|for|in) (just now|\d+ \w+( ago)?)", r"\1 …", text)


def check(got: dict[str, Any], times: int) -> None:
    """Every figure of `got` (a report) is `times` the plan's, and every verdict the plan's."""
    now = got["now"]
    seen = span(max(0.0, now - got["started_at"]))
    last: dict[str, str] = {}
    for name, tools in EXPECTED.items():
        up = got["upstreams"][name]
        for tool, fig in up["tools"].items():
            calls, asked = tools.get(tool, ((0, 0, 0, 0), (0, 0, 0, 0)))
            for scope in ("life", "last_24h", "last_7d", "window"):
                assert [fig[scope]["calls"][p] for p in PATHS] == [times * n for n in calls], (name, tool)
                assert [fig[scope]["asked"][p] for p in PATHS] == [times * n for n in asked], (name, tool)
                assert fig[scope]["by_client_era"] == {
                    "2026-07-28": times * (calls[0] + calls[1]),
                    "legacy": times * (calls[2] + calls[3]),
                }
            assert (fig["inline"] is not None) == (asked[0] > 0), (name, tool)
        assert set(tools) <= set(up["tools"]), name
        total = sum(sum(c) for c, _ in tools.values())
        assert up["life"]["total"] == times * total
        assert up["legacy_clients"] == {k: times * n for k, n in LEGACY_CLIENTS.get(name, {}).items()}
        assert up["parked_calls"] == times * PARKED.get(name, 0)
        assert up["verdict"]["state"] == STATES[name]
        inline = [t["inline"]["last_seen"] for t in up["tools"].values() if t["inline"]]
        if inline:
            last[name] = ago(now - max(inline))
    assert got["upstreams"]["legacy"]["era"] == "legacy"
    assert got["upstreams"]["twoera"]["era"] == "both"  # FastMCP 4.2.3 answers discover and initialize
    assert {got["upstreams"][n]["era"] for n in ("modern", "memory", "quiet")} == {"modern"}
    assert got["upstreams"]["twoera"]["legacy_tools"] == {"listed": ["ask_name"], "learned": ["summarize"]}
    expected = verdict_texts(seen, last, times)
    assert {n: got["upstreams"][n]["verdict"]["text"] for n in EXPECTED} == expected


async def test_one_replica_counts_every_call_by_path_and_judges_each_upstream(
    fleet: tuple[str, str, str],
) -> None:
    async with replica(*fleet) as r, aiohttp.ClientSession() as http:
        await drive(r)
        got = await report(http, r.admin)
        check(got, 1)
        async with http.get(f"{r.admin}/admin/migration") as refused:  # the report is behind the token
            assert refused.status == 401
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with http.get(f"{r.admin}/metrics", headers=headers) as scraped:
            exposition = await scraped.text()
    # Prometheus: the same life counts, every tool "other" (none is in metrics.tools: bounded labels)
    series = {
        (m["upstream"], m["tool"], m["client_era"], m["path"], kind): float(value)
        for kind, m, value in (
            (found[1], dict(re.findall(r'(\w+)="([^"]*)"', found[2])), found[3])
            for found in re.finditer(
                r"^mrtr_proxy_migration_(calls|asked)_total\{([^}]*)\} (\S+)$", exposition, re.M
            )
        )
    }
    assert {key[1] for key in series} == {"other"}
    for name in EXPECTED:
        life = got["upstreams"][name]["life"]
        for path in PATHS:
            era = "legacy" if path in ("mirrored", "passthrough") else "2026-07-28"
            assert series[(name, "other", era, path, "calls")] == life["calls"][path]
            assert series[(name, "other", era, path, "asked")] == life["asked"][path]


@contextlib.asynccontextmanager
async def three(fleet: tuple[str, str, str]) -> AsyncIterator[list[Replica]]:
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(replica(*fleet)) for _ in range(3)]


async def test_three_replicas_summed_by_the_cli(fleet: tuple[str, str, str], tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN)
    async with three(fleet) as replicas:
        for r in replicas:
            await drive(r)
        admins = ",".join(r.admin for r in replicas)
        argv = [
            sys.executable,
            "-m",
            "proxy",
            "migration",
            "--admin",
            admins,
            "--token-file",
            str(token_file),
        ]
        as_json = await peers.run_once([*argv, "--json"], limit_s=60)
        assert as_json.returncode == 0, as_json.stderr
        summed = json.loads(as_json.stdout)
        assert len(summed["replicas"]) == 3
        check(summed, 3)
        as_table = await peers.run_once(argv, limit_s=60)
        assert as_table.returncode == 0, as_table.stderr
    (tmp_path / "migration-table.txt").write_text(as_table.stdout)
    lines = as_table.stdout.splitlines()
    assert lines[0].startswith("3 replica(s); window: last 168 h")
    for name in EXPECTED:
        at = lines.index(next(line for line in lines if line.startswith(f"upstream {name}:")))
        # the table is a second run, a moment later: its times may have moved on
        assert timeless(lines[at + 1]) == timeless(
            f"  verdict: {summed['upstreams'][name]['verdict']['text']}"
        )
    at = lines.index(next(line for line in lines if line.startswith("upstream modern:")))
    row = next(line.split() for line in lines[at:] if line.startswith("  echo "))
    assert row[1:6] == [
        "0",
        "12",
        "6",
        "0",
        "0",
    ]  # modern's echo: adapted, relayed, mirrored, passthrough, asked


async def test_a_replica_that_cannot_be_reached_is_named_and_left_out(
    fleet: tuple[str, str, str], tmp_path: Path
) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN)
    async with replica(*fleet) as r:
        gone = f"http://127.0.0.1:{peers.closed_port()}"
        argv = [sys.executable, "-m", "proxy", "migration", "--admin", f"{r.admin},{gone}"]
        run = await peers.run_once([*argv, "--token-file", str(token_file), "--json"], limit_s=60)
    assert run.returncode == 1
    assert f"{gone}: unreachable" in run.stderr and "left out of the sum" in run.stderr
    assert len(json.loads(run.stdout)["replicas"]) == 1


async def page_of(admin: str, shot: Path, others: str = "") -> dict[str, Any]:
    """What the admin page shows in Chromium (its screenshot saved at `shot`)."""
    fragment = f"#token={TOKEN}" + (f"&replicas={others}" if others else "")
    run = await peers.run_once(
        [str(browser_python()), str(PAGE_DRIVER), f"{admin}/admin/{fragment}", str(shot)], limit_s=120
    )
    assert run.returncode == 0 and not run.timed_out, run.stderr[-4000:]
    page: dict[str, Any] = json.loads(run.stdout)
    assert shot.stat().st_size > 10_000  # noqa: ASYNC240 - one stat: the screenshot, in the tmp_path
    return page


def same_numbers(page: dict[str, Any], got: dict[str, Any]) -> None:
    assert sorted(page["upstreams"]) == sorted(got["upstreams"])
    for name, shown in page["upstreams"].items():
        up = got["upstreams"][name]
        assert timeless(shown["verdict"]) == timeless(up["verdict"]["text"])  # read a moment apart
        assert shown["parked"] == str(up["parked_calls"])
        assert sorted(shown["inline"]) == sorted(t for t, f in up["tools"].items() if f["inline"])
        for scope in ("last_24h", "last_7d", "life"):
            fig = up[scope]
            want = {p: str(fig["calls"][p]) for p in PATHS}
            want.update({"2026-07-28": str(fig["by_client_era"]["2026-07-28"])})
            want.update({"legacy": str(fig["by_client_era"]["legacy"]), "total": str(fig["total"])})
            assert shown["cells"][scope] == want, (name, scope)


async def test_the_admin_page_shows_the_json_s_numbers_in_chromium(
    fleet: tuple[str, str, str], tmp_path: Path
) -> None:
    require_browser()
    async with replica(*fleet) as r, aiohttp.ClientSession() as http:
        await drive(r)
        page = await page_of(r.admin, tmp_path / "admin-page.png")
        got = await report(http, r.admin)
    assert page["replicas"] == "1"
    same_numbers(page, got)


async def test_the_admin_page_sums_the_replicas_it_is_given(
    fleet: tuple[str, str, str], tmp_path: Path
) -> None:
    """The page of one replica, given two more (and one that is gone), reads theirs across origins with the
    token, has its own replica sum them, and shows the same numbers as the sum of the three reports."""
    require_browser()
    gone = f"http://127.0.0.1:{peers.closed_port()}"
    async with three(fleet) as replicas, aiohttp.ClientSession() as http:
        for r in replicas:
            await drive(r)
        others = ",".join([*(r.admin for r in replicas[1:]), gone])
        page = await page_of(replicas[0].admin, tmp_path / "admin-page-3.png", others)
        summed = combine([await report(http, r.admin) for r in replicas])
        async with http.post(f"{replicas[0].admin}/admin/migration/sum", data=b"[1]") as bad:
            assert bad.status == 401  # behind the token too
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with http.post(f"{replicas[0].admin}/admin/migration/sum", data=b"[1]", headers=headers) as bad:
            assert bad.status == 400 and "Not a list of migration reports" in (await bad.json())["error"]
    assert page["replicas"] == "3"
    assert f"left out: {gone}/admin/" in page["status"]
    same_numbers(page, summed)
    assert page["upstreams"]["modern"]["cells"]["life"]["total"] == str(3 * 8)


async def test_made_up_tool_names_fold_into_one_bucket_and_no_label(fleet: tuple[str, str, str]) -> None:
    """A client inventing tool names cannot grow the report or the metrics: every name the upstream never
    listed is counted under (other), and the Prometheus label stays "other"."""
    async with replica(*fleet) as r, aiohttp.ClientSession() as http:
        client = RawClient(r.mcp("memory"), http)
        assert (await client.request("tools/list")).status == 200
        for i in range(40):
            reply = await client.call(f"made-up-{i}", {"text": "x"})
            assert reply.status == 200
        got = await report(http, r.admin)
        async with http.get(f"{r.admin}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}) as scraped:
            exposition = await scraped.text()
        async with http.get(f"{r.admin}/admin/") as page:  # the page's files: served without the token …
            assert page.status == 200 and page.content_type == "text/html"
            shell = await page.text()
    memory = got["upstreams"]["memory"]["tools"]
    assert not [t for t in memory if t.startswith("made-up")]
    assert memory["(other)"]["life"]["calls"]["relayed"] == 40
    assert "made-up" not in exposition
    assert "memory" not in shell and "relayed" in shell  # … and hold no figure, only the legend


async def test_three_mrtr_proxy_serve_processes_summed_by_the_cli(fastmcp_url: str, tmp_path: Path) -> None:
    """Real `mrtr-proxy serve` replicas, each with its admin listener and the YAML `migration:` block: each
    counts its own calls, the command sums them, and the verdict on the sum is the configured one's."""
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN)
    more = {"migration": {"min_calls": 5}}
    async with cluster(fastmcp_url, 3, admin_token_file=token_file, more=more) as group:
        admins = [f"http://127.0.0.1:{port}" for port in group.admin_ports]
        async with aiohttp.ClientSession() as http:
            for replica_, admin in zip(group.replicas, admins, strict=True):
                client = RawClient(url_of(replica_), http)
                assert (await client.request("tools/list")).status == 200
                for _ in range(2):
                    assert (await client.call("echo", {"text": "hi"})).result["resultType"] == "complete"

                async def answers(admin: str = admin) -> bool:
                    with contextlib.suppress(aiohttp.ClientError):
                        return (await report(http, admin))["upstreams"]["default"]["life"]["total"] == 2
                    return False

                await eventually(answers, f"the admin listener at {admin}", limit_s=30)
        argv = [sys.executable, "-m", "proxy", "migration", "--admin", ",".join(admins)]
        run = await peers.run_once([*argv, "--token-file", str(token_file), "--json"], limit_s=60)
    assert run.returncode == 0, run.stderr
    summed = json.loads(run.stdout)
    default = summed["upstreams"]["default"]
    assert len(summed["replicas"]) == 3 and summed["thresholds"]["min_calls"] == 5
    assert default["life"]["calls"] == {"adapted": 6, "relayed": 0, "mirrored": 0, "passthrough": 0}
    assert default["tools"]["echo"]["life"]["total"] == 6
    assert default["era"] == "legacy" and default["verdict"]["state"] == "ready"
    assert timeless(default["verdict"]["text"]) == timeless(
        "ready to be served directly: for 1 second no tool asked inline and no legacy client called it"
    )
