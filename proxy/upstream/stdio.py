"""A legacy MCP server run as a child process: newline-delimited JSON-RPC on its stdin and stdout.

One child process is one session, and carries at most one receiving call: stdio server requests carry no
link to the call they belong to, so every server request the child sends while a call runs belongs to that
call. The pool gives each receiving call a child of its own; `pool.max_sessions` caps the children.

- **Start**, **stderr** and **stopping** the child: child.py (a minimal environment, a process group of its
  own, stderr logged line by line, stdin closed then SIGTERM then SIGKILL on close).
- **Framing**: one JSON-RPC message per line, UTF-8, written under a lock; lines longer than
  `max_line_bytes` (`upstreams[].max_message_bytes`, 16 MiB) end the session. A line that is not one
  JSON-RPC message is logged and skipped.
- **Routing** (`router.py`): responses to their waiter, server requests and the call's notifications
  (progress, logging) to the receiving call; session-wide notifications (list changes, resource updates)
  are dropped, as on a streamable-http standalone stream.
- **Death**: when the child exits (or closes its stdout) the session goes dead: every waiter fails and the
  receiving call gets `TransportLost` naming the exit code or signal; the pool opens a fresh child next time.
- **Close**: the child is stopped (child.py) and always waited for.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import structlog

from proxy.upstream.base import Inbox, UpstreamError
from proxy.upstream.child import (
    INHERITED_ENV,
    child_env,
    describe_exit,
    next_message,
    read_stderr,
    spawn,
    terminate,
)
from proxy.upstream.propagation import detach_from_request
from proxy.upstream.router import NoCallAnswer, negotiate
from proxy.upstream.session_core import SessionCore
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger(__name__)

MAX_LINE_BYTES: Final = 16 * 1024 * 1024
MAX_STDERR_LINE_BYTES: Final = 4096
_DRAIN_GRACE: Final = 1.0  # after the child exits: time to read what it wrote before it died
_EXIT_GRACE: Final = 2.0  # after stdout ends: time for the child to exit before it counts as hung


@dataclass(frozen=True, slots=True)
class StdioSettings:
    upstream: str  # the upstream's name, for the log
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # over the inherited minimal environment
    cwd: Path | None = None
    versions: tuple[str, ...] = mcp.LEGACY_VERSIONS
    capabilities: Mapping[str, Any] = field(default_factory=dict)  # legacy capabilities for initialize
    initialize_timeout: float = 30.0
    connect_timeout: float = 10.0  # timeouts.connect_s: from starting the child to its first answer
    write_timeout: float = 30.0  # longest wait for the child to take a message off its stdin
    stdin_grace: float = 2.0  # on close: wait after closing stdin, before SIGTERM
    term_grace: float = 2.0  # on close: wait after SIGTERM, before SIGKILL
    max_line_bytes: int = MAX_LINE_BYTES
    max_stderr_line_bytes: int = MAX_STDERR_LINE_BYTES


class StdioSession(SessionCore):
    """Implements `UpstreamSession` over a child process's stdin and stdout. stdio has no session id; a
    local one names the child (`stdio:<pid>:<random>`)."""

    def __init__(self, settings: StdioSettings, no_call: NoCallAnswer) -> None:
        super().__init__(no_call)
        self._settings = settings
        self._proc: asyncio.subprocess.Process | None = None
        self._closing = False
        self._write_lock = asyncio.Lock()
        self._stderr_task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Start the child, negotiate `initialize`, send `notifications/initialized`. Raises UpstreamError."""
        settings = self._settings
        self._proc = await spawn(settings)
        pid = self._proc.pid
        self._session_id = f"stdio:{pid}:{secrets.token_hex(4)}"
        self._stderr_task = self._spawn(self._read_stderr(self._proc))
        self._spawn(self._supervise(self._proc))
        self._info = await negotiate(
            self._exchange,
            settings.versions,
            settings.capabilities,
            settings.initialize_timeout,
            first_timeout=settings.connect_timeout,
        )
        await self.send(jsonrpc.Notification(mcp.INITIALIZED, {}))
        self._alive = self._lost is None

    async def close(self) -> None:
        self._closing = True
        self._die("session closed")
        if self._proc is not None:
            await asyncio.shield(self._stop())
            if self._stderr_task is not None:  # the child's last words, if it is still saying them
                await asyncio.wait({self._stderr_task}, timeout=_DRAIN_GRACE)
        await self._cancel_tasks()

    # -- UpstreamSession ----------------------------------------------------------------------------------

    async def resume_call(self, inbox: Inbox, request_id: jsonrpc.RequestId, last_event_id: str) -> None:
        raise UpstreamError(
            "a stdio upstream runs inside the proxy that started it: another replica's call cannot be resumed"
        )

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        await self._deliver(message)

    # -- internals ----------------------------------------------------------------------------------------

    async def _deliver(self, msg: jsonrpc.Message) -> None:
        """One message, one line. Raises UpstreamError when the child is gone or does not read its stdin."""
        data = jsonrpc.dumps(msg) + b"\n"
        timeout = self._settings.write_timeout
        try:
            async with asyncio.timeout(timeout), self._write_lock:
                stdin = self._proc.stdin if self._proc is not None else None
                if self._lost is not None or stdin is None:
                    raise UpstreamError(self._lost or "upstream process not started")
                stdin.write(data)  # the whole line goes into the pipe's buffer at once: framing stays intact
                await stdin.drain()
        except TimeoutError:
            raise UpstreamError(f"upstream process did not read its stdin for {timeout:g}s") from None
        except (ConnectionError, RuntimeError) as exc:  # RuntimeError: uvloop, a pipe already closed
            raise UpstreamError(
                self._lost or f"could not write to the upstream process: {type(exc).__name__}"
            ) from None

    async def _read_stdout(self, proc: asyncio.subprocess.Process) -> str | None:
        """Dispatch every line the child writes; returns why reading stopped early, or None at EOF."""
        while True:
            await self._until_answered()  # a child flooding us with requests waits for their answers
            msg = await next_message(proc, self._settings)
            if not isinstance(msg, jsonrpc.Message):
                return msg  # the reason reading stopped, or None at EOF
            self._dispatch_one_stream(msg)

    async def _supervise(self, proc: asyncio.subprocess.Process) -> None:
        """Read stdout until the child exits or stdout ends; then the session is dead."""
        detach_from_request()  # the child is the session's, not the request's that started it
        reader = asyncio.ensure_future(self._read_stdout(proc))
        exited = asyncio.ensure_future(proc.wait())
        try:
            await asyncio.wait({reader, exited}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                try:
                    problem = reader.result()
                except Exception as exc:  # a bug in routing must not leave the session half alive
                    problem = f"reading the upstream failed: {type(exc).__name__}: {exc}"
                if problem is not None:
                    self._die(problem)
                    await asyncio.shield(self._stop())
                    return
                await asyncio.wait({exited}, timeout=_EXIT_GRACE)  # stdout ended: the child is exiting
            else:
                await asyncio.wait({reader}, timeout=_DRAIN_GRACE)  # read what it wrote before it died
            if exited.done():
                self._die(describe_exit(exited.result()))
            else:
                self._die("upstream process closed its stdout")
                await asyncio.shield(self._stop())
        finally:
            for task in (reader, exited):
                task.cancel()
            await asyncio.gather(reader, exited, return_exceptions=True)

    def _die(self, reason: str) -> None:
        if self._lose(reason) and not self._closing:
            log.warning("upstream.child_lost", upstream=self._settings.upstream, pid=self.pid, reason=reason)

    def _stop(self) -> asyncio.Future[None]:
        """Stop the child (once, however many ask): closes stdin, then SIGTERM, then SIGKILL; reaps it."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._terminate())
        return self._stopping

    async def _terminate(self) -> None:
        assert self._proc is not None
        await terminate(self._proc, self._settings)

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        detach_from_request()
        await read_stderr(proc, self._settings)


__all__ = ["INHERITED_ENV", "MAX_LINE_BYTES", "StdioSession", "StdioSettings", "child_env", "describe_exit"]
