"""The admin listener (process/admin.py) against a real FastMCP 1.30 server, with real parked calls: bearer
authentication (missing, wrong, other scheme: 401, nothing done), the parked-call listing (a principal
digest, never the credential), an operator's cancel (notifications/cancelled reaches the upstream; the
client's retry gets -31013), the tool name in the request log line and in a bounded metric label, and
/metrics: the public one says nothing about why a forged handle was refused, the admin one does."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestServer
from e2e.harness import RawClient, accept_name
from e2e.recording import Recording, recording_relay
from prometheus_client.parser import text_string_to_metric_families
from waiting import eventually

from proxy.config import (
    AdminConfig,
    Config,
    ConfigError,
    ListenConfig,
    MetricsConfig,
    UpstreamConfig,
    load_config,
)
from proxy.handle import KeyRing
from proxy.observe import logs
from proxy.process.admin import FAILED_BURST, AdminSetupError, prepare_admin, read_token
from proxy.process.app import CALLS, create_app

SESSION = pytest.mark.asyncio(loop_scope="session")

TOKEN = "admin-token-0123456789abcdef"
CANCELLED = -31013


@dataclass
class Admin:
    url: str  # http://127.0.0.1:PORT
    proxy: RawClient
    app: web.Application
    relay: Recording
    http: aiohttp.ClientSession
    main_url: str

    async def get(self, path: str, token: str | None = TOKEN, scheme: str = "Bearer") -> tuple[int, Any]:
        headers = {"Authorization": f"{scheme} {token}"} if token is not None else {}
        async with self.http.get(self.url + path, headers=headers) as resp:
            return resp.status, await _body(resp)

    async def cancel(self, call: str, token: str | None = TOKEN) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        async with self.http.post(f"{self.url}/admin/calls/{call}/cancel", headers=headers) as resp:
            return resp.status, await _body(resp)


async def _body(resp: aiohttp.ClientResponse) -> Any:
    if resp.content_type == "application/json":
        return await resp.json()
    return await resp.text()


@asynccontextmanager
async def admin_proxy(
    upstream: str, tmp_path: Path, metrics: MetricsConfig | None = None, authorization: str | None = None
) -> AsyncIterator[Admin]:
    """The proxy (in front of a recording relay to `upstream`) with its admin listener on a free port."""
    (tmp_path / "admin-token").write_text(TOKEN + "\n")
    port = peers.free_port()
    async with recording_relay(upstream) as relay, aiohttp.ClientSession() as http:
        config = Config(
            upstreams=(UpstreamConfig(name="default", url=relay.url),),
            listen=ListenConfig(host="127.0.0.1", port=8080),
            admin=AdminConfig(listen=f"127.0.0.1:{port}", token_file=tmp_path / "admin-token"),
            metrics=metrics or MetricsConfig(),
        )
        app = create_app(config, ring=KeyRing.ephemeral())
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        admin = prepare_admin(config)
        assert admin is not None
        runner = await admin.start(app)
        try:
            main_url = str(server.make_url("/mcp"))
            client = RawClient(main_url, http, authorization=authorization)
            yield Admin(f"http://127.0.0.1:{port}", client, app, relay, http, main_url)
        finally:
            await runner.cleanup()
            await server.close()


def tamper(state: str) -> str:
    raw = bytearray(base64.urlsafe_b64decode(state + "=" * (-len(state) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def samples(text: str, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {
        frozenset(s.labels.items()): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    logs.configure("info", "json", stream)
    try:
        yield stream
    finally:
        structlog.reset_defaults()


# -- authentication -----------------------------------------------------------------------------------


@pytest.mark.peers
@SESSION
async def test_admin_refuses_missing_wrong_and_other_scheme_tokens(fastmcp_url: str, tmp_path: Path) -> None:
    async with admin_proxy(fastmcp_url, tmp_path) as admin:
        parked = await admin.proxy.call("ask_name")
        assert parked.result["resultType"] == "input_required"
        call = admin.app[CALLS].registry
        (live,) = list(call)
        attempts: list[tuple[str | None, str]] = [
            (None, "Bearer"),  # no Authorization header at all
            ("wrong-token-0123456789abcdef", "Bearer"),
            (TOKEN[:-1], "Bearer"),  # a prefix of the real one
            (TOKEN + "x", "Bearer"),
            (TOKEN, "Basic"),  # the right secret under another scheme
            ("", "Bearer"),
        ]
        for token, scheme in attempts:
            for path in ("/admin/calls", "/metrics", "/nowhere"):
                status, body = await admin.get(path, token, scheme)
                assert status == 401, (token, scheme, path)
                assert body == {"error": "Unauthorized: the admin listener needs its bearer token"}
            status, body = await admin.cancel(live.id, token if scheme == "Bearer" else None)
            assert status == 401
        assert call.get(live.id) is live and live.parked  # no refused cancel touched the call
        assert not admin.relay.posts("notifications/cancelled")
        # The call is still the client's: its retry completes it.
        done = await admin.proxy.retry(parked, {"elicit-1": accept_name("kept")}, "ask_name")
        assert done.result["content"][0]["text"] == "accept:kept"
        status, body = await admin.get("/nowhere")
        assert (status, body) == (404, {"error": "Not Found"})  # authenticated: JSON, not HTML


@pytest.mark.peers
@SESSION
async def test_a_flood_of_bad_tokens_from_one_address_gets_429_and_another_address_still_works(
    fastmcp_url: str, tmp_path: Path, captured: io.StringIO
) -> None:
    """Once any number of guesses a second got 401 each (and a log line each); then the limit, once reached,
    logged nothing at all (issue 41 #5): now one `admin.auth_rate_limited` line, not one per 429."""
    async with admin_proxy(fastmcp_url, tmp_path) as admin:
        statuses = []
        for i in range(FAILED_BURST + 10):
            async with admin.http.get(
                admin.url + "/admin/calls", headers={"Authorization": f"Bearer guess-{i:020d}"}
            ) as resp:
                statuses.append(resp.status)
                if resp.status == 429:
                    retry_after, body = resp.headers["Retry-After"], await resp.json()
        assert statuses == [401] * FAILED_BURST + [429] * 10
        assert 1 <= int(retry_after) <= 2  # one more guess every 2 s
        assert body["error"].startswith("Too many failed authentications from this address; retry in")
        status, _ = await admin.get("/admin/calls")  # the good token, from the flooding address: not compared
        assert status == 429
        other = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))  # another client address on loopback
        async with aiohttp.ClientSession(connector=other) as http:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with http.get(admin.url + "/admin/calls", headers=headers) as resp:
                assert resp.status == 200
                assert (await resp.json())["calls"] == []
            async with http.get(admin.url + "/admin/calls", headers={"Authorization": "Bearer no"}) as resp:
                assert resp.status == 401  # its own bucket
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    events = [
        line["event"]
        for line in lines
        if line["event"].startswith("admin.") and "listening" not in line["event"]
    ]
    assert events.count("admin.unauthorized") == FAILED_BURST + 1  # the flood's 401s and the other address's
    (limited,) = [line for line in lines if line["event"] == "admin.auth_rate_limited"]  # 11 429s: one line
    assert limited["address"] == "127.0.0.1" and limited["level"] == "warning"
    assert limited["path"] == "/admin/calls" and 1 <= limited["retry_after_s"] <= 2
    assert events.index("admin.auth_rate_limited") == FAILED_BURST  # right after the last 401 of the flood


