"""Tasks on this replica: legacy calls driven in the background by the call service, their state and TTL.

A call becomes a task when the request that started it hands it over (`adopt`): either still running
(`Running`: a kept asyncio task drives it on with `CallService.drive`), or parked on its first input
requests (`NeedsInput`: it waits for `tasks/update`). `update` delivers answers to the parked legacy
requests (unknown or already-answered keys are ignored); once nothing is pending the call is driven on.
`cancel` ends the call upstream. A task is kept, finished or not, until its TTL (from creation) ends; one
still running then is cancelled upstream. Nothing here is re-run: a call that fails, fails the task.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from proxy.calls.outcomes import CallRequest, Completed, Failed, NeedsInput, Outcome, Running
from proxy.calls.registry import LiveCall
from proxy.calls.service import CallService
from proxy.calls.wording import internal_error, task_ended
from proxy.handle import HandleCodec
from proxy.tasks.ids import TaskClaims, seal_task_id
from proxy.tasks.state import TaskState
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject

log = structlog.get_logger(__name__)

Watcher = Callable[["TaskRecord"], None]


@dataclass(frozen=True, slots=True)
class TaskSettings:
    ttl_ms: int
    poll_interval_ms: int
    owner: str  # this replica's address, named in every task id
    max_tasks: int  # records kept (finished ones are evicted first, oldest first)


@dataclass(slots=True, eq=False)
class TaskRecord:
    key: str  # the task's key here (inside its id)
    handle: str  # the sealed task id the client holds
    request: CallRequest
    state: TaskState
    call: LiveCall | None = None
    driver: asyncio.Task[None] | None = None
    relaunched: bool = False
    watchers: list[Watcher] = field(default_factory=list)


class TaskManager:
    def __init__(
        self,
        calls: CallService,
        codec: HandleCodec,
        settings: TaskSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.calls = calls
        self._codec = codec
        self._settings = settings
        self._clock = clock
        self._tasks: dict[str, TaskRecord] = {}
        self._drivers: set[asyncio.Task[None]] = set()  # kept, so no driver is collected mid-run

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[TaskRecord]:
        return iter(list(self._tasks.values()))

    def get(self, key: str) -> TaskRecord | None:
        return self._tasks.get(key)

    def adopt(self, request: CallRequest, outcome: Running | NeedsInput) -> TaskRecord:
        """Make a call a task. When this returns, `tasks/get` finds it (SEP-2663: durably created)."""
        now = self._clock()
        state = TaskState(now, self._settings.ttl_ms, self._settings.poll_interval_ms)
        key = secrets.token_urlsafe(16)
        claims = TaskClaims(
            upstream=request.upstream,
            task=key,
            owner=self._settings.owner,
            principal=request.principal,
            issued_at=int(now),
            expires_at=math.ceil(state.expires_at),
        )
        record = TaskRecord(key, seal_task_id(self._codec, claims), request, state)
        self._make_room()
        self._tasks[key] = record
        self._attach(record, outcome)
        log.info("task.created", task=key, upstream=request.upstream, status=state.status)
        return record

    async def update(self, record: TaskRecord, responses: Mapping[str, Any]) -> ErrorObject | None:
        """`tasks/update`: answer some or all outstanding input requests. Keys that are not outstanding are
        ignored. An ErrorObject only for a malformed answer (then nothing was delivered)."""
        state, call = record.state, record.call
        answers = {k: v for k, v in responses.items() if k in state.input_requests}
        if state.status != "input_required" or call is None or not answers:
            return None
        failed = await self.calls.answer(call, answers)
        if failed is not None:
            if self.calls.registry.get(call.id) is call:
                return failed.error  # a malformed answer: the call is untouched
            self._settle(record, failed)  # the upstream could not take it: the call was abandoned
            return None
        remaining = {k: v for k, v in state.input_requests.items() if k in call.exchange.pending}
        if state.need_input(remaining, self._clock()) and not remaining:
            self._start_driver(record)
        self._changed(record)
        return None

    async def cancel(
        self, record: TaskRecord, reason: str = "cancelled by the client (tasks/cancel)"
    ) -> None:
        """`tasks/cancel`: the task is cancelled, its call ended upstream. A finished task stays as it is."""
        if record.state.cancel(self._clock()):
            self._changed(record)
            log.info("task.cancelled", task=record.key, reason=reason)
            await self._stop(record, reason)

    def watch(self, record: TaskRecord, watcher: Watcher) -> Callable[[], None]:
        """Call `watcher(record)` on every status change; returns the unsubscribe function."""
        record.watchers.append(watcher)

        def unwatch() -> None:
            if watcher in record.watchers:
                record.watchers.remove(watcher)

        return unwatch

    async def reap_expired(self) -> int:
        """Forget tasks whose TTL ended; one still running is cancelled upstream first."""
        now = self._clock()
        registry = self.calls.registry
        for record in [r for r in self._tasks.values() if r.call is not None and registry.overdue(r.call)]:
            # Parked for less than the task's TTL (calls.first_round_ttl_s): nobody answered in time.
            if record.state.fail(task_ended("unanswered"), now):
                self._changed(record)
                await self._stop(record, "nobody answered the task's input requests in time")
        expired = [r for r in self._tasks.values() if r.state.expires_at <= now]
        for record in expired:
            del self._tasks[record.key]
            if record.state.fail(task_ended("expired"), now):
                self._changed(record)
                await self._stop(record, "the task's TTL elapsed")
        return len(expired)

    async def close(self) -> None:
        """Shutting down: every unfinished task fails and its call is cancelled upstream."""
        for record in self:
            if record.state.fail(task_ended("shut_down"), self._clock()):
                self._changed(record)
            await self._stop(record, "the proxy is shutting down")
        if self._drivers:
            await asyncio.wait(set(self._drivers))

    # -- internals ----------------------------------------------------------------------------------------

    def _attach(self, record: TaskRecord, outcome: Running | NeedsInput) -> None:
        now = self._clock()
        if isinstance(outcome, Running):
            record.call = outcome.call
            outcome.call.task = record.key
            record.state.work(now)
            self._start_driver(record)
        else:
            call = self.calls.registry.get(outcome.call)
            if call is None:  # pragma: no cover - parked calls are found until something awaits
                record.state.fail(task_ended("call_gone"), now)
            else:
                record.call, call.task = call, record.key
                self.calls.registry.park(call, self._remaining(record))  # parked for the task's lifetime
                record.state.need_input(outcome.input_requests, now)
        self._changed(record)

    def _start_driver(self, record: TaskRecord) -> None:
        if record.driver is not None and not record.driver.done():
            return
        driver = asyncio.ensure_future(self._drive(record))
        record.driver = driver
        self._drivers.add(driver)
        driver.add_done_callback(self._drivers.discard)

    async def _drive(self, record: TaskRecord) -> None:
        call = record.call
        if call is None or record.state.terminal:
            return
        if self.calls.registry.get(call.id) is not call:  # reaped or abandoned while it waited
            self._settle(record, Failed(task_ended("call_gone")))
            return
        try:
            outcome = await self.calls.drive(call, park_ttl=self._remaining(record))
        except Exception as exc:  # a bug must fail the task, not leave it "working" forever
            log.exception("task.driver_failed", task=record.key)
            outcome = Failed(internal_error(exc))
        if isinstance(outcome, Failed) and outcome.undelivered and not record.relaunched:
            # The upstream certainly never got the call (it restarted): start it once more, as `start` does.
            record.relaunched = True
            relaunched = await self.calls.start(record.request, yield_after=0.0)
            if isinstance(relaunched, Running | NeedsInput):
                self._attach(record, relaunched)
                return
            outcome = relaunched
        self._settle(record, outcome)

    def _settle(self, record: TaskRecord, outcome: Outcome) -> None:
        now, state = self._clock(), record.state
        match outcome:
            case Completed(response=jsonrpc.Result(result=result)):
                state.complete({**result, "resultType": mcp.RESULT_COMPLETE}, now)
            case Completed(response=jsonrpc.Error(error=error)) | Failed(error=error):
                state.fail(error, now)
            case NeedsInput(input_requests=requests):
                state.need_input(requests, now)
            case _:  # pragma: no cover - drive() never yields or forwards
                state.fail(ErrorObject(jsonrpc.INTERNAL_ERROR, f"Internal error: {outcome!r}"), now)
        if state.terminal:
            log.info("task.finished", task=record.key, status=state.status)
        self._changed(record)

    async def _stop(self, record: TaskRecord, reason: str) -> None:
        call, driver = record.call, record.driver
        if call is not None and self.calls.registry.get(call.id) is call:
            await self.calls.cancel(call, reason)
        if driver is not None and not driver.done() and driver is not asyncio.current_task():
            driver.cancel()
            await asyncio.wait({driver})

    def _remaining(self, record: TaskRecord) -> float:
        return max(0.0, record.state.expires_at - self._clock())

    def _make_room(self) -> None:
        while len(self._tasks) >= self._settings.max_tasks:
            finished = next((r for r in self._tasks.values() if r.state.terminal), None)
            if finished is None:
                return  # only unfinished tasks: the call registry's limits bound those
            del self._tasks[finished.key]

    def _changed(self, record: TaskRecord) -> None:
        for watcher in list(record.watchers):
            try:
                watcher(record)
            except Exception:  # a watcher must not break the task
                log.exception("task.watcher_failed", task=record.key)
