"""The stdio upstream transport against a tiny fake server (tests/upstream/fakes/fake_stdio_server.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from waiting import eventually

from proxy.translate.capabilities import ClientCapabilities
from proxy.upstream.base import Inbox, TransportLost, UpstreamError, UpstreamSession
from proxy.upstream.pool import PoolExhausted, PoolKey, SessionPool
from proxy.upstream.stdio import INHERITED_ENV, StdioSession, StdioSettings, child_env, describe_exit
from proxy.wire import jsonrpc

FAKE = Path(__file__).parent / "fakes" / "fake_stdio_server.py"
WAIT = 10.0  # bound on every wait in these tests


def refuse(req: jsonrpc.Request) -> jsonrpc.Response:
    return jsonrpc.error(req.id, jsonrpc.INVALID_PARAMS, "no call in flight")


def settings(*flags: str, **overrides: Any) -> StdioSettings:
    base: dict[str, Any] = {"stdin_grace": 2.0, "term_grace": 2.0}
    return StdioSettings(
        upstream="fake", command=sys.executable, args=(str(FAKE), *flags), **{**base, **overrides}
    )


def fake_children() -> list[int]:
    """Our own child processes running the fake server (zombies included)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and FAKE.name.encode() in cmdline:
            found.append(int(entry.name))
    return found


def process_state(pid: int) -> str | None:
    """The state letter of `pid` (R, S, Z, …), or None if there is no such process."""
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) or None
    except OSError:
        return None


@pytest.fixture(autouse=True)
def _no_children_left() -> Iterator[None]:
    yield
    assert fake_children() == [], "a fake stdio server was left running (or unreaped)"


@contextlib.asynccontextmanager
async def opened(*flags: str, **overrides: Any) -> AsyncIterator[StdioSession]:
    session = StdioSession(settings(*flags, **overrides), refuse)
    try:
        await session.open()
        yield session
    finally:
        await session.close()
        if session.pid is not None:
            assert session.returncode is not None
            assert process_state(session.pid) is None  # reaped: no zombie


async def next_item(inbox: Inbox) -> jsonrpc.Message | TransportLost:
    async with asyncio.timeout(WAIT):
        return await inbox.get()


async def call_tool(session: StdioSession, name: str, **arguments: Any) -> dict[str, Any]:
    reply = await session.request("tools/call", {"name": name, "arguments": arguments}, WAIT)
    assert isinstance(reply, jsonrpc.Result), reply
    return dict(reply.result)


# -- environment ----------------------------------------------------------------------------------------


def test_child_env_inherits_only_the_documented_variables() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/p",
        "LANG": "C.UTF-8",
        "MRTR_PROXY_KEY": "secret",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "SHELL": "() { :; }",  # an exported shell function is never inherited
    }
    env = child_env({"EXTRA": "1", "PATH": "/opt/bin"}, environ)
    assert env == {"PATH": "/opt/bin", "HOME": "/home/p", "LANG": "C.UTF-8", "EXTRA": "1"}


async def test_child_runs_with_minimal_env_args_and_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MRTR_PROXY_TEST_SECRET", "must-not-leak")
    async with opened(env={"EXTRA": "yes"}, cwd=tmp_path) as session:
        result = await call_tool(session, "env")
    env = result["env"]
    assert env["EXTRA"] == "yes"
    assert "MRTR_PROXY_TEST_SECRET" not in env
    assert set(env) - set(INHERITED_ENV) == {"EXTRA"}
    assert env["PATH"] == os.environ["PATH"]
    assert Path(result["cwd"]) == tmp_path


async def test_a_command_that_cannot_start_is_an_upstream_error(tmp_path: Path) -> None:
    session = StdioSession(StdioSettings(upstream="fake", command=str(tmp_path / "nope")), refuse)
    with pytest.raises(UpstreamError, match="could not start"):
        await session.open()
    await session.close()
    assert not session.alive


# -- initialize -----------------------------------------------------------------------------------------


async def test_initialize_then_initialized_then_requests() -> None:
    async with opened(capabilities={"elicitation": {}}) as session:
        assert session.alive
        assert session.info.protocol_version == "2025-11-25"
        assert session.info.server_info == {"name": "fake-stdio", "version": "1"}
        assert session.session_id is not None and session.session_id.startswith(f"stdio:{session.pid}:")
        assert session.last_event_id is None
        seen = await call_tool(session, "seen")
    assert seen["methods"] == ["initialize", "notifications/initialized", "tools/call"]


