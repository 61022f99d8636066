"""A modern upstream's own `requestState`, sealed and bound to the principal it was issued to.

The native relay (front/modern/relay.py) passes a 2026-07-28 upstream's `requestState` to the client. When
the upstream cannot tell users apart (the proxy calls it with a service credential, or none), that state
would be a bearer token: another user presenting it would resume the call as the first. So the relay wraps
it in this handle: the upstream's state, the upstream, the principal, the request's method and name, and an
expiry, sealed with the key ring at format version 4 (request-state handles are 1, legacy session ids 2,
task ids 3: none can be presented as another). Stateless: any replica holding the key ring unwraps it.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass

from proxy.handle.codec import HandleCodec, target_digest
from proxy.handle.keyring import MAX_TOKEN_CHARS, HandleError

RELAY_STATE_VERSION = 4
# What the upstream's state may weigh for its handle to stay within MAX_TOKEN_CHARS (base64 of the JSON
# claims around it, nonce and tag).
MAX_INNER_CHARS = (MAX_TOKEN_CHARS * 3) // 4 - 256


class StateTooLarge(ValueError):
    """The upstream's requestState is too large to seal."""


@dataclass(frozen=True, slots=True)
class RelayState:
    upstream: str
    principal: str
    target: str  # target_digest of the method and its name or uri (not the arguments)
    state: str  # the upstream's own requestState, as it gave it
    expires_at: int  # unix seconds


def relay_target(method: str, name: str) -> str:
    """The request a relayed state belongs to: its method and tool / prompt name or resource uri."""
    field = "uri" if method == "resources/read" else "name"
    return target_digest(method, {field: name})


def seal_relay_state(codec: HandleCodec, state: RelayState) -> str:
    """Raises StateTooLarge when the upstream's state would not fit in a handle."""
    if len(state.state) > MAX_INNER_CHARS:
        raise StateTooLarge(f"requestState of {len(state.state)} characters; at most {MAX_INNER_CHARS}")
    claims = {"u": state.upstream, "w": state.principal, "t": state.target, "s": state.state}
    plaintext = json.dumps({**claims, "e": state.expires_at}, separators=(",", ":")).encode()
    return codec.ring.seal(plaintext, version=RELAY_STATE_VERSION)


def open_relay_state(codec: HandleCodec, token: str, now: float) -> RelayState:
    """Raises HandleError for anything that is not an unexpired relayed state this deployment sealed."""
    _, plaintext = codec.ring.unseal(token, versions=(RELAY_STATE_VERSION,))
    try:
        obj = json.loads(plaintext)
        fields = (obj["u"], obj["w"], obj["t"], obj["s"])
        expires_at = obj["e"]
    except (ValueError, KeyError, TypeError):
        raise HandleError("bad_claims") from None
    if not all(isinstance(f, str) for f in fields) or not isinstance(expires_at, int):
        raise HandleError("bad_claims")
    if now >= expires_at:
        raise HandleError("expired")
    return RelayState(*fields, expires_at=expires_at)


def check_relay_state(state: RelayState, *, upstream: str, principal: str, target: str) -> None:
    """The state is presented to its upstream, by its principal, for its request; else HandleError."""
    for reason, mine, given in (
        ("wrong_upstream", state.upstream, upstream),
        ("wrong_principal", state.principal, principal),
        ("wrong_target", state.target, target),
    ):
        if not hmac.compare_digest(
            mine.encode("utf-8", "surrogatepass"), given.encode("utf-8", "surrogatepass")
        ):
            raise HandleError(reason)
