"""`mrtr-proxy probe` against real peers, each report checked field by field; the YAML block it prints is
accepted by `check-config` and, served, completes an MRTR round trip with the mcp 2.3.0 client.

Peers: FastMCP 1.30 over Streamable HTTP (with and without an event store), HTTP+SSE and stdio;
server-everything over streamableHttp (its example event store resumes), sse and stdio; an OAuth-protected
FastMCP 1.30 (tests/fixtures/protected_fastmcp_server.py); a port where nothing listens; a plain HTTP server.
The probe runs as the real CLI in a child process (exit status, stdout, stderr), bounded by `run_once`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from aiohttp import web

from e2e.harness import RawClient, accept_name
from e2e.recording import recording_relay
from proxy.wire import mcp

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

DRIVER = Path(__file__).parent / "clients" / "modern_client.py"
PROTECTED = peers.FIXTURES_DIR / "protected_fastmcp_server.py"
ALL_VERSIONS = dict.fromkeys(mcp.LEGACY_VERSIONS, True)
LIMIT_S = 60.0  # the probe bounds itself at 50 s; this only stops a hung test


async def probe(*target: str, json_out: bool = True, extra: tuple[str, ...] = ()) -> peers.CompletedRun:
    """The real CLI in a child process."""
    argv = [sys.executable, "-m", "proxy", "probe", *(["--json"] if json_out else []), *extra, *target]
    run = await peers.run_once(argv, limit_s=LIMIT_S, cwd=peers.REPO_ROOT)
    assert not run.timed_out, run.stderr
    return run


async def report(*target: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    run = await probe(*target, extra=extra)
    assert run.returncode == 0, run.stderr
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def names(out: dict[str, Any], kind: str) -> list[str]:
    return [item["name"] for item in out["items"][kind]]


def verdict(out: dict[str, Any], feature: str) -> tuple[str, str]:
    (found,) = [v for v in out["verdicts"] if v["feature"] == feature]
    return found["status"], found["reason"]


def fastmcp_stdio() -> tuple[str, ...]:
    return (str(peers.legacy_python()), str(peers.legacy_fastmcp_script()), "--transport", "stdio")


@contextlib.asynccontextmanager
async def served(config_yaml: str, tmp: Path) -> AsyncIterator[tuple[str, str]]:
    """check-config the probe's YAML, then `serve` it; yields (check-config's output, the /mcp URL)."""
    path = tmp / "probe.yaml"
    path.write_text(config_yaml)
    checked = await peers.run_once([sys.executable, "-m", "proxy", "check-config", str(path)], limit_s=30)
    assert checked.returncode == 0, checked.stderr

    def argv(port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "proxy",
            "serve",
            "--config",
            str(path),
            "--listen",
            f"127.0.0.1:{port}",
        ]

    async with peers.run_peer("proxy", argv, cwd=peers.REPO_ROOT) as proxy:
        yield checked.stdout, f"http://127.0.0.1:{proxy.port}/mcp"


async def round_trip(config_yaml: str, tmp: Path, tool: str = "ask_name") -> dict[str, Any]:
    """Serve the probe's YAML and run one elicitation through it with the mcp 2.3.0 client."""
    async with served(config_yaml, tmp) as (checked, url):
        plan = [{"id": "ask", "kind": "tool", "name": tool, "elicit": "accept"}]
        run = await peers.run_once(
            [str(peers.client_python()), str(DRIVER), url, json.dumps(plan)], limit_s=60
        )
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    results: dict[str, Any] = json.loads(run.stdout)
    assert results.pop("_protocol_version") == "2026-07-28"
    return {"checked": checked, **results}


