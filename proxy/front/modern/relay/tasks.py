"""The Tasks extension (SEP-2663) through the native relay, bound to the principal where it must be.

Where the upstream cannot tell users apart (routes/binding.py, decided per route and member), its task id
would be a bearer token: whoever presents it reads the task's result, answers its questions or cancels it.
So on such an upstream:

- a `tools/call` answered `resultType: "task"` reaches the client with the upstream's `taskId` sealed in a
  relay task handle (handle/relay_task.py, key-ring format 8) naming the upstream and the principal;
- `tasks/get`, `tasks/update` and `tasks/cancel` take that handle: it is unwrapped (another principal's,
  another upstream's, a forged or an expired one gets the extension's own `-32602 Failed to retrieve
  task: …` and never reaches the upstream) and the upstream's id goes up in its place (`Mcp-Name` too);
  the answer names the task by the client's handle again;
- `subscriptions/listen` `notifications.taskIds` are unwrapped the same way, and on the stream only the
  `notifications/tasks` of the tasks this listener asked for pass, each under its handle (a server that
  told one listener of another user's task would otherwise hand it over); the acknowledgement names the
  handles;
- any other `tasks/*` method (`tasks/list`, `tasks/result` of the 2025-11-25 tasks, which SEP-2663 removed)
  is refused with `-32601`: the upstream cannot scope a list to one user, so nothing it lists may pass.

Elsewhere (the client's own credential goes upstream) the upstream binds its tasks itself and every
`tasks/*` passes untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.handle import HandleCodec, HandleError
from proxy.handle.relay_task import (
    RelayTask,
    TaskIdTooLarge,
    check_relay_task,
    open_relay_task,
    seal_relay_task,
)
from proxy.wire import jsonrpc, mcp

TASK_NOTE = "notifications/tasks"
MAX_TASK_HANDLE_S = 7 * 24 * 3600  # the longest a relayed task handle lives, whatever the upstream's ttlMs
GRACE_S = 60  # beyond the task's own ttlMs: a poll just after the upstream's deadline gets its answer


class TaskRefused(Exception):
    """A bound task request that must not go upstream; `reason` is a handle's rejection or `unserved`."""

    def __init__(self, reason: str, token: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.token = token  # the handle refused, when a handle was


def refusal(rid: jsonrpc.RequestId, method: str, upstream: str, exc: TaskRefused) -> jsonrpc.Error:
    """The client's answer to a refused bound task request (not `unknown_key`: that one is a 503)."""
    if exc.reason == "unserved":
        text = (
            f"{method} is not served for upstream {upstream!r}: it cannot tell users apart, so what it "
            "would list or return is not scoped to you (use tasks/get with your task's id)"
        )
        return jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND, text)
    what = "Task has expired" if exc.reason == "expired" else "Task not found"
    return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"Failed to retrieve task: {what}")


@dataclass
class BoundTasks:
    """One request's view of the upstream's task ids: each one it may see, and the client's handle for it."""

    codec: HandleCodec
    upstream: str
    principal: str
    now: float
    default_ttl_s: float  # a task handle's life when the upstream gives no ttlMs
    handles: dict[str, str] = field(default_factory=dict)  # upstream task id → the client's handle

    def unwrap_params(self, method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """The params to send upstream: the client's handles replaced by the upstream's task ids. Raises
        TaskRefused. `params` itself when nothing in it names a task (most requests)."""
        if method in mcp.TASK_METHODS:
            return {**params, "taskId": self._unwrap(params.get("taskId"))}
        if method == mcp.LISTEN:
            notes = params.get("notifications")
            ids = notes.get("taskIds") if isinstance(notes, dict) else None
            if isinstance(notes, dict) and isinstance(ids, list) and ids:
                return {**params, "notifications": {**notes, "taskIds": [self._unwrap(t) for t in ids]}}
        elif method.startswith("tasks/"):
            raise TaskRefused("unserved")
        return params

    def wrap_result(self, method: str, result: Mapping[str, Any]) -> Mapping[str, Any]:
        """The upstream's result with its task ids replaced by the client's handles. Raises TaskIdTooLarge
        (a task id the proxy cannot seal)."""
        task_id = result.get("taskId")
        if not isinstance(task_id, str):
            return result
        if method == "tools/call" and result.get("resultType") == mcp.RESULT_TASK:
            return {**result, "taskId": self._wrap(task_id, result.get("ttlMs"))}
        if method in mcp.TASK_METHODS:  # the task it was asked about, by the handle the client knows
            known = self.handles.get(task_id)
            return {**result, "taskId": known} if known is not None else _without(result, "taskId")
        return result

    def note(self, note: jsonrpc.Notification) -> jsonrpc.Notification | None:
        """A notification of the upstream's stream as the client may see it: `notifications/tasks` only for
        a task this request named (under its handle), the listen acknowledgement naming the handles."""
        if note.method == TASK_NOTE:
            task_id = note.params.get("taskId")
            known = self.handles.get(task_id) if isinstance(task_id, str) else None
            return None if known is None else _renamed(note, {**note.params, "taskId": known})
        if note.method == mcp.LISTEN_ACKNOWLEDGED:
            honored = note.params.get("notifications")
            ids = honored.get("taskIds") if isinstance(honored, dict) else None
            if isinstance(honored, dict) and isinstance(ids, list):
                mine = [self.handles[t] for t in ids if isinstance(t, str) and t in self.handles]
                return _renamed(note, {**note.params, "notifications": {**honored, "taskIds": mine}})
        return note

    def _unwrap(self, token: object) -> str:
        if not isinstance(token, str):
            raise TaskRefused("malformed")
        try:
            task = open_relay_task(self.codec, token, self.now)
            check_relay_task(task, upstream=self.upstream, principal=self.principal)
        except HandleError as exc:
            raise TaskRefused(exc.reason, token) from None
        self.handles[task.task] = token
        return task.task

    def _wrap(self, task_id: str, ttl_ms: object) -> str:
        life = ttl_ms / 1000 if isinstance(ttl_ms, int) and ttl_ms >= 0 else self.default_ttl_s
        expires = int(self.now + min(life + GRACE_S, MAX_TASK_HANDLE_S))
        token = seal_relay_task(self.codec, RelayTask(self.upstream, self.principal, task_id, expires))
        self.handles[task_id] = token
        return token


def _renamed(note: jsonrpc.Notification, params: dict[str, Any]) -> jsonrpc.Notification:
    return jsonrpc.Notification(note.method, params)


def _without(result: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != key}


NoteFilter = Callable[[jsonrpc.Notification], jsonrpc.Notification | None]

__all__ = ["BoundTasks", "NoteFilter", "TaskIdTooLarge", "TaskRefused", "refusal"]
