"""The mirror's sealed ids (mirror/front.py): a legacy client's session of a modern upstream, and the
ids of the inline requests the mirror sends that client.

- **Mirror session ids** (key-ring format 5): the `Mcp-Session-Id` the mirror hands a legacy client at
  `initialize`. The upstream speaks 2026-07-28 and has no session, so the id carries what every later
  request of the client needs to become a 2026-07-28 request: the upstream, the principal, the protocol
  version the client negotiated, its `clientInfo` (name and version) and the input capabilities it declared,
  plus a random token naming the session (the mirror's inline request ids are bound to it) and its expiry
  (`front.mirror_session_ttl_s` after `initialize`: a sealed id cannot slide without a new one, so the
  lifetime is absolute; an expired id is "Session not found" and the client initializes again). Nothing
  of the session lives in a replica: any replica serves any request of it.
- **Ask ids** (format 6): the JSON-RPC id of one inline request (`elicitation/create`,
  `sampling/createMessage`, `roots/list`) the mirror sends on the POST stream of a call. The client's
  answer is a POST of its own that a load balancer may send to any replica: the id names the replica
  holding the call (`owner`, its peer address), the call, the input request's key, the session it was
  asked in, and an expiry, so the replica that receives the answer forwards it to the owner, and an answer
  from another session is refused.

Distinct formats (request-state handles are 1, legacy session ids 2, task ids 3, relayed states 4): none can
be presented as another. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.handle import formats
from proxy.handle.codec import HandleCodec
from proxy.handle.keyring import HandleError
from proxy.handle.records import open_record, seal_record

MIRROR_SESSION_VERSION = formats.MIRROR_SESSION
MIRROR_ASK_VERSION = formats.MIRROR_ASK
_MAX_FIELD = 512


@dataclass(frozen=True, slots=True)
class MirrorSession:
    upstream: str
    principal: str
    token: str  # random, names the session
    version: str  # the legacy protocol version the client negotiated
    client: tuple[str, str]  # clientInfo name and version
    capabilities: Mapping[str, Any]  # the 2026-07-28 clientCapabilities the client's declaration maps to
    expires_at: int  # unix seconds


@dataclass(frozen=True, slots=True)
class MirrorAsk:
    owner: str  # the peer address of the replica holding the call
    call: str  # the call's token on that replica
    key: str  # the upstream's inputRequests key
    session: str  # MirrorSession.token of the session the request was sent in
    expires_at: int  # unix seconds


def seal_mirror_session(codec: HandleCodec, session: MirrorSession) -> str:
    claims = {
        "u": session.upstream,
        "w": session.principal,
        "s": session.token,
        "v": session.version,
        "n": session.client[0][:_MAX_FIELD],
        "r": session.client[1][:_MAX_FIELD],
        "c": dict(session.capabilities),
        "e": session.expires_at,
    }
    return codec.ring.seal(json.dumps(claims, separators=(",", ":")).encode(), version=MIRROR_SESSION_VERSION)


def open_mirror_session(codec: HandleCodec, token: str, now: float | None = None) -> MirrorSession:
    """Raises HandleError for anything that is not a mirror session id this deployment sealed, and
    (`now` given) `expired` for one whose lifetime is over. Without `now`: whether it is one of ours at
    all, expired or not (whose request it is to answer)."""
    _, plaintext = codec.ring.unseal(token, versions=(MIRROR_SESSION_VERSION,))
    try:
        obj = json.loads(plaintext)
        fields = (obj["u"], obj["w"], obj["s"], obj["v"])
        client, caps, expires_at = (obj["n"], obj["r"]), obj["c"], obj["e"]
    except (ValueError, KeyError, TypeError):
        raise HandleError("bad_claims") from None
    if not all(isinstance(f, str) and 0 < len(f) <= _MAX_FIELD for f in fields):
        raise HandleError("bad_claims")
    if not all(isinstance(f, str) for f in client) or not isinstance(caps, dict):
        raise HandleError("bad_claims")
    if type(expires_at) is not int:
        raise HandleError("bad_claims")
    if now is not None and now >= expires_at:
        raise HandleError("expired")
    return MirrorSession(*fields, client=client, capabilities=caps, expires_at=expires_at)


def seal_ask(codec: HandleCodec, ask: MirrorAsk) -> str:
    claims = {"o": ask.owner, "c": ask.call, "k": ask.key, "s": ask.session}
    return seal_record(codec.ring, MIRROR_ASK_VERSION, claims, ask.expires_at)


def open_ask(codec: HandleCodec, token: object, now: float) -> MirrorAsk:
    """Raises HandleError for anything that is not an unexpired ask id this deployment sealed (a number, or
    a string the client made up, included)."""
    if not isinstance(token, str):
        raise HandleError("not_an_ask")
    fields, expires_at = open_record(codec.ring, token, MIRROR_ASK_VERSION, ("o", "c", "k", "s"), now)
    owner, call, key, session = fields
    return MirrorAsk(owner, call, key, session, expires_at=expires_at)


__all__ = [
    "MIRROR_ASK_VERSION",
    "MIRROR_SESSION_VERSION",
    "MirrorAsk",
    "MirrorSession",
    "open_ask",
    "open_mirror_session",
    "seal_ask",
    "seal_mirror_session",
]