def test_token_file_must_exist_and_be_long_enough(tmp_path: Path) -> None:
    with pytest.raises(AdminSetupError, match="cannot read"):
        read_token(tmp_path / "absent")
    (tmp_path / "short").write_text("short\n")
    with pytest.raises(AdminSetupError, match="fewer than 16"):
        read_token(tmp_path / "short")
    (tmp_path / "ok").write_text(f"  {TOKEN}\n")
    assert read_token(tmp_path / "ok") == TOKEN


def test_config_requires_a_token_and_an_admin_listener_for_private_metrics(tmp_path: Path) -> None:
    def problems(text: str) -> str:
        (tmp_path / "c.yaml").write_text("upstreams: [{name: a, url: 'http://127.0.0.1:1/mcp'}]\n" + text)
        with pytest.raises(ConfigError) as info:
            load_config(tmp_path / "c.yaml", env={})
        return str(info.value)

    assert "admin.token_file: required when admin.listen is set" in problems(
        "admin: {listen: '127.0.0.1:9100'}\n"
    )
    assert "metrics.public: false needs admin.listen" in problems("metrics: {public: false}\n")
    assert "admin.listen: port 8080 is also listen.port" in problems(
        "admin: {listen: '127.0.0.1:8080', token_file: t}\n"
    )
    (tmp_path / "ok.yaml").write_text(
        "upstreams: [{name: a, url: 'http://127.0.0.1:1/mcp'}]\n"
        "admin: {listen: '127.0.0.1:9100', token_file: tok}\nmetrics: {public: false, tools: [echo]}\n"
    )
    config = load_config(tmp_path / "ok.yaml", env={})
    assert config.admin == AdminConfig(listen="127.0.0.1:9100", token_file=tmp_path / "tok")
    assert config.metrics == MetricsConfig(public=False, tools=("echo",))
    assert load_config(None, {"upstream": "http://127.0.0.1:1/mcp"}, env={}).admin.listen is None  # off


