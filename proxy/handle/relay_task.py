"""A modern upstream's own task id, sealed and bound to the principal it was issued to.

The native relay (modern/relay/native.py) passes a 2026-07-28 upstream's Tasks extension (SEP-2663) through.
A task id is all `tasks/get`, `tasks/update` and `tasks/cancel` ask for, so when the upstream cannot tell
users apart (the proxy calls it with a service credential, or none), the upstream's task id would be a
bearer token: another user who learns it reads the first one's result, answers its questions or cancels
it. So the relay hands the client this handle instead: the upstream's task id, the upstream, the principal
and an expiry, sealed with the key ring under its own version byte (formats.py: no other kind, not the
proxy's own task ids of format 3, can be presented as it). Stateless: any replica holding the key ring
unwraps it.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from proxy.handle import formats
from proxy.handle.codec import HandleCodec
from proxy.handle.keyring import HandleError
from proxy.handle.records import open_record, seal_record

RELAY_TASK_VERSION = formats.RELAY_TASK
MAX_TASK_ID_CHARS = 1024  # an upstream's task id longer than this is not wrapped (the relay refuses it)


class TaskIdTooLarge(ValueError):
    """The upstream's task id is too long to seal."""


@dataclass(frozen=True, slots=True)
class RelayTask:
    upstream: str
    principal: str
    task: str  # the upstream's own task id, as it gave it
    expires_at: int  # unix seconds


def seal_relay_task(codec: HandleCodec, task: RelayTask) -> str:
    """Raises TaskIdTooLarge when the upstream's task id is longer than MAX_TASK_ID_CHARS."""
    if len(task.task) > MAX_TASK_ID_CHARS:
        raise TaskIdTooLarge(f"task id of {len(task.task)} characters; at most {MAX_TASK_ID_CHARS}")
    claims = {"u": task.upstream, "w": task.principal, "k": task.task}
    return seal_record(codec.ring, RELAY_TASK_VERSION, claims, task.expires_at)


def open_relay_task(codec: HandleCodec, token: str, now: float) -> RelayTask:
    """Raises HandleError for anything that is not an unexpired relayed task id this deployment sealed."""
    fields, expires_at = open_record(codec.ring, token, RELAY_TASK_VERSION, ("u", "w", "k"), now)
    upstream, principal, task = fields
    return RelayTask(upstream, principal, task, expires_at=expires_at)


def check_relay_task(task: RelayTask, *, upstream: str, principal: str) -> None:
    """The task id is presented to its upstream, by its principal; else HandleError."""
    for reason, mine, given in (
        ("wrong_upstream", task.upstream, upstream),
        ("wrong_principal", task.principal, principal),
    ):
        if not hmac.compare_digest(
            mine.encode("utf-8", "surrogatepass"), given.encode("utf-8", "surrogatepass")
        ):
            raise HandleError(reason)
