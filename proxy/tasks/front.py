"""The Tasks extension on the 2026-07-28 front: `tools/call` that may become a task, and `tasks/*`.

`ModernFront` hands over a `tools/call` when `applies` says so, and every `tasks/get`, `tasks/update` and
`tasks/cancel`. A task id names its owner replica: a request for a task held elsewhere gets `Forward(owner)`
and goes there exactly as a retry of a parked call does (proxy/front/peers.py).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from proxy.calls.outcomes import (
    CallRequest,
    Failed,
    Forward,
    NeedsInput,
    NotificationSink,
    Outcome,
    OwnerGone,
    Running,
)
from proxy.handle import HandleCodec, HandleError
from proxy.observe.line import Outcome as Said
from proxy.observe.line import RequestLine
from proxy.tasks.ids import TaskClaims, open_task_id
from proxy.tasks.manager import TaskManager, TaskRecord
from proxy.tasks.policy import TaskPolicy, advertise, declares_tasks, missing_capability
from proxy.translate.request import ModernRequest
from proxy.wire import jsonrpc, mcp

TASK_STATUS = "notifications/tasks"


@dataclass(frozen=True, slots=True)
class TaskCreated:
    """The call became a task: the client gets this `CreateTaskResult`."""

    result: Mapping[str, Any]
    task: str  # the task's key (for the log)


class TaskFront:
    def __init__(
        self,
        manager: TaskManager,
        policy: TaskPolicy,
        codec: HandleCodec,
        owner: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.manager = manager
        self._policy = policy
        self._codec = codec
        self._owner = owner
        self._clock = clock

    def capabilities(self, upstream: Mapping[str, Any]) -> dict[str, Any]:
        """`server/discover`'s capabilities: the upstream's, with the extension when tasks are on."""
        return advertise(upstream, enabled=self._policy.enabled)

    def applies(self, req: ModernRequest) -> bool:
        """Is this request's `tools/call` ours: may it become a task, or must it (a forced tool)?"""
        if req.request.method != "tools/call":
            return False
        name = req.request.params.get("name")
        if self._policy.forced(name):
            return True
        return declares_tasks(req.request.params) and self._policy.plan(name) is not None

    async def call(
        self,
        call: CallRequest,
        req: ModernRequest,
        notify: NotificationSink,
        *,
        local_only: bool,
        owner_gone: OwnerGone | None = None,
    ) -> Outcome | TaskCreated:
        """Run (or resume) the call; it becomes a task as the policy says. Raises InvalidRequestState."""
        name = call.params.get("name")
        plan = self._policy.plan(name)
        if not declares_tasks(req.request.params) or plan is None:
            return Failed(missing_capability(f"the tool {name!r}"))  # a forced tool, no extension
        calls = self.manager.calls
        if req.request_state is None:
            outcome = await calls.start(call, notify, yield_after=plan.yield_after)
        else:
            outcome = await calls.resume(
                call,
                req.request_state,
                req.input_responses,
                notify,
                local_only=local_only,
                owner_gone=owner_gone,
                yield_after=plan.yield_after,
            )
        if isinstance(outcome, Running) or (isinstance(outcome, NeedsInput) and plan.task_on_input):
            record = self.manager.adopt(call, outcome)
            return TaskCreated(record.state.created(record.handle), record.key)
        return outcome

    async def handle(
        self, upstream: str, req: ModernRequest, principal: str, line: RequestLine, *, local_only: bool
    ) -> jsonrpc.Response | Forward:
        """`tasks/get`, `tasks/update`, `tasks/cancel`."""
        msg = req.request
        if not declares_tasks(msg.params):
            line.set_outcome(Said.FAILED, jsonrpc.MISSING_CLIENT_CAPABILITY)
            return jsonrpc.Error(msg.id, missing_capability(msg.method))
        try:
            claims = open_task_id(self._codec, msg.params.get("taskId"), now=self._clock())
            _check_binding(claims, upstream, principal)
        except HandleError as exc:
            line.set_outcome(Said.TASK_NOT_FOUND, reason=exc.reason)
            what = "Task has expired" if exc.reason == "expired" else "Task not found"
            return jsonrpc.error(msg.id, jsonrpc.INVALID_PARAMS, f"Failed to retrieve task: {what}")
        if claims.owner != self._owner and not local_only:
            return Forward(claims.owner)
        record = self.manager.get(claims.task)
        if record is not None and record.state.expires_at <= self._clock():  # before housekeeping reaps it
            line.set_outcome(Said.TASK_NOT_FOUND)
            return jsonrpc.error(msg.id, jsonrpc.INVALID_PARAMS, "Failed to retrieve task: Task has expired")
        if record is None:
            line.set_outcome(Said.TASK_NOT_FOUND)
            why = "its proxy replica is gone" if claims.owner != self._owner else "this proxy restarted"
            return jsonrpc.error(
                msg.id,
                jsonrpc.INVALID_PARAMS,
                f"Failed to retrieve task: Task not found ({why}); its call was not re-run",
            )
        line.task = record.key
        line.task_status = record.state.status
        return await self._on(record, req, line)

    def upstream_of(self, token: object) -> str | None:
        """The upstream a task id this deployment issued names (an aggregated route routes `tasks/*` by
        it); None for anything else."""
        try:
            return open_task_id(self._codec, token, now=self._clock()).upstream
        except HandleError:
            return None

    def watch(
        self, token: str, upstream: str, principal: str, push: Callable[[jsonrpc.Notification], None]
    ) -> Callable[[], None] | None:
        """For `subscriptions/listen` `taskIds`: push `notifications/tasks` (the DetailedTask) for the task
        `token` names, now and at every change. None when it is not a task of this client on this replica."""
        try:
            claims = open_task_id(self._codec, token, now=self._clock())
            _check_binding(claims, upstream, principal)
        except HandleError:
            return None
        record = self.manager.get(claims.task) if claims.owner == self._owner else None
        if record is None:
            return None

        def notify(changed: TaskRecord) -> None:
            push(jsonrpc.Notification(TASK_STATUS, changed.state.detailed(changed.handle)))

        notify(record)
        return self.manager.watch(record, notify)

    async def _on(self, record: TaskRecord, req: ModernRequest, line: RequestLine) -> jsonrpc.Response:
        msg = req.request
        if msg.method == mcp.TASKS_UPDATE:
            if not isinstance(msg.params.get("inputResponses"), dict):
                line.set_outcome(Said.FAILED, jsonrpc.INVALID_PARAMS)
                return jsonrpc.error(
                    msg.id, jsonrpc.INVALID_PARAMS, "params.inputResponses must be an object"
                )
            problem = await self.manager.update(record, req.input_responses)
            if problem is not None:
                line.set_outcome(Said.FAILED, problem.code)
                return jsonrpc.Error(msg.id, problem)
        elif msg.method == mcp.TASKS_CANCEL:
            await self.manager.cancel(record)
        line.set_outcome(Said.COMPLETE)
        if msg.method == mcp.TASKS_GET:
            return jsonrpc.Result(
                msg.id, {"resultType": mcp.RESULT_COMPLETE, **record.state.detailed(record.handle)}
            )
        return jsonrpc.Result(msg.id, {"resultType": mcp.RESULT_COMPLETE})  # the ack of update and cancel


def _check_binding(claims: TaskClaims, upstream: str, principal: str) -> None:
    """A task id is only good for the upstream and the principal it was issued to ("not found" otherwise)."""
    if claims.upstream != upstream:
        raise HandleError("wrong_upstream")
    if not hmac.compare_digest(_utf8(claims.principal), _utf8(principal)):
        raise HandleError("wrong_principal")


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