async def test_initialize_counter_offer_within_the_offered_versions() -> None:
    async with opened("--version", "2024-11-05", versions=("2025-06-18", "2024-11-05")) as session:
        assert session.info.protocol_version == "2024-11-05"


async def test_initialize_with_an_unoffered_version_fails_and_the_child_is_stopped() -> None:
    session = StdioSession(settings("--version", "1999-01-01", versions=("2025-11-25",)), refuse)
    with pytest.raises(UpstreamError, match="unsupported version '1999-01-01'"):
        await session.open()
    await session.close()
    assert session.returncode is not None


# -- framing --------------------------------------------------------------------------------------------


async def test_each_message_is_one_line_and_unicode_survives() -> None:
    text = "line\nbreak \u2028 sep \u00e9 \U0001f600"
    async with opened() as session:
        raw = (await call_tool(session, "raw"))["line"]
        echoed = (await call_tool(session, "echo", text=text))["text"]
    assert raw.endswith("\n") and raw.count("\n") == 1
    assert json.loads(raw)["params"] == {"name": "raw", "arguments": {}}
    assert echoed == text


async def test_a_message_split_across_writes_and_two_in_one_write() -> None:
    async with opened() as session:
        assert await call_tool(session, "split") == {"split": True}
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "pair", "arguments": {}}, inbox)
        note = await next_item(inbox)
        assert isinstance(note, jsonrpc.Notification) and note.method == "notifications/progress"
        done = await next_item(inbox)
        assert isinstance(done, jsonrpc.Result) and done.result == {"pair": True}
        session.end_call()


async def test_a_line_that_is_not_json_rpc_is_logged_and_skipped() -> None:
    with capture_logs() as logs:
        async with opened() as session:
            assert await call_tool(session, "junk") == {"ok": True}
    bad = [e for e in logs if e["event"] == "upstream.bad_message"]
    assert len(bad) == 1 and bad[0]["upstream"] == "fake" and bad[0]["log_level"] == "warning"


async def test_a_line_over_the_limit_ends_the_session() -> None:
    async with opened(max_line_bytes=1024) as session:
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "big", "arguments": {"size": 4096}}, inbox)
        lost = await next_item(inbox)
        assert isinstance(lost, TransportLost)
        assert lost.reason == "upstream sent a message larger than 1024 bytes (upstreams[].max_message_bytes)"
        assert not session.alive
        await eventually(lambda: session.returncode is not None, "the child is stopped")


async def test_the_default_line_limit_is_16_mib() -> None:
    assert StdioSettings(upstream="x", command="x").max_line_bytes == 16 * 1024 * 1024
    async with opened() as session:  # a big line under the limit is fine
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "big", "arguments": {"size": 2 * 1024 * 1024}}, inbox)
        done = await next_item(inbox)
        assert isinstance(done, jsonrpc.Result) and done.result == {"ok": True}
        assert session.alive


# -- routing --------------------------------------------------------------------------------------------


async def test_server_requests_go_to_the_receiving_call() -> None:
    async with opened() as session:
        inbox: Inbox = Inbox()
        rid = await session.call("tools/call", {"name": "ask", "arguments": {}}, inbox)
        ask = await next_item(inbox)
        assert isinstance(ask, jsonrpc.Request)
        assert (ask.id, ask.method, dict(ask.params)) == ("srv-1", "elicitation/create", {"message": "name?"})
        await session.send(jsonrpc.Result("srv-1", {"action": "accept", "content": {"name": "Ann"}}))
        done = await next_item(inbox)
        assert isinstance(done, jsonrpc.Result) and done.id == rid
        assert done.result == {"answer": {"action": "accept", "content": {"name": "Ann"}}}
        session.end_call()
        with pytest.raises(RuntimeError):  # one receiving call at a time
            await session.call("tools/call", {"name": "hang", "arguments": {}}, inbox)
            await session.call("tools/call", {"name": "hang", "arguments": {}}, inbox)


async def test_a_server_request_with_no_call_gets_the_no_call_answer() -> None:
    async with opened() as session:
        result = await call_tool(session, "ask")  # a plain request: there is no receiving call
    assert result == {"answer": {"code": jsonrpc.INVALID_PARAMS, "message": "no call in flight"}}


