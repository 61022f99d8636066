"""Real 2026-07-28 clients through the native relay (front/modern/relay/native.py) to real modern upstreams:
the mcp 2.3.0 SDK's `Client` (2026-07-28 and auto), the TypeScript client 2.4.0 (pinned, auto, legacy) and
FastMCP 4's own client, against FastMCP 4.2.3 (two eras) and the mcp 2.3.0 SDK's server (modern only).
Each client fulfils `input_required` itself; the data each tool returns is checked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import peers
import pytest
import pytest_asyncio

from e2e.harness import running_proxy
from proxy.config import UpstreamConfig
from proxy.process.appstate import ERAS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

PY_DRIVER = Path(__file__).parent / "clients" / "modern_client.py"
TS_DRIVER = Path(__file__).parents[1] / "interop" / "clients" / "ts_client.mjs"
FASTMCP4_DRIVER = Path(__file__).parent / "clients" / "fastmcp4_client.py"

# Native tools both servers have, and what each ends with (the clients answer "Alice" to every form).
COMMON: list[dict[str, Any]] = [
    {"id": "plain", "kind": "tool", "name": "echo", "args": {"text": "hi"}},
    {"id": "accept", "kind": "tool", "name": "guard_name", "elicit": "accept"},
    {"id": "decline", "kind": "tool", "name": "guard_name", "elicit": "decline"},
    {"id": "cancel", "kind": "tool", "name": "guard_name", "elicit": "cancel"},
    {"id": "two-rounds", "kind": "tool", "name": "guard_two"},
    {"id": "progress", "kind": "tool", "name": "guard_progress", "args": {"steps": 2}, "progress": True},
]
COMMON_EXPECTED = {
    "plain": "hi",
    "accept": "hello:Alice",
    "decline": "declined",
    "cancel": "cancelled",
    "two-rounds": "two:Alice+Alice",
    "progress": "progress:Alice",
}
# FastMCP 4's fixture only: two requests in one round, native sampling, and a ctx.elicit tool (which
# FastMCP 4.2.3 refuses on a 2026-07-28 request: a tool error the relay passes through as it is).
FASTMCP4_ONLY: list[dict[str, Any]] = [
    {"id": "pair", "kind": "tool", "name": "guard_pair"},
    {"id": "sampling", "kind": "tool", "name": "guard_sample", "args": {"prompt": "capital?"}},
    {"id": "url", "kind": "tool", "name": "guard_url"},
    {"id": "roots", "kind": "tool", "name": "guard_roots"},
    {"id": "ctx-elicit", "kind": "tool", "name": "ask_name"},
]
FASTMCP4_EXPECTED = {
    "pair": "pair:Alice+Alice",
    "sampling": "sampled:Paris",
    "url": "url:accept",
    "roots": "roots:file:///work/project",
}
CTX_ELICIT_AT_2026 = "elicitation via server-initiated requests is unavailable on 2026-07-28 connections."


def plan_for(kind: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    if kind == "fastmcp4":
        return COMMON + FASTMCP4_ONLY, {**COMMON_EXPECTED, **FASTMCP4_EXPECTED}
    return COMMON, COMMON_EXPECTED


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=["fastmcp4", "mcp2"])
async def routed(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, str]]:
    """(upstream kind, the proxy's /mcp URL in front of it)."""
    starter = peers.start_fastmcp4() if request.param == "fastmcp4" else peers.start_mcp2_server()
    # learn_legacy_tools off: every client here sees ask_name refused as going direct (test_two_era_paths.py
    # covers what the proxy learns from that refusal).
    async with (
        starter as url,
        running_proxy(UpstreamConfig(name="default", url=url, learn_legacy_tools=False)) as proxy,
    ):
        yield request.param, proxy.url
        era = "both" if request.param == "fastmcp4" else "modern"  # FastMCP 4 answers initialize too
        assert proxy.app[ERAS].describe() == {"default": era}
        assert proxy.parked == 0  # the native relay parks nothing


async def py_client(url: str, plan: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    argv = [str(peers.client_python()), str(PY_DRIVER), url, json.dumps(plan), mode]
    run = await peers.run_once(argv, limit_s=120)
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def check(kind: str, steps: dict[str, Any], expected: dict[str, str]) -> None:
    for step, text in expected.items():
        assert steps[step].get("text") == text, (step, steps[step])
        assert not steps[step].get("is_error"), (step, steps[step])
    # Progress across both rounds, under the client's own progressToken each round.
    assert [p[:2] for p in steps["progress"]["progress"]] == [[1, 4], [2, 4], [3, 4], [4, 4]], steps[
        "progress"
    ]
    if kind == "fastmcp4":
        assert steps["ctx-elicit"]["is_error"] and steps["ctx-elicit"]["text"] == CTX_ELICIT_AT_2026


@pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
async def test_mcp_2_3_client(routed: tuple[str, str], mode: str) -> None:
    kind, url = routed
    plan, expected = plan_for(kind)
    out = await py_client(url, plan, mode)
    assert out.pop("_protocol_version") == "2026-07-28"
    check(kind, out, expected)


async def ts_client(url: str, plan: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    argv = [str(peers.node_bin()), str(TS_DRIVER), url, mode, json.dumps(plan)]
    run = await peers.run_once(argv, limit_s=120)
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    out: dict[str, Any] = json.loads(run.stdout)
    return out


@pytest.mark.parametrize("mode", ["pinned", "auto"])
async def test_ts_client_2_4(routed: tuple[str, str], mode: str) -> None:
    kind, url = routed
    plan, expected = plan_for(kind)
    out = await ts_client(url, plan, mode)
    assert out["client"]["version"] == "2.4.0" and "connectError" not in out, out
    assert (out["client"]["era"], out["client"]["protocolVersion"]) == ("modern", "2026-07-28")
    check(kind, out["steps"], expected)
    retries = [row for row in out["wire"] if "retry" in row]
    assert {"retry": ["first"], "http": "POST", "method": "tools/call"}.items() <= {
        k: v for row in retries if row["retry"] == ["first"] for k, v in row.items()
    }.items()  # the client's retries went through the proxy as they came


async def fastmcp4_client(url: str, plan: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    python = peers.peers_dir() / "fastmcp4" / "bin" / "python"
    run = await peers.run_once([str(python), str(FASTMCP4_DRIVER), url, json.dumps(plan), mode], limit_s=120)
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    out: dict[str, Any] = json.loads(run.stdout)
    return out


@pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
async def test_fastmcp4_client(routed: tuple[str, str], mode: str) -> None:
    kind, url = routed
    plan, expected = plan_for(kind)
    out = await fastmcp4_client(url, plan, mode)
    check(kind, out, expected)


LEGACY_PLAN: list[dict[str, Any]] = [
    {"id": "plain", "kind": "tool", "name": "echo", "args": {"text": "hi"}},
    {"id": "native", "kind": "tool", "name": "guard_name"},
    {"id": "ctx-elicit", "kind": "tool", "name": "ask_name"},
]


@pytest.mark.parametrize("client", ["ts", "fastmcp4"])
async def test_legacy_clients_go_through_the_mirror(routed: tuple[str, str], client: str) -> None:
    """Legacy clients of a modern upstream (two-era or modern-only) go through the mirror
    (front/legacy/mirror/front.py; tests/e2e/test_mirror.py has every flow): the upstream is called at
    2026-07-28, so its native tools work for them; a two-era server's ctx.elicit tool goes the legacy way
    first, as going direct, and asks them inline (issue 43: tests/e2e/test_two_era_paths.py)."""
    kind, url = routed
    plan = LEGACY_PLAN if kind == "fastmcp4" else LEGACY_PLAN[:1]
    if client == "ts":
        out = await ts_client(url, plan, "legacy")
        connect_error, steps = out.get("connectError"), out["steps"]
    else:
        python = peers.peers_dir() / "fastmcp4" / "bin" / "python"
        argv = [str(python), str(FASTMCP4_DRIVER), url, json.dumps(plan), "legacy"]
        run = await peers.run_once(argv, limit_s=120)
        assert run.returncode == 0, run.stderr[-2000:]
        connect_error, steps = None, json.loads(run.stdout)
    assert connect_error is None
    assert steps["plain"]["text"] == "hi"
    if kind == "fastmcp4":
        assert steps["native"]["text"] in ("hello:Alice", "hello:x"), steps  # what each client fills in
        assert steps["ctx-elicit"]["text"] in ("accept:Alice", "accept:x"), steps


@pytest.mark.parametrize("client", ["py", "ts", "fastmcp4"])
async def test_ctx_elicit_tools_named_legacy_tools_work_for_2026_clients(client: str) -> None:
    """With upstreams[].legacy_tools, a two-era server's ctx.elicit tool works for 2026-07-28 clients (the
    proxy's MRTR over a legacy session), beside its native tools (the relay)."""
    plan = [
        {"id": "ctx-elicit", "kind": "tool", "name": "ask_name"},
        {"id": "ctx-decline", "kind": "tool", "name": "ask_name", "elicit": "decline"},
        {"id": "native", "kind": "tool", "name": "guard_name"},
    ]
    async with peers.start_fastmcp4() as url:
        upstream = UpstreamConfig(name="default", url=url, legacy_tools=("ask_name",))
        async with running_proxy(upstream) as proxy:
            if client == "py":
                steps = await py_client(proxy.url, plan, "2026-07-28")
            elif client == "ts":
                steps = (await ts_client(proxy.url, plan, "pinned"))["steps"]
            else:
                steps = await fastmcp4_client(proxy.url, plan, "2026-07-28")
    assert steps["ctx-elicit"]["text"] in ("accept:Alice", "accept:x"), steps
    assert steps["ctx-decline"]["text"] == "decline"
    assert steps["native"]["text"] == "hello:Alice"
