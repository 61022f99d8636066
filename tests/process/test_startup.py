"""`mrtr-proxy serve` from start to exit (process/startup.py), as an operator runs it: one logging path, a
fatal start-up error as one line, a second Ctrl-C during the drain (issue 20, items 2 and 7)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import socket
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import structlog
from waiting import eventually

from proxy.calls.wording import SEE_LOG
from proxy.observe import logs
from proxy.process import startup

PROXY = [sys.executable, "-m", "proxy"]
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN}


@pytest.fixture
def json_stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    logs.configure("info", "json", stream=out)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    startup.capture_process_output("info")
    yield out
    root.handlers[:], _ = saved
    root.setLevel(saved[1])
    logging.captureWarnings(False)
    sys.unraisablehook = sys.__unraisablehook__
    structlog.reset_defaults()


def lines_of(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_warnings_and_stdlib_logging_are_json_lines(json_stream: io.StringIO) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("something is deprecated", DeprecationWarning, stacklevel=1)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("aiohttp.server").exception("Error handling request")
    first, second = lines_of(json_stream)
    assert first["event"] == "python.warning" and first["level"] == "warning"
    assert "DeprecationWarning: something is deprecated" in first["warning"]
    assert second["event"] == "Error handling request" and second["logger"] == "aiohttp.server"
    assert second["level"] == "error" and "RuntimeError: boom" in second["exception"]


async def test_asyncio_reports_go_through_the_handler(json_stream: io.StringIO) -> None:
    loop = asyncio.get_running_loop()
    startup.exception_handler(
        loop, {"message": "Task exception was never retrieved", "exception": OSError(5)}
    )
    (line,) = lines_of(json_stream)
    assert line["event"] == "asyncio.error"
    assert line["message"] == "Task exception was never retrieved"
    assert line["error"] == "OSError: 5"


def _config(tmp_path: Path, upstream: str, **calls: Any) -> Path:
    cfg = tmp_path / "c.yaml"
    extra = f"calls: {json.dumps(calls)}\n" if calls else ""
    cfg.write_text(f"logging: {{format: json}}\n{extra}upstreams: [{{name: a, url: '{upstream}'}}]\n")
    return cfg


def _json_lines(text: str) -> list[dict[str, Any]]:
    """Every line, parsed: fails on the first one that is not a JSON object."""
    parsed = []
    for line in text.splitlines():
        value = json.loads(line)
        assert isinstance(value, dict), line
        parsed.append(value)
    return parsed


def _modern(method: str, rid: int, **params: Any) -> tuple[dict[str, Any], dict[str, str]]:
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": dict(META)}}, headers


@pytest.mark.asyncio(loop_scope="session")
async def test_every_line_is_json_against_a_down_upstream_and_a_taken_port(tmp_path: Path) -> None:
    """The run of issue 20: 81 of 88 lines were not JSON. Now every line of both processes parses."""
    cfg = _config(tmp_path, f"http://127.0.0.1:{peers.closed_port()}/mcp")  # nothing listens there
    argv = [*PROXY, "serve", "--config", str(cfg)]
    async with peers.run_peer("mrtr-proxy", lambda p: [*argv, "--listen", f"127.0.0.1:{p}"]) as proxy:
        url = f"http://127.0.0.1:{proxy.port}"
        answers: list[tuple[int, dict[str, Any], str]] = []
        async with aiohttp.ClientSession() as http:
            for rid, (method, params) in enumerate(
                [("tools/list", {}), ("tools/call", {"name": "echo"}), ("server/discover", {})], 1
            ):
                body, headers = _modern(method, rid, **params)
                async with http.post(f"{url}/mcp", json=body, headers=headers) as r:
                    answers.append((r.status, await r.json(), r.headers["X-Request-Id"]))
            initialize = {"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {}}
            async with http.post(f"{url}/mcp", json=initialize) as r:
                legacy = (r.status, await r.json(), r.headers["X-Request-Id"])
            async with http.get(f"{url}/no/such/route") as r:
                assert (r.status, r.content_type) == (404, "application/json")
                assert (await r.json())["error"]["code"] == -32600
        second = await peers.run_once([*argv, "--listen", f"127.0.0.1:{proxy.port}"], limit_s=30)
        await eventually(
            lambda: proxy.log_text(tail=None).count('"event":"request"') >= 4, "four request lines in the log"
        )
        text = proxy.log_text(tail=None)
    # The wire: a short, stable message; no host:port, no exception class, no line per protocol version.
    for status, body, _ in answers:
        assert (status, body["error"]) == (
            200,
            {"code": -31001, "message": f"Upstream 'a' unavailable ({SEE_LOG})"},
        )
    assert legacy[0] == 502 and legacy[1]["error"] == {
        "code": -32600,
        "message": f"Upstream 'a' unavailable ({SEE_LOG})",
    }
    # The log: every line JSON; the details under each request's id.
    lines = _json_lines(text)
    assert "never retrieved" not in text and "Traceback" not in text
    for _, _, rid in [*answers, legacy]:
        (detail,) = [e for e in lines if e["event"] == "upstream.unavailable" and e.get("request_id") == rid]
        assert "127.0.0.1:" in detail["error"]
        assert [e["outcome"] for e in lines if e["event"] == "request" and e["request_id"] == rid]
    assert any(e["event"] == "serving" for e in lines)
    # The second start on the taken port: JSON lines only, the failure once, exit status 2.
    assert second.returncode == 2, second
    assert second.stdout == ""
    failed = [e for e in _json_lines(second.stderr) if e["level"] == "error"]
    assert len(failed) == 1 and failed[0]["event"] == "startup.failed"
    assert "(listen.port): address already in use" in failed[0]["error"]
    print(f"\n{len(lines)} lines from the first proxy, {len(second.stderr.splitlines())} from the second")


@pytest.mark.peers
@pytest.mark.asyncio(loop_scope="session")
async def test_a_second_sigint_during_the_drain_forces_the_exit(tmp_path: Path) -> None:
    async with peers.start_fastmcp() as upstream:
        cfg = _config(tmp_path, str(upstream), drain_grace_s=300)
        argv = [*PROXY, "serve", "--config", str(cfg)]
        async with peers.run_peer("mrtr-proxy", lambda p: [*argv, "--listen", f"127.0.0.1:{p}"]) as proxy:
            body, headers = _modern("tools/call", 1, name="ask_name", arguments={})
            body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {}}
            url = f"http://127.0.0.1:{proxy.port}/mcp"
            async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=headers) as r:
                parked = await r.json()
            assert parked["result"]["resultType"] == "input_required"  # a parked call holds the drain
            os.kill(proxy.pid, signal.SIGINT)
            await eventually(lambda: '"drain.started"' in proxy.log_text(tail=None), "the drain.started line")
            assert '"parked_calls":1' in proxy.log_text(tail=None)
            os.kill(proxy.pid, signal.SIGINT)
            code = await asyncio.wait_for(proxy.process.wait(), timeout=30)
            text = proxy.log_text(tail=None)
    assert code == 130
    forced = [e for e in _json_lines(text) if e["event"] == "shutdown.forced"]
    assert forced and forced[0]["signal"] == "SIGINT"
    assert '"drain.finished"' not in text  # it did not wait out the 300 s grace


def test_a_crash_is_one_log_line_and_exit_status_1(
    json_stream: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def crash(*_: Any) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(startup, "serve", crash)
    assert startup.run(None, None, None) == startup.START_FAILED  # type: ignore[arg-type]
    (line,) = lines_of(json_stream)
    assert line["event"] == "proxy.crashed" and "RuntimeError: a bug" in line["exception"]


def test_on_a_console_the_banner_and_a_fatal_error_stay_text(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("info", "console", stream=io.StringIO())
    try:
        startup.announce("listen 127.0.0.1:8080 (replica 127.0.0.1:8080)")
        startup.fatal("cannot listen on 127.0.0.1:8080: address already in use")
    finally:
        structlog.reset_defaults()
    assert capsys.readouterr().err == (
        "listen 127.0.0.1:8080 (replica 127.0.0.1:8080)\n"
        "mrtr-proxy: cannot listen on 127.0.0.1:8080: address already in use\n"
    )


@pytest.mark.asyncio(loop_scope="session")
async def test_a_taken_admin_port_is_one_line_and_exit_status_2(tmp_path: Path) -> None:
    token = tmp_path / "admin-token"
    token.write_text("t" * 40)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        cfg = tmp_path / "c.yaml"
        cfg.write_text(
            "logging: {format: json}\n"
            f"admin: {{listen: '127.0.0.1:{taken}', token_file: '{token}'}}\n"
            f"upstreams: [{{name: a, url: 'http://127.0.0.1:{peers.closed_port()}/mcp'}}]\n"
        )
        run = await peers.run_once(
            [*PROXY, "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{peers.free_port()}"], limit_s=30
        )
    assert run.returncode == 2, run
    failed = [e for e in _json_lines(run.stderr) if e["level"] == "error"]
    assert [e["event"] for e in failed] == ["startup.failed"]
    assert f"cannot listen on 127.0.0.1:{taken} (admin.listen)" in failed[0]["error"]


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("setting", ["listen.port", "replica.peer_port"])
async def test_a_taken_port_is_one_line_naming_its_setting_and_exit_status_2(
    tmp_path: Path, setting: str
) -> None:
    """Issue 45 item 5: a taken `replica.peer_port` named only the address; the operator has to find which
    setting holds it. Now the one line (plain text here: a console run) names the setting, exit status 2."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        free = peers.free_port()
        main, peer = (taken, free) if setting == "listen.port" else (free, taken)
        cfg = tmp_path / "c.yaml"
        cfg.write_text(
            "logging: {format: console}\n"
            f"listen: {{host: 127.0.0.1, port: {main}}}\n"
            f"replica: {{peer_port: {peer}}}\n"
            f"upstreams: [{{name: a, url: 'http://127.0.0.1:{peers.closed_port()}/mcp'}}]\n"
        )
        run = await peers.run_once([*PROXY, "serve", "--config", str(cfg)], limit_s=30)
    assert run.returncode == 2, run
    assert "Traceback" not in run.stderr and run.stdout == ""
    last = run.stderr.splitlines()[-1]  # after the start-up banner: the error, once
    assert last.startswith(f"mrtr-proxy: cannot listen on 127.0.0.1:{taken} ({setting}): "), run.stderr
    assert "address already in use" in last.lower()
    assert run.stderr.count("cannot listen") == 1