async def test_session_wide_notifications_are_not_part_of_the_call() -> None:
    async with opened() as session:
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "notify", "arguments": {}}, inbox)
        items = [await next_item(inbox), await next_item(inbox)]
        session.end_call()
    assert isinstance(items[0], jsonrpc.Notification) and items[0].method == "notifications/progress"
    assert isinstance(items[1], jsonrpc.Result)
    assert inbox.empty()  # notifications/tools/list_changed was dropped


# -- stderr ---------------------------------------------------------------------------------------------


async def test_stderr_goes_to_the_log_line_by_line_bounded() -> None:
    lines = ["first line", "second line", "y" * 10_000, "z" * 200_000, "last"]
    with capture_logs() as logs:
        async with opened("--banner", "hello from the fake", max_stderr_line_bytes=100) as session:
            pid = session.pid
            assert await call_tool(session, "stderr", lines=lines) == {"ok": True}
            await eventually(
                lambda: any(e.get("line") == "last" for e in logs), "the last stderr line is logged"
            )
    logged = [e for e in logs if e["event"] == "upstream.stderr"]
    assert all(e["upstream"] == "fake" and e["pid"] == pid for e in logged)
    assert all(e["log_level"] == "info" for e in logged)
    texts = [e["line"] for e in logged]
    assert texts == ["hello from the fake", "first line", "second line", "y" * 100, "z" * 100, "last"]
    assert [bool(e.get("truncated")) for e in logged] == [False, False, False, True, True, False]


# -- death ----------------------------------------------------------------------------------------------


async def test_child_exit_mid_call_fails_the_call_with_the_exit_code() -> None:
    with capture_logs() as logs:
        async with opened() as session:
            inbox: Inbox = Inbox()
            await session.call("tools/call", {"name": "die", "arguments": {"code": 3}}, inbox)
            lost = await next_item(inbox)
            assert lost == TransportLost("upstream process exited with code 3")
            assert not session.alive
            with pytest.raises(UpstreamError, match="exited with code 3"):
                await session.send(jsonrpc.Notification("notifications/cancelled", {"requestId": 1}))
            started = time.monotonic()
            with pytest.raises(UpstreamError, match="exited with code 3"):
                await session.request("tools/list", {}, WAIT)
            assert time.monotonic() - started < 1  # fails at once, no waiting for a timeout
    assert any(e["event"] == "upstream.stderr" and e["line"] == "dying on request" for e in logs)
    assert any(e["event"] == "upstream.child_lost" and e["log_level"] == "warning" for e in logs)


async def test_a_killed_child_fails_the_call_and_every_waiter() -> None:
    with capture_logs() as logs:
        async with opened() as session:
            inbox: Inbox = Inbox()
            await session.call("tools/call", {"name": "hang", "arguments": {}}, inbox)
            request = session.request("tools/call", {"name": "hang", "arguments": {}}, WAIT)
            waiter = asyncio.ensure_future(request)

            def hanging() -> int:  # the child read both requests (it says so on stderr for each)
                return sum(e["event"] == "upstream.stderr" and e["line"] == "hanging" for e in logs)

            await eventually(lambda: hanging() == 2, "both requests read by the child", WAIT, seen=hanging)
            assert session.pid is not None
            os.kill(session.pid, signal.SIGKILL)
            lost = await next_item(inbox)
            assert lost == TransportLost("upstream process was killed by SIGKILL")
            with pytest.raises(UpstreamError, match="killed by SIGKILL"):
                await asyncio.wait_for(waiter, WAIT)
            assert session.returncode == -signal.SIGKILL


async def test_a_child_that_closes_its_stdout_is_dead_and_stopped() -> None:
    async with opened(stdin_grace=0.2) as session:
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "close_stdout", "arguments": {}}, inbox)
        lost = await next_item(inbox)
        assert lost == TransportLost("upstream process closed its stdout")
        await eventually(lambda: session.returncode is not None, "the child is stopped")
        assert session.returncode == -signal.SIGTERM


def test_describe_exit() -> None:
    assert describe_exit(0) == "upstream process exited with code 0"
    assert describe_exit(-9) == "upstream process was killed by SIGKILL"
    assert describe_exit(-200) == "upstream process was killed by signal 200"