# -- listing and cancelling parked calls -------------------------------------------------------------


@pytest.mark.peers
@SESSION
async def test_operator_lists_and_cancels_a_parked_call(
    fastmcp_url: str, tmp_path: Path, captured: io.StringIO
) -> None:
    credential = "Bearer alice-SECRET-credential"
    async with admin_proxy(fastmcp_url, tmp_path, authorization=credential) as admin:
        parked = await admin.proxy.call("ask_name")
        assert parked.result["resultType"] == "input_required"
        status, listing = await admin.get("/admin/calls")
        assert status == 200
        (row,) = listing["calls"]
        assert row["upstream"] == "default" and row["method"] == "tools/call" and row["tool"] == "ask_name"
        assert row["round"] == 1 and row["state"] == "parked" and row["task"] is None
        assert row["owner"] == listing["owner"] == "127.0.0.1:8080"  # the replica address handles name
        assert row["age_s"] >= 0 and row["parked_for_s"] >= 0 and row["expires_in_s"] > 0
        assert "SECRET" not in json.dumps(listing) and "alice" not in json.dumps(listing)
        live = admin.app[CALLS].registry.get(row["id"])
        assert live is not None and row["principal_digest"] == live.principal

        session_id = live.session.session_id
        assert session_id
        status, body = await admin.cancel(row["id"])
        assert (status, body) == (200, {"cancelled": row["id"], "upstream": "default"})
        # The session is not given back to the pool: it is closed (DELETE with its id).
        await eventually(
            lambda: any(
                s.method == "DELETE" and s.headers.get("mcp-session-id") == session_id
                for s in admin.relay.sent
            ),
            "the DELETE of the upstream session",
        )
        # The legacy way: the pending elicitation answered with an error, then notifications/cancelled.
        cancels = admin.relay.posts("notifications/cancelled")
        assert len(cancels) == 1
        assert cancels[0].message["params"]["reason"] == "cancelled by an operator"
        called = [p for p in admin.relay.posts("tools/call") if p.message["params"]["name"] == "ask_name"]
        assert cancels[0].message["params"]["requestId"] == called[0].message["id"]
        assert len(admin.app[CALLS].registry) == 0
        assert (await admin.get("/admin/calls"))[1]["calls"] == []

        # The client's retry is told, clearly, and nothing runs again upstream.
        retry = await admin.proxy.retry(parked, {"elicit-1": accept_name()}, "ask_name")
        assert retry.status == 200
        assert retry.error["code"] == CANCELLED
        assert "cancelled by an operator" in retry.error["message"]
        assert (
            len([p for p in admin.relay.posts("tools/call") if p.message["params"]["name"] == "ask_name"])
            == 1
        )
        # A second cancel of the same call, and one of a call that never was: 404, JSON.
        assert (await admin.cancel(row["id"]))[0] == 404
        status, body = await admin.cancel("no-such-call")
        assert status == 404 and body == {"error": "no such call on this replica"}
        # A handle an attacker forged for the cancelled call is still just an invalid requestState.
        forged = await admin.proxy.call(
            "ask_name",
            inputResponses={"elicit-1": accept_name()},
            requestState=tamper(parked.result["requestState"]),
        )
        assert forged.error == {"code": -32602, "message": "Invalid requestState"}

    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    request_lines = [line for line in lines if line.get("method") == "tools/call" and "outcome" in line]
    assert request_lines and all(line.get("tool") == "ask_name" for line in request_lines)
    assert any(line.get("outcome") == f"failed:{CANCELLED}" for line in request_lines)
    assert any(line.get("event") == "admin.cancelled" for line in lines)
    assert "SECRET" not in captured.getvalue()


