"""Call ids: 16 base64url characters of CSPRNG output (12 bytes, what `secrets.token_urlsafe(12)` gave),
drawn from the OS a batch at a time instead of one getrandom(2) per call.

A call id goes into the progress tokens the upstream sees and names the call in the registry across
replicas, so it stays unguessable: `os.urandom` (what `secrets` uses), 256 ids per draw, each id used once
(`list.pop` is atomic, so two threads never get the same one). A forked child starts with no ids of its own:
it would otherwise hand out the very ids its parent is about to.
"""

from __future__ import annotations

import base64
import os

ID_BYTES = 12  # 16 characters, no padding (a multiple of 3)
BATCH = 256
_CHARS = ID_BYTES * 4 // 3

_ids: list[str] = []


def call_id() -> str:
    """A fresh call id (16 characters of [A-Za-z0-9_-])."""
    try:
        return _ids.pop()
    except IndexError:
        _refill()
        return _ids.pop()


def _refill() -> None:
    text = base64.urlsafe_b64encode(os.urandom(ID_BYTES * BATCH)).decode("ascii")
    _ids.extend([text[i : i + _CHARS] for i in range(0, len(text), _CHARS)])


os.register_at_fork(after_in_child=_ids.clear)
