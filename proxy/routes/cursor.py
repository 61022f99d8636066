"""The proxy's own cursor for a merged list: which upstream to continue in, and that upstream's cursor.

A list of an aggregated route is its upstreams' lists concatenated in route order. The `nextCursor` a
client gets is sealed with the handle key ring (AES-256-GCM, its own version byte, so it is never mistaken
for a handle or a task id), because it carries another server's cursor and a position the client must not
choose: a forged or edited cursor fails authentication, and one made for another route, list or principal
is refused too. Any replica holding the keys can continue a list another one began. A cursor carries no
expiry: the upstream's own cursor inside it expires as that server decides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from proxy.handle import HandleError, KeyRing, formats

CURSOR_VERSION: Final = formats.LIST_CURSOR  # every kind's byte: handle/formats.py


@dataclass(frozen=True, slots=True)
class ListPosition:
    """Continue with route member `member` (route order), at its own `cursor` (None: its first page)."""

    member: int
    cursor: str | None = None


def seal_cursor(ring: KeyRing, *, route: str, method: str, principal: str, position: ListPosition) -> str:
    body = {"r": route, "m": method, "p": principal, "i": position.member, "c": position.cursor}
    return ring.seal(json.dumps(body, separators=(",", ":")).encode(), version=CURSOR_VERSION)


def open_cursor(ring: KeyRing, token: object, *, route: str, method: str, principal: str) -> ListPosition:
    """The position a client's cursor names. Raises HandleError (`reason` for the log) when it is not a
    cursor this deployment sealed for this route, list and principal."""
    if not isinstance(token, str):
        raise HandleError("malformed")
    _, plaintext = ring.unseal(token, versions=(CURSOR_VERSION,))
    try:
        body = json.loads(plaintext)
        member, cursor = body["i"], body["c"]
        bound = (body["r"], body["m"], body["p"])
    except (ValueError, KeyError, TypeError):
        raise HandleError("malformed") from None
    if bound != (route, method, principal):
        raise HandleError("wrong_target")
    if not isinstance(member, int) or member < 0 or not (cursor is None or isinstance(cursor, str)):
        raise HandleError("malformed")
    return ListPosition(member, cursor)