@pytest.mark.peers
@SESSION
async def test_a_running_round_is_not_cancelled(fastmcp_url: str, tmp_path: Path) -> None:
    async with admin_proxy(fastmcp_url, tmp_path) as admin:
        running = asyncio.create_task(admin.proxy.call("slow_echo", {"text": "still here", "delay_s": 1.5}))
        try:
            registry = admin.app[CALLS].registry
            await eventually(lambda: len(registry) == 1, "one call in the registry")
            (row,) = (await admin.get("/admin/calls"))[1]["calls"]
            assert row["state"] == "running" and row["tool"] == "slow_echo" and row["expires_in_s"] is None
            status, body = await admin.cancel(row["id"])
            assert status == 409
            assert body == {"error": "the call is running a round; only parked calls can be cancelled"}
        finally:
            done = await running
        assert done.result["content"][0]["text"] == "still here"
        assert not admin.relay.posts("notifications/cancelled")


# -- /metrics: public without rejection reasons, admin with them; tools bounded by configuration -----


@pytest.mark.peers
@SESSION
async def test_public_metrics_hide_rejection_reasons_admin_metrics_show_them(
    fastmcp_url: str, tmp_path: Path
) -> None:
    async with admin_proxy(fastmcp_url, tmp_path, metrics=MetricsConfig(tools=("ask_name",))) as admin:
        parked = await admin.proxy.call("ask_name")
        state = parked.result["requestState"]
        forgeries = {
            "auth_failed": tamper(state),
            "too_short": "AAAA",
            "malformed": "!" * 80,
            "too_long": "A" * 20000,
        }
        for forged in forgeries.values():
            bad = await admin.proxy.call(
                "ask_name", inputResponses={"elicit-1": accept_name()}, requestState=forged
            )
            assert bad.error == {"code": -32602, "message": "Invalid requestState"}  # one error on the wire
        assert (await admin.proxy.call("echo", {"text": "x"})).result["resultType"] == "complete"

        async with admin.http.get(admin.main_url.replace("/mcp", "/metrics")) as resp:
            assert resp.status == 200
            public = await resp.text()
        rejections = samples(public, "mrtr_proxy_handle_rejections_total")
        assert rejections == {frozenset(): len(forgeries)}  # one series, no reason label
        assert "reason=" not in "".join(line for line in public.splitlines() if "handle_rejections" in line)

        status, private = await admin.get("/metrics")
        assert status == 200
        by_reason = samples(private, "mrtr_proxy_handle_rejections_total")
        for reason in forgeries:
            assert by_reason[frozenset({("reason", reason)})] == 1, reason
        assert sum(by_reason.values()) == len(forgeries)

        tools = samples(private, "mrtr_proxy_tool_calls_total")
        key = {("upstream", "default"), ("outcome", "input_required"), ("tool", "ask_name")}
        assert tools[frozenset(key)] == 1
        assert tools[frozenset({("upstream", "default"), ("outcome", "complete"), ("tool", "other")})] == 1
        assert {dict(k)["tool"] for k in tools} == {"ask_name", "other"}  # never a name not configured


