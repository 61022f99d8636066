"""A stateless 2026-07-28 client over a stdio child (basic_transports_stdio.mdx): newline-delimited JSON-RPC
on the child's stdin and stdout, no `initialize`, every request carrying its own `_meta`.

One child per upstream (`ModernChildren`), shared by every request to it, never one per request: a
2026-07-28 server keeps nothing between requests, so any request may go to any child. It is started at the
first request (the era probe's `server/discover`, era.py, when the era is probed), and again at the next
request after it died: the spec's "the client SHOULD restart it". The child itself is started, its stderr
logged and it is stopped by child.py, as a legacy stdio session's is; lines are bounded by
`upstreams[].max_message_bytes` (a longer one ends the child).

- **Many requests in flight**, matched by id: each request goes to the child under an id of the proxy's
  own (the clients' ids of different clients would clash on one channel), and its answer comes back to its
  caller under the caller's id. A pending-call registry keeps the waiters; a waiter is popped in a
  `finally`, and when the child dies every waiter still there fails with an `UpstreamError` naming the exit
  code or signal (in-flight requests are lost, as the spec says; the client may send them again).
- **Notifications of a request** reach its caller in order, handed over apart from the channel's reader (a
  caller slow to take them holds up no other request; past `_MAX_QUEUED_NOTES` waiting, more are dropped;
  those that came before the answer are taken before it is returned): `notifications/progress` by its
  `progressToken` (made unique on the channel by the proxy, and given back as the caller's),
  `notifications/message` to the one
  request in flight that asked for logs (`_meta` `logLevel`; with several, the channel cannot say whose
  it is and it is dropped: 2026-07-28 deprecates protocol logging, a stdio server logs to stderr), and
  a `subscriptions/listen` stream's notifications to that listen request by their `subscriptionId` (the
  listen request's id on the channel, given back as the caller's). Anything else (another request's, a
  request, which the binding forbids) is dropped, logged at debug.
- **Cancellation**: a request whose caller goes away or times out gets `notifications/cancelled` with the
  id the child knows it by.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

import structlog

from proxy.config import UpstreamConfig
from proxy.upstream.base import NotDelivered, UpstreamError
from proxy.upstream.child import (
    ProbationStderr,
    describe_exit,
    exited,
    next_message,
    read_stderr,
    spawn,
    terminate,
)
from proxy.upstream.connect import stdio_settings
from proxy.upstream.modern import Notify
from proxy.upstream.propagation import detach_from_request
from proxy.upstream.stdio import StdioSettings
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger("proxy.upstream.stdio")

_PROGRESS_PREFIX: Final = "mrtr-proxy:"  # the progress tokens the proxy gives its requests on a channel
_DRAIN_GRACE: Final = 1.0  # after the child exits: time to read what it wrote before it died
_WRITE_TIMEOUT: Final = 30.0
_MAX_QUEUED_NOTES: Final = 256  # per request, while its caller is slow to take them: more are dropped
_NOTES_GRACE: Final = 10.0  # after the answer: time for the caller to take the notes that came before it

Lost = Callable[[str, str], None]  # (upstream, why): a modern child died


@dataclass(slots=True)
class _Pending:
    rid: jsonrpc.RequestId  # the caller's id
    answer: asyncio.Future[jsonrpc.Response]
    token: object  # the caller's progressToken (None: it asked for no progress)
    on_note: Notify | None
    logs: bool  # it asked for log messages
    notes: deque[jsonrpc.Notification] = field(default_factory=deque)  # not yet handed to on_note
    pump: asyncio.Task[None] | None = None  # hands them over, in order


class ModernChild:
    """One 2026-07-28 stdio child and the requests in flight on it."""

    def __init__(
        self,
        settings: StdioSettings,
        on_lost: Callable[[str], None] | None = None,
        *,
        probation: bool = False,
    ) -> None:
        self._settings = settings
        self._stderr = ProbationStderr(settings, held=probation)  # on probation: the era probe's child
        self._on_lost = on_lost
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._lost: str | None = None
        self._write_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping: asyncio.Future[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._lost is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def start(self) -> None:
        """Start the child (no handshake: a 2026-07-28 server needs none). Raises UpstreamError."""
        self._proc = await spawn(self._settings)
        self._spawn(self._read_stderr(self._proc))
        self._spawn(self._supervise(self._proc))

    async def request(
        self, msg: jsonrpc.Request, on_note: Notify | None = None, timeout: float | None = None
    ) -> jsonrpc.Response:
        """The child's answer to `msg` (under `msg`'s id); its notifications go to `on_note` meanwhile.
        Raises UpstreamError (the child is gone, or died before answering) and TimeoutError."""
        if self._lost is not None or self._proc is None:  # nothing of it written: it never ran
            raise NotDelivered(self._lost or "upstream process not started")
        ours = next(self._ids)
        params = dict(msg.params)
        meta = dict(params.get("_meta") or {})
        token = meta.get("progressToken")
        if token is not None:
            meta["progressToken"] = f"{_PROGRESS_PREFIX}{ours}"
            params["_meta"] = meta
        waiting = _Pending(
            msg.id, asyncio.get_running_loop().create_future(), token, on_note, mcp.META_LOG_LEVEL in meta
        )
        self._pending[ours] = waiting
        try:
            await self._write(jsonrpc.Request(ours, msg.method, params))
            async with asyncio.timeout(timeout):
                answer = await waiting.answer
            self._pending.pop(ours, None)
            if waiting.pump is not None:  # the notes that came before the answer go before it
                await asyncio.wait({waiting.pump}, timeout=_NOTES_GRACE)
        except BaseException:
            if not waiting.answer.done() and self._lost is None:  # the child works on: tell it to stop
                self._spawn(self._cancel(ours))
            raise
        finally:
            self._pending.pop(ours, None)
            if waiting.pump is not None:
                waiting.pump.cancel()
        if isinstance(answer, jsonrpc.Result):
            return jsonrpc.Result(msg.id, answer.result)
        return jsonrpc.Error(msg.id, answer.error)

    async def close(self) -> None:
        self._die("closed", quiet=True)
        if self._proc is not None:
            await asyncio.shield(self._stop())
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- internals ----------------------------------------------------------------------------------------

    async def _write(self, msg: jsonrpc.Message) -> None:
        data = jsonrpc.dumps(msg) + b"\n"
        try:
            async with asyncio.timeout(_WRITE_TIMEOUT), self._write_lock:
                stdin = self._proc.stdin if self._proc is not None else None
                if self._lost is not None or stdin is None:
                    raise NotDelivered(self._lost or "upstream process not started")
                stdin.write(data)  # the whole line goes into the pipe's buffer at once: framing stays intact
                await stdin.drain()
        except TimeoutError:
            raise UpstreamError(f"upstream process did not read its stdin for {_WRITE_TIMEOUT:g}s") from None
        except (ConnectionError, RuntimeError) as exc:
            raise UpstreamError(
                self._lost or f"could not write to the upstream process: {type(exc).__name__}"
            ) from None

    async def _cancel(self, ours: int) -> None:
        note = jsonrpc.Notification(mcp.CANCELLED, {"requestId": ours, "reason": "the client went away"})
        with contextlib.suppress(UpstreamError):
            await self._write(note)

    async def _read_stdout(self, proc: asyncio.subprocess.Process) -> str | None:
        while True:
            msg = await next_message(proc, self._settings)
            if not isinstance(msg, jsonrpc.Message):
                return msg  # the reason reading stopped, or None at EOF
            await self._route(msg)

    async def _route(self, msg: jsonrpc.Message) -> None:
        if isinstance(msg, jsonrpc.Result | jsonrpc.Error):
            waiting = self._pending.get(msg.id) if isinstance(msg.id, int) else None
            if waiting is not None and not waiting.answer.done():
                waiting.answer.set_result(msg)
            return
        if isinstance(msg, jsonrpc.Notification):
            target, item = self._note_for(msg)
            if target is not None and target.on_note is not None:  # never waited for here: a slow caller
                if len(target.notes) >= _MAX_QUEUED_NOTES:  # must not hold up the others on the channel
                    log.debug("upstream.note_dropped", upstream=self._settings.upstream, method=item.method)
                    return
                target.notes.append(item)
                if target.pump is None or target.pump.done():
                    target.pump = asyncio.ensure_future(self._pump(target, target.on_note))
                return
        log.debug("upstream.unrouted", upstream=self._settings.upstream, kind=type(msg).__name__)

    async def _pump(self, target: _Pending, on_note: Notify) -> None:
        while target.notes:
            try:
                await on_note(target.notes.popleft())
            except Exception:  # a caller's failing callback ends nothing but its own notes
                log.exception("upstream.note_failed", upstream=self._settings.upstream)

    def _note_for(self, note: jsonrpc.Notification) -> tuple[_Pending | None, jsonrpc.Notification]:
        if note.method == mcp.PROGRESS:
            token = note.params.get("progressToken")
            ours = token.removeprefix(_PROGRESS_PREFIX) if isinstance(token, str) else ""
            if isinstance(token, str) and token.startswith(_PROGRESS_PREFIX) and ours.isdigit():
                waiting = self._pending.get(int(ours))
                if waiting is not None:
                    return waiting, jsonrpc.Notification(
                        note.method, {**note.params, "progressToken": waiting.token}
                    )
        elif isinstance(meta := note.params.get("_meta"), dict) and mcp.META_SUBSCRIPTION_ID in meta:
            sub = meta[mcp.META_SUBSCRIPTION_ID]  # the listen request's id: ours on the channel
            waiting = self._pending.get(sub) if isinstance(sub, int) else None
            if waiting is not None:
                theirs = {**meta, mcp.META_SUBSCRIPTION_ID: waiting.rid}
                return waiting, jsonrpc.Notification(note.method, {**note.params, "_meta": theirs})
        elif note.method == mcp.LOG_MESSAGE:
            asking = [p for p in self._pending.values() if p.logs]
            if len(asking) == 1:
                return asking[0], note
        return None, note

    async def _supervise(self, proc: asyncio.subprocess.Process) -> None:
        detach_from_request()  # the child is the upstream's, not the request's that started it
        reader = asyncio.ensure_future(self._read_stdout(proc))
        ended = asyncio.ensure_future(proc.wait())
        try:
            await asyncio.wait({reader, ended}, return_when=asyncio.FIRST_COMPLETED)
            problem = None
            if reader.done():
                try:
                    problem = reader.result()
                except Exception as exc:  # a bug in routing must not leave the child half alive
                    problem = f"reading the upstream failed: {type(exc).__name__}: {exc}"
                if problem is None and not await exited(proc, _DRAIN_GRACE * 2):
                    problem = "upstream process closed its stdout"
            else:
                await asyncio.wait({reader}, timeout=_DRAIN_GRACE)  # read what it wrote before it died
            self._die(problem or describe_exit(proc.returncode if proc.returncode is not None else -9))
            await asyncio.shield(self._stop())
        finally:
            for task in (reader, ended):
                task.cancel()
            await asyncio.gather(reader, ended, return_exceptions=True)

    def _die(self, reason: str, *, quiet: bool = False) -> None:
        if self._lost is not None:
            return
        self._lost = reason
        for waiting in self._pending.values():
            if not waiting.answer.done():
                waiting.answer.set_exception(UpstreamError(reason))
        if not quiet:
            log.warning("upstream.child_lost", upstream=self._settings.upstream, pid=self.pid, reason=reason)
            if self._on_lost is not None:
                self._on_lost(reason)

    def _stop(self) -> asyncio.Future[None]:
        if self._stopping is None:
            assert self._proc is not None
            self._stopping = asyncio.ensure_future(terminate(self._proc, self._settings))
        return self._stopping

    def release_stderr(self) -> None:
        """The era probe keeps this child: its held stderr is logged, and every later line as it comes."""
        self._stderr.release(self.pid or 0)

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        detach_from_request()
        try:
            await read_stderr(proc, self._settings, lambda line: self._stderr.line(proc.pid, line))
        finally:  # still held at its end: a child the probe found legacy (retired), its stderr one line
            self._stderr.ended(proc.pid)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class ModernChildren:
    """The 2026-07-28 child of every stdio upstream: started when first needed, started again after it
    died, stopped at `close`. `on_lost(upstream, why)` hears of every death (era.py probes again)."""

    def __init__(self, upstreams: Mapping[str, UpstreamConfig]) -> None:
        self._settings = {
            name: stdio_settings(up, (), {}) for name, up in upstreams.items() if up.command is not None
        }
        self._children: dict[str, ModernChild] = {}
        self._locks = {name: asyncio.Lock() for name in self._settings}
        self._retired: set[asyncio.Task[None]] = set()
        self.on_lost: Lost | None = None

    def __contains__(self, name: object) -> bool:
        return name in self._settings

    def child(self, name: str) -> ModernChild | None:
        """The upstream's current child (for tests and the log), if any."""
        return self._children.get(name)

    async def request(
        self,
        name: str,
        msg: jsonrpc.Request,
        on_note: Notify | None = None,
        timeout: float | None = None,
        *,
        probe: bool = False,
    ) -> jsonrpc.Response:
        """`msg` sent to the upstream's child (started if none is alive). Raises as `ModernChild.request`.
        `probe`: the era probe's request; a child it starts is on probation (its stderr held) until
        `settled` or `retire`."""
        child = await self._live(name, probe)
        return await child.request(msg, on_note, timeout)

    def settled(self, name: str) -> None:
        """The era probe keeps the upstream's child (see `ModernChild.release_stderr`)."""
        child = self._children.get(name)
        if child is not None:
            child.release_stderr()

    async def retire(self, name: str) -> None:
        """Stop the upstream's child (the probe found a legacy server: its sessions run children of their
        own)."""
        child = self._children.pop(name, None)
        if child is not None:
            await child.close()

    async def close(self) -> None:
        children, self._children = list(self._children.values()), {}
        await asyncio.gather(*(c.close() for c in children), *self._retired, return_exceptions=True)

    async def _live(self, name: str, probe: bool = False) -> ModernChild:
        child = self._children.get(name)
        if child is not None and child.alive:
            return child
        async with self._locks[name]:  # one start at a time; those waiting share the new child
            child = self._children.get(name)
            if child is not None and child.alive:
                return child
            if child is not None:
                self._reap(child)
            fresh = ModernChild(self._settings[name], lambda why: self._lost(name, why), probation=probe)
            await fresh.start()
            self._children[name] = fresh
            return fresh

    def _lost(self, name: str, why: str) -> None:
        if self.on_lost is not None:
            self.on_lost(name, why)

    def _reap(self, child: ModernChild) -> None:
        task = asyncio.ensure_future(child.close())
        self._retired.add(task)
        task.add_done_callback(self._retired.discard)


__all__ = ["ModernChild", "ModernChildren"]
