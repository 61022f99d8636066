"""Sealed `Mcp-Session-Id`s for legacy clients: the upstream's session id, bound to a principal and upstream.

Format version 2 of the key ring (request-state handles are version 1), so one can never be presented as
the other. Stateless: any replica holding the key ring can relay a legacy client's session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from proxy.handle import formats
from proxy.handle.codec import HandleCodec
from proxy.handle.keyring import HandleError

SESSION_ID_VERSION = formats.LEGACY_SESSION_ID
_MAX = 512


@dataclass(frozen=True, slots=True)
class LegacySession:
    upstream: str
    upstream_session: str
    principal: str


def seal_session(codec: HandleCodec, session: LegacySession) -> str:
    plaintext = json.dumps(
        {"u": session.upstream, "s": session.upstream_session, "w": session.principal}, separators=(",", ":")
    ).encode()
    return codec.ring.seal(plaintext, version=SESSION_ID_VERSION)


def open_session(codec: HandleCodec, token: str) -> LegacySession:
    """Raises HandleError for anything that is not a session id this deployment sealed."""
    _, plaintext = codec.ring.unseal(token, versions=(SESSION_ID_VERSION,))
    try:
        obj = json.loads(plaintext)
        fields = (obj["u"], obj["s"], obj["w"])
    except (ValueError, KeyError, TypeError):
        raise HandleError("bad_claims") from None
    if not all(isinstance(f, str) and 0 < len(f) <= _MAX for f in fields):
        raise HandleError("bad_claims")
    return LegacySession(*fields)