@pytest.mark.peers
@SESSION
async def test_metrics_public_false_serves_metrics_on_the_admin_listener_only(
    fastmcp_url: str, tmp_path: Path
) -> None:
    async with admin_proxy(fastmcp_url, tmp_path, metrics=MetricsConfig(public=False)) as admin:
        async with admin.http.get(admin.main_url.replace("/mcp", "/metrics")) as resp:
            assert resp.status == 404
        status, text = await admin.get("/metrics")
        assert status == 200 and "mrtr_proxy_requests_total" in text


# -- the command: `serve` starts the admin listener, a bad token file stops it cleanly --------------------


@SESSION
async def test_serve_runs_the_admin_listener_and_closes_it_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text(TOKEN)
    admin_port = peers.free_port()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"admin: {{listen: '127.0.0.1:{admin_port}', token_file: tok}}\nmetrics: {{public: false}}\n"
        "upstreams: [{name: a, url: 'http://127.0.0.1:1/mcp'}]\n"
    )
    argv = [sys.executable, "-m", "proxy", "serve", "--config", str(cfg)]
    async with (
        peers.run_peer("mrtr-proxy", lambda p: [*argv, "--listen", f"127.0.0.1:{p}"]) as proxy,
        aiohttp.ClientSession() as http,
    ):
        admin = f"http://127.0.0.1:{admin_port}"
        async with http.get(f"{admin}/admin/calls") as resp:
            assert resp.status == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with http.get(f"{admin}/admin/calls", headers=auth) as resp:
            assert resp.status == 200
            assert await resp.json() == {"owner": f"127.0.0.1:{proxy.port}", "calls": []}
        async with http.get(f"{admin}/metrics", headers=auth) as resp:
            assert resp.status == 200 and "mrtr_proxy_handle_rejections_total{" in await resp.text()
        async with http.get(f"http://127.0.0.1:{proxy.port}/metrics") as resp:
            assert resp.status == 404  # metrics.public: false
        assert await proxy.stop() == 0
    with pytest.raises(aiohttp.ClientConnectionError):  # the admin site went with the process
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{admin_port}/admin/calls"):
            pass


@SESSION
async def test_serve_refuses_an_unusable_admin_token_file(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "admin: {listen: '127.0.0.1:1', token_file: missing-token}\n"
        "upstreams: [{name: a, url: 'http://127.0.0.1:1/mcp'}]\n"
    )
    run = await peers.run_once(
        [sys.executable, "-m", "proxy", "serve", "--config", str(cfg), "--listen", "127.0.0.1:2"], limit_s=30
    )
    assert run.returncode == 2
    assert "admin.token_file: cannot read" in run.stderr and "Traceback" not in run.stderr


def test_check_config_reads_the_admin_token_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from proxy.cli.main import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "admin: {listen: '127.0.0.1:9100', token_file: tok}\nupstreams: [{name: a, url: 'http://127.0.0.1:1/mcp'}]\n"
    )
    assert main(["check-config", str(cfg)]) == 2
    assert "admin.token_file: cannot read" in capsys.readouterr().err
    (tmp_path / "tok").write_text(TOKEN)
    assert main(["check-config", str(cfg)]) == 0
    assert TOKEN not in capsys.readouterr().out  # never printed