# -- writing --------------------------------------------------------------------------------------------


async def test_a_child_that_stops_reading_makes_writes_fail_in_bounded_time() -> None:
    async with opened(write_timeout=0.5, stdin_grace=0.2) as session:
        assert await call_tool(session, "stop_reading") == {"ok": True}
        started = time.monotonic()
        with pytest.raises(UpstreamError, match=r"did not read its stdin for 0\.5s"):
            await session.send(jsonrpc.Notification("notifications/message", {"data": "x" * (4 << 20)}))
        assert time.monotonic() - started < 3


async def test_concurrent_writes_stay_whole_lines() -> None:
    async with opened() as session:
        texts = [f"{i}:" + "w" * (i * 7919) for i in range(30)]
        replies = await asyncio.gather(*(call_tool(session, "echo", text=t) for t in texts))
    assert [r["text"] for r in replies] == texts


# -- close ----------------------------------------------------------------------------------------------


async def test_close_ends_a_well_behaved_child_by_closing_stdin() -> None:
    with capture_logs() as logs:
        async with opened() as session:
            pass
    assert session.returncode == 0
    stopped = [e for e in logs if e["event"] == "upstream.child_stopped"]
    assert stopped and stopped[0]["how"] == "stdin closed"


async def test_close_escalates_to_sigterm() -> None:
    async with opened("--ignore-eof", stdin_grace=0.2) as session:
        pass
    assert session.returncode == -signal.SIGTERM


async def test_close_escalates_to_sigkill_in_bounded_time() -> None:
    started = time.monotonic()
    async with opened("--ignore-eof", "--ignore-term", stdin_grace=0.2, term_grace=0.2) as session:
        pass
    assert session.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 5


async def test_close_reaches_the_whole_process_group() -> None:
    async with opened("--grandchild", "--ignore-eof", stdin_grace=0.2) as session:
        grandchild = (await call_tool(session, "grandchild_pid"))["pid"]
        assert process_state(grandchild) not in (None, "Z")
    await eventually(lambda: process_state(grandchild) in (None, "Z"), "the grandchild is gone")


async def test_close_during_a_call_fails_it_and_close_twice_is_harmless() -> None:
    session = StdioSession(settings(), refuse)
    await session.open()
    inbox: Inbox = Inbox()
    await session.call("tools/call", {"name": "hang", "arguments": {}}, inbox)
    await session.close()
    await session.close()
    assert await next_item(inbox) == TransportLost("session closed")
    assert session.returncode is not None


# -- with the pool --------------------------------------------------------------------------------------


async def test_pool_opens_a_fresh_child_after_one_dies_and_keeps_its_cap() -> None:
    key = PoolKey(ClientCapabilities())

    async def factory(_: PoolKey) -> UpstreamSession:
        session = StdioSession(settings(), refuse)
        try:
            await session.open()
        except BaseException:
            await session.close()
            raise
        return session

    pool = SessionPool("fake", factory, max_sessions=1, idle_ttl=60)
    try:
        first = await pool.acquire(key)
        assert isinstance(first, StdioSession) and first.pid is not None
        with pytest.raises(PoolExhausted):
            await pool.acquire(key)  # one child per receiving call, at most max_sessions of them
        inbox: Inbox = Inbox()
        await first.call("tools/call", {"name": "hang", "arguments": {}}, inbox)
        os.kill(first.pid, signal.SIGKILL)
        assert isinstance(await next_item(inbox), TransportLost)
        first.end_call()
        pool.release(key, first, reusable=False)

        second = await pool.acquire(key)
        assert isinstance(second, StdioSession) and second.pid != first.pid and second.alive
        reply = await second.request("tools/call", {"name": "echo", "arguments": {"text": "ok"}}, WAIT)
        assert isinstance(reply, jsonrpc.Result) and reply.result == {"text": "ok"}
        pool.release(key, second, reusable=True)
    finally:
        await pool.close()
    assert fake_children() == []


async def test_another_replicas_call_cannot_be_resumed_on_a_child() -> None:
    async with opened() as session:
        with pytest.raises(UpstreamError, match="another replica's call cannot be resumed"):
            await session.resume_call(Inbox(), 1, "event-1")
        assert session.alive