# -- peers of this module only (the FastMCP ones and server-everything's streamableHttp come from conftest) --


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def everything_sse_url() -> AsyncIterator[peers.PeerUrl]:
    async with peers.start_server_everything("sse") as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def protected_url() -> AsyncIterator[str]:
    async with peers.run_peer(
        "protected-fastmcp",
        lambda port: [str(peers.legacy_python()), str(PROTECTED), "--host", "127.0.0.1", "--port", str(port)],
    ) as peer:
        yield f"http://127.0.0.1:{peer.port}/mcp"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def plain_http_url() -> AsyncIterator[str]:
    """Python's http.server: HTTP, but no MCP (501 to POST, 404 to GET /mcp)."""
    async with peers.run_peer(
        "http-server", lambda port: [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    ) as peer:
        yield f"http://127.0.0.1:{peer.port}/mcp"


# -- FastMCP 1.30 --------------------------------------------------------------------------------------------


async def test_fastmcp_streamable_http_without_event_store(fastmcp_url: str, tmp_path: Path) -> None:
    out = await report(fastmcp_url)
    assert out["transport"] == "streamable-http" and out["frontable"] is True and out["error"] is None
    assert out["transports"] == {
        "streamable_http": {"answer": "yes", "detail": "text/event-stream"},
        "get_stream": {"answer": "yes", "detail": "HTTP 200 text/event-stream"},
        "http_sse": {"answer": "not tried", "detail": ""},
    }
    assert out["versions"] == ALL_VERSIONS and out["negotiated"] == "2025-11-25"
    assert out["server_info"] == {"name": "legacy-fastmcp-fixture", "version": "1.30.0"}
    assert set(out["capabilities"]) == {"experimental", "prompts", "resources", "tools"}
    assert {"echo", "ask_name", "sample", "roots", "poll_echo"} <= set(names(out, "tools"))
    assert names(out, "prompts") == ["greeting_prompt"]
    assert names(out, "resources") == ["fixture://secret"]
    assert names(out, "templates") == ["fixture://secret/{label}"]
    assert all(item["mrtr"] for kind in out["items"].values() for item in kind)
    assert out["resumability"]["resumable"] == "no"
    assert "no id (no event store)" in out["resumability"]["detail"]
    session = out["session"]
    assert session["session_id_issued"] is True and session["requests_outside_calls"] == []
    assert session["requests_on_get_stream"] == []
    assert session["delete"] == {"answer": "yes", "detail": "HTTP 200"}
    assert out["authorization"] is None and out["call"] is None  # no tool is called without --call
    assert verdict(out, "fronting") == ("works", "legacy MCP over streamable-http, speaks 2025-11-25")
    status, reason = verdict(out, "owner failover of a parked call")
    assert status == "will not work" and "call lost, not replayed" in reason
    assert verdict(out, "legacy clients through the proxy")[0] == "works"
    assert verdict(out, "mid-call input (MRTR)")[0] == "works"
    assert out["upstream"] == {
        "name": "legacy-fastmcp-fixture",
        "url": fastmcp_url,
        "transport": "streamable-http",
    }
    done = await round_trip(out["config_yaml"], tmp_path)
    assert f"upstream legacy-fastmcp-fixture: streamable-http {fastmcp_url}" in done["checked"]
    assert done["ask"] == {"text": "accept:Alice", "is_error": False, "seen": ["elicit:form"]}


async def test_no_tool_prompt_or_resource_is_run_without_call(fastmcp_url: str) -> None:
    """Everything the probe sent, as the server received it (a recording relay in between)."""
    async with recording_relay(fastmcp_url) as relay:
        out = await report(relay.url)
    assert out["transport"] == "streamable-http"
    methods = {sent.rpc for sent in relay.sent}
    assert not methods & {"tools/call", "prompts/get", "resources/read", "completion/complete"}
    assert methods >= {"initialize", "notifications/initialized", "tools/list", "prompts/list", "ping"}
    assert [s.method for s in relay.sent if s.rpc == "initialize"] == ["POST"] * 5  # 1 + one per version


async def test_fastmcp_sends_roots_list_on_the_get_stream_during_a_call(fastmcp_url: str) -> None:
    out = await report(fastmcp_url, extra=("--call", "roots"))
    assert out["call"] == {
        "name": "roots",
        "server_requests": ["roots/list"],
        "outcome": "result",
        "detail": "",
    }
    assert out["session"]["requests_on_get_stream"] == [
        "roots/list"
    ]  # FastMCP 1.x: list_roots has no related id
    assert out["session"]["requests_outside_calls"] == []
    assert verdict(out, "tools/call roots")[0] == "works"


async def test_fastmcp_streamable_http_with_event_store_resumes(fastmcp_resumable_url: str) -> None:
    out = await report(fastmcp_resumable_url)
    assert out["transport"] == "streamable-http" and out["versions"] == ALL_VERSIONS
    assert out["resumability"] == {
        "resumable": "yes",
        "detail": "a dropped POST stream was resumed with Last-Event-ID and replayed",
    }
    assert verdict(out, "owner failover of a parked call")[0] == "works"


async def test_fastmcp_answering_json_loses_inline_requests() -> None:
    """FastMCP's json_response=True: POSTs answer application/json, so an inline elicitation never arrives."""
    async with peers.start_fastmcp(json_response=True) as url:
        out = await report(url)
    assert out["transports"]["streamable_http"] == {"answer": "yes", "detail": "application/json"}
    assert out["transports"]["get_stream"]["answer"] == "yes"
    assert out["resumability"] == {
        "resumable": "no",
        "detail": "a POST answers application/json: there is no stream to resume",
    }
    status, reason = verdict(out, "mid-call input (MRTR)")
    assert status == "works with limits" and "only server requests sent on the GET stream" in reason


async def test_fastmcp_http_sse(fastmcp_sse_url: str, tmp_path: Path) -> None:
    out = await report(fastmcp_sse_url)
    assert out["transport"] == "sse" and out["frontable"] is True
    assert out["transports"]["streamable_http"] == {
        "answer": "no",
        "detail": "POST initialize answered HTTP 405 text/plain: Method Not Allowed",
    }
    assert out["transports"]["http_sse"]["answer"] == "yes"
    endpoint = fastmcp_sse_url.removesuffix("/sse") + "/messages/?session_id="
    assert out["transports"]["http_sse"]["detail"].startswith(f"endpoint {endpoint}")
    assert out["versions"] == ALL_VERSIONS and out["server_info"]["name"] == "legacy-fastmcp-fixture"
    assert "ask_name" in names(out, "tools")
    assert out["resumability"]["resumable"] == "not applicable"
    assert out["session"]["session_id_issued"] is None
    assert verdict(out, "owner failover of a parked call")[0] == "will not work"
    assert verdict(out, "legacy clients through the proxy")[0] == "works with limits"
    assert out["upstream"] == {"name": "legacy-fastmcp-fixture", "url": fastmcp_sse_url, "transport": "sse"}
    done = await round_trip(out["config_yaml"], tmp_path)
    assert done["ask"] == {"text": "accept:Alice", "is_error": False, "seen": ["elicit:form"]}


async def test_fastmcp_stdio_with_call(tmp_path: Path) -> None:
    out = await report(*fastmcp_stdio(), extra=("--call", "ask_name", "--"))
    assert out["transport"] == "stdio"
    assert out["transports"] == {"stdio": {"answer": "yes", "detail": "initialize answered on stdout"}}
    assert out["versions"] == ALL_VERSIONS and out["server_info"]["name"] == "legacy-fastmcp-fixture"
    assert out["call"] == {
        "name": "ask_name",
        "server_requests": ["elicitation/create"],
        "outcome": "result",
        "detail": "decline",  # the probe declines whatever it is asked
    }
    status, reason = verdict(out, "tools/call ask_name")
    assert status == "works" and reason.startswith("asked elicitation/create: becomes input_required")
    command = fastmcp_stdio()
    assert out["upstream"] == {
        "name": "legacy-fastmcp-fixture",
        "command": command[0],
        "args": list(command[1:]),
        "cwd": str(peers.REPO_ROOT),
    }
    done = await round_trip(out["config_yaml"], tmp_path)
    assert done["ask"] == {"text": "accept:Alice", "is_error": False, "seen": ["elicit:form"]}


# -- server-everything ---------------------------------------------------------------------------------------


async def test_server_everything_streamable_http(server_everything_url: str) -> None:
    out = await report(server_everything_url)
    assert out["transport"] == "streamable-http" and out["versions"] == ALL_VERSIONS
    assert out["era"] == "legacy" and out["modern"]["era"] == "legacy"  # server/discover: a legacy answer
    assert out["server_info"]["name"] == "mcp-servers/everything"
    assert {"completions", "logging", "prompts", "resources", "tools"} <= set(out["capabilities"])
    (echo,) = [t for t in out["items"]["tools"] if t["name"] == "echo"]
    assert echo["annotations"]["readOnlyHint"] is True
    assert "simple-prompt" in names(out, "prompts")
    assert out["resumability"]["resumable"] == "yes"  # its example event store replays after Last-Event-ID
    assert verdict(out, "owner failover of a parked call")[0] == "works"
    assert out["session"]["requests_outside_calls"] == ["roots/list"]  # ~350 ms after initialized
    assert out["session"]["requests_on_get_stream"] == ["roots/list"]
    status, reason = verdict(out, "server requests outside calls")
    assert status == "works with limits" and "static_roots" in reason
    assert verdict(out, "subscriptions/listen")[0] == "works"


async def test_server_everything_sse(everything_sse_url: str) -> None:
    out = await report(everything_sse_url)
    assert out["transport"] == "sse" and out["transports"]["http_sse"]["answer"] == "yes"
    assert out["transports"]["streamable_http"] == {
        "answer": "no",
        "detail": "POST initialize answered HTTP 404 text/html",
    }
    assert out["server_info"]["name"] == "mcp-servers/everything" and out["versions"] == ALL_VERSIONS
    assert out["session"]["requests_outside_calls"] == ["roots/list"]
    assert out["resumability"]["resumable"] == "not applicable"


async def test_server_everything_stdio() -> None:
    command = (str(peers.node_bin()), str(peers.server_everything_entry()), "stdio")
    out = await report("--", *command)
    assert out["transport"] == "stdio" and out["versions"] == ALL_VERSIONS
    assert out["server_info"]["name"] == "mcp-servers/everything"
    assert "echo" in names(out, "tools")
    assert out["session"]["requests_outside_calls"] == ["roots/list"]
    assert out["upstream"]["command"] == command[0] and out["upstream"]["args"] == list(command[1:])


# -- authorization ---------------------------------------------------------------------------------------


async def test_oauth_protected_fastmcp(protected_url: str) -> None:
    out = await report(protected_url)
    auth = out["authorization"]
    metadata_url = protected_url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert auth["status"] == 401
    assert (
        auth["www_authenticate"].startswith("Bearer ")
        and f'resource_metadata="{metadata_url}"' in auth["www_authenticate"]
    )
    assert auth["metadata_url"] == metadata_url
    assert auth["metadata"]["resource"] == protected_url and auth["detail"] == ""  # RFC 9728 3.3: it matches
    assert auth["authorization_servers"] == ["https://auth.example.com/"]
    assert auth["scopes"] == ["mcp:tools", "mcp:read"]
    assert out["negotiated"] is None and out["frontable"] is True
    status, reason = verdict(out, "fronting")
    assert status == "works with limits"
    assert "https://auth.example.com/ with scopes mcp:tools mcp:read" in reason and "--header" in reason
    assert [v["feature"] for v in out["verdicts"]] == ["fronting"]


async def test_oauth_protected_fastmcp_with_a_token(protected_url: str, tmp_path: Path) -> None:
    out = await report(protected_url, extra=("--header", "Authorization: Bearer probe-token"))
    assert out["negotiated"] == "2025-11-25" and out["server_info"]["name"] == "protected-fixture"
    assert names(out, "tools") == ["echo", "ask_name"]
    assert out["authorization"]["scopes"] == ["mcp:tools", "mcp:read"]  # seen by a request without the token
    status, reason = verdict(out, "fronting")
    assert status == "works with limits" and "--header" not in reason
    assert out["upstream"]["auth"] == {"mode": "passthrough"}
    # Served as printed: the upstream's 401 reaches a client without a token, with the proxy's metadata URL;
    # with the token an elicitation goes through MRTR rounds.
    async with served(out["config_yaml"], tmp_path) as (_, url), aiohttp.ClientSession() as http:
        anonymous = await RawClient(url, http).call("echo", {"text": "x"})
        assert anonymous.status == 401
        proxy_metadata = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        assert f'resource_metadata="{proxy_metadata}"' in anonymous.headers["WWW-Authenticate"]
        client = RawClient(url, http, authorization="Bearer probe-token")
        first = await client.call("ask_name")
        assert first.result["resultType"] == "input_required", first.body
        (key,) = first.result["inputRequests"]
        done = await client.retry(first, {key: accept_name("Alice")}, "ask_name")
        assert done.result["content"][0]["text"] == "accept:Alice"


# -- nothing to front ------------------------------------------------------------------------------------


async def test_nothing_listening() -> None:
    url = f"http://127.0.0.1:{peers.closed_port()}/mcp"
    run = await probe(url, json_out=False)
    assert run.returncode == 1
    assert run.stderr == f"mrtr-proxy probe: cannot connect to {url}: connection refused\n"
    assert "fronting                           will not work: cannot connect" in run.stdout


async def test_not_an_mcp_server(plain_http_url: str) -> None:
    run = await probe(plain_http_url)
    assert run.returncode == 1
    assert run.stderr == (
        f"mrtr-proxy probe: no MCP server at {plain_http_url}: POST initialize answered HTTP 501 text/html; "
        "GET answered HTTP 404 text/html\n"
    )
    out = json.loads(run.stdout)
    assert out["frontable"] is False and out["upstream"] is None and out["config_yaml"] is None


async def test_a_command_that_is_no_server() -> None:
    """It exits at once; like the proxy's children it sees only a short list of our variables plus --env."""
    script = (
        "import os, sys; sys.stderr.write(os.environ.get('GREETING', '-') + os.environ.get('SECRET', ''))\n"
        "sys.exit(3)"
    )
    argv = [
        sys.executable,
        "-m",
        "proxy",
        "probe",
        "--env",
        "GREETING=boom",
        "--",
        sys.executable,
        "-c",
        script,
    ]
    run = await peers.run_once(argv, limit_s=LIMIT_S, cwd=peers.REPO_ROOT, env={"SECRET": "leaked"})
    assert run.returncode == 1
    assert run.stderr == "mrtr-proxy probe: no MCP server on stdio: the server exited with code 3: boom\n"


@contextlib.asynccontextmanager
async def off_origin_sse() -> AsyncIterator[str]:
    """A hostile HTTP+SSE server: its stream names a POST endpoint on another origin."""

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"event: endpoint\ndata: http://elsewhere.example:9/messages?s=1\n\n")
        for _ in range(500):  # held open (bounded: 10 s) until the client goes
            if request.transport is None or request.transport.is_closing():
                break
            await asyncio.sleep(0.02)  # the hostile server holds the request until the client goes
        return response

    app = web.Application()
    app.router.add_get("/sse", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/sse"
    finally:
        await runner.cleanup()


async def test_an_endpoint_on_another_origin_is_refused_by_the_proxys_own_rule() -> None:
    """The probe judges the endpoint event by the rule the proxy's HTTP+SSE sessions apply
    (upstream/http_sse.py `resolve_endpoint`), so it does not call fine what the proxy would refuse."""
    async with off_origin_sse() as url:
        run = await probe(url)
    out = json.loads(run.stdout)
    assert out["transports"]["http_sse"]["answer"] == "no"
    assert "upstream named an endpoint on another origin (http://elsewhere.example:9" in out["error"]