@pytest.mark.asyncio(loop_scope="session")
async def test_a_key_problem_at_start_is_one_json_line_and_exit_status_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "logging: {format: json}\nkeys: {env: [MRTR_TEST_UNSET_KEY]}\n"
        f"upstreams: [{{name: a, url: 'http://127.0.0.1:{peers.closed_port()}/mcp'}}]\n"
    )
    run = await peers.run_once([*PROXY, "serve", "--config", str(cfg), "--listen", "127.0.0.1:1"], limit_s=30)
    assert run.returncode == 2
    (failed,) = [e for e in _json_lines(run.stderr) if e["level"] == "error"]
    assert failed["event"] == "startup.failed" and failed["error"] == "invalid key configuration"
    assert any("MRTR_TEST_UNSET_KEY is unset or empty" in problem for problem in failed["problems"])


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("asked", ["file", "flag", "variable"])
async def test_an_invalid_configuration_is_one_json_line_when_json_was_asked_for(
    tmp_path: Path, asked: str
) -> None:
    """Issue 20 item 2: `logging.format: json` (or the flag, or the variable) and a bad value elsewhere in
    the file: the error is one JSON line naming the file and the problem, exit status 2, no plain text."""
    cfg = tmp_path / "c.yaml"
    fmt = "logging: {format: json}\n" if asked == "file" else ""
    cfg.write_text(
        f"{fmt}calls: {{max_parked: -3}}\nupstreams: [{{name: a, url: 'http://127.0.0.1:1/mcp'}}]\n"
    )
    argv = [*PROXY, "serve", "--config", str(cfg), *(["--log-format", "json"] if asked == "flag" else [])]
    env = {"MRTR_PROXY_LOG_FORMAT": "json"} if asked == "variable" else None
    run = await peers.run_once(argv, limit_s=30, env=env)
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    (failed,) = [json.loads(line) for line in lines]  # every line JSON, and only one
    assert failed["event"] == "startup.failed" and failed["error"] == "invalid configuration"
    assert failed["source"] == str(cfg)
    assert any("calls.max_parked" in problem for problem in failed["problems"]), failed


@pytest.mark.asyncio(loop_scope="session")
async def test_an_invalid_configuration_stays_plain_text_unless_json_was_asked_for(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("calls: {max_parked: -3}\nupstreams: [{name: a, url: 'http://127.0.0.1:1/mcp'}]\n")
    run = await peers.run_once([*PROXY, "serve", "--config", str(cfg)], limit_s=30)
    assert run.returncode == 2
    assert run.stderr.startswith(f"mrtr-proxy: invalid configuration in {cfg}:"), run.stderr
