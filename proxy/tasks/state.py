"""One task's state machine and its wire shapes (SEP-2663), with no I/O.

    working ──▶ input_required ──▶ working ──▶ … ──▶ completed | failed | cancelled
       └──────────────┴────────────────────────────▶ (any terminal status; the first one reached stays)

`input_required` carries the outstanding input requests by key (keys are the call's own, unique over its
lifetime: `elicit-N`, `sample-N`, `roots-N`); an update that answers some of them leaves the rest. A
terminal status is final: a late completion after a cancel, or a cancel after completion, changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from proxy.wire.jsonrpc import ErrorObject

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[Status] = frozenset({"completed", "failed", "cancelled"})


def iso8601(unix: float) -> str:
    """`2026-11-30T10:30:00.123Z`."""
    stamp = datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


@dataclass(slots=True)
class TaskState:
    created_at: float  # unix seconds
    ttl_ms: int
    poll_interval_ms: int
    status: Status = "working"
    updated_at: float = 0.0
    input_requests: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    result: Mapping[str, Any] | None = None
    error: ErrorObject | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        self.updated_at = self.updated_at or self.created_at

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def expires_at(self) -> float:
        return self.created_at + self.ttl_ms / 1000

    # -- transitions: each returns False (and changes nothing) once the task is terminal ------------------

    def need_input(self, requests: Mapping[str, Mapping[str, Any]], now: float) -> bool:
        """Waiting for the client: `requests` are every outstanding request (none: back to working)."""
        if not requests:
            return self.work(now)
        return self._move("input_required", now, input_requests=dict(requests))

    def answered(self, keys: set[str], now: float) -> bool:
        """The client answered `keys`: those leave `inputRequests`; with none left the task is working."""
        if self.status != "input_required" or not keys & self.input_requests.keys():
            return False
        return self.need_input({k: v for k, v in self.input_requests.items() if k not in keys}, now)

    def work(self, now: float) -> bool:
        return self._move("working", now)

    def complete(self, result: Mapping[str, Any], now: float) -> bool:
        return self._move("completed", now, result=result)

    def fail(self, error: ErrorObject, now: float) -> bool:
        return self._move("failed", now, error=error, message=error.message)

    def cancel(self, now: float, message: str = "Cancelled by the client") -> bool:
        return self._move("cancelled", now, message=message)

    def _move(
        self,
        status: Status,
        now: float,
        *,
        input_requests: dict[str, Mapping[str, Any]] | None = None,
        result: Mapping[str, Any] | None = None,
        error: ErrorObject | None = None,
        message: str | None = None,
    ) -> bool:
        if self.terminal:
            return False
        self.status, self.updated_at = status, now
        self.input_requests = input_requests or {}
        self.result, self.error, self.message = result, error, message
        return True

    # -- wire shapes --------------------------------------------------------------------------------------

    def task(self, task_id: str) -> dict[str, Any]:
        """The `Task` fields every shape shares."""
        out: dict[str, Any] = {
            "taskId": task_id,
            "status": self.status,
            "createdAt": iso8601(self.created_at),
            "lastUpdatedAt": iso8601(self.updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.message is not None:
            out["statusMessage"] = self.message
        return out

    def created(self, task_id: str) -> dict[str, Any]:
        """`CreateTaskResult`: the task, never its inputRequests, result or error (tasks/get has those)."""
        return {"resultType": "task", **self.task(task_id)}

    def detailed(self, task_id: str) -> dict[str, Any]:
        """`DetailedTask` (the body of tasks/get and of notifications/tasks): the task plus what its status
        carries — `inputRequests`, `result` or `error`."""
        out = self.task(task_id)
        if self.status == "input_required":
            out["inputRequests"] = dict(self.input_requests)
        elif self.status == "completed" and self.result is not None:
            out["result"] = dict(self.result)
        elif self.status == "failed" and self.error is not None:
            out["error"] = self.error.to_json()
        return out
