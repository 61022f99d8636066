"""Task ids: a small claims blob sealed with the key ring, so any replica can route `tasks/*` to the owner.

Format version 3 of the key ring (request-state handles are version 1, legacy session ids version 2), so a
task id can never be presented as a requestState or a session id, nor the other way round. The claims name
the upstream, the task (its key on the owner), the owner replica, the principal and the expiry; the id is
bound to them: another principal, or another upstream's path, gets "not found".
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from proxy.handle import formats
from proxy.handle.codec import HandleCodec
from proxy.handle.keyring import HandleError

TASK_ID_VERSION = formats.TASK_ID
_MAX = 256
_KEYS = frozenset({"u", "t", "o", "w", "iat", "exp"})


@dataclass(frozen=True, slots=True)
class TaskClaims:
    upstream: str
    task: str  # the task's key on its owner replica
    owner: str  # replica address ("host:port")
    principal: str  # digest of the client principal
    issued_at: int  # unix seconds
    expires_at: int  # unix seconds: the task's TTL ends

    def __post_init__(self) -> None:
        for value in (self.upstream, self.task, self.principal):
            if not isinstance(value, str) or not 0 < len(value) <= _MAX:
                raise ValueError("task claim strings must be non-empty and short")
        if not isinstance(self.owner, str) or len(self.owner) > _MAX:
            raise ValueError("task claim owner must be a short string")
        for stamp in (self.issued_at, self.expires_at):
            if type(stamp) is not int or stamp < 0:
                raise ValueError("task claim times must be non-negative ints")
        if self.expires_at < self.issued_at:
            raise ValueError("a task cannot expire before it was issued")


def seal_task_id(codec: HandleCodec, claims: TaskClaims) -> str:
    plaintext = json.dumps(
        {
            "u": claims.upstream,
            "t": claims.task,
            "o": claims.owner,
            "w": claims.principal,
            "iat": claims.issued_at,
            "exp": claims.expires_at,
        },
        separators=(",", ":"),
        ensure_ascii=True,
    ).encode("ascii")
    return codec.ring.seal(plaintext, version=TASK_ID_VERSION)


def open_task_id(codec: HandleCodec, token: object, *, now: float) -> TaskClaims:
    """The claims of a task id this deployment sealed. Raises HandleError: `expired` once its TTL is over,
    else `malformed`, `unknown_version`, `auth_failed`, `bad_claims`, … (the keyring's reasons)."""
    _, plaintext = codec.ring.unseal(token if isinstance(token, str) else "", versions=(TASK_ID_VERSION,))
    try:
        obj = json.loads(plaintext)
        if type(obj) is not dict or obj.keys() != _KEYS:
            raise ValueError("unexpected claim keys")
        claims = TaskClaims(obj["u"], obj["t"], obj["o"], obj["w"], obj["iat"], obj["exp"])
    except (ValueError, TypeError):
        raise HandleError("bad_claims") from None
    if now >= claims.expires_at:
        raise HandleError("expired")
    return claims
