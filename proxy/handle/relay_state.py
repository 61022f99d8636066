"""A modern upstream's own `requestState`, sealed and bound to the principal it was issued to.

The native relay (modern/relay/native.py) passes a 2026-07-28 upstream's `requestState` to the client. When
the upstream cannot tell users apart (the proxy calls it with a service credential, or none), that state
would be a bearer token: another user presenting it would resume the call as the first. So the relay wraps
it in this handle: the upstream's state, the upstream, the principal, the request's method and name, and an
expiry, sealed with the key ring under its own version byte (formats.py: no other kind can be presented as
it). Stateless: any replica holding the key ring unwraps it.

Real servers' states are large (a FastMCP 4 native tool's carries what the tool stored; the mcp SDK seals
its own), so this kind is not held to the key ring's MAX_TOKEN_CHARS: the upstream's state may be up to
MAX_STATE_CHARS (64 Ki characters), the claims are deflated before sealing when that makes them smaller (a
sealed, random-looking state gains nothing; a JSON one a lot), and the handle may be up to
MAX_LARGE_TOKEN_CHARS, checked before any work when it comes back. Larger is refused with StateTooLarge,
which the relay turns into a clear error. The front's own bound on what a client may send is
front.max_body_bytes (1 MiB by default), far above it.
"""

from __future__ import annotations

import hmac
import json
import zlib
from dataclasses import dataclass

from proxy.handle import formats
from proxy.handle.codec import HandleCodec, target_digest
from proxy.handle.keyring import MAX_LARGE_TOKEN_CHARS, HandleError
from proxy.handle.records import parse_record

RELAY_STATE_VERSION = formats.RELAY_STATE
MAX_STATE_CHARS = 65536  # the largest upstream requestState the relay binds
_DEFLATED = b"z"  # the sealed claims are deflated (else they are the JSON itself, which starts with "{")
_MAX_CLAIMS_BYTES = 8 * MAX_STATE_CHARS  # what deflated claims may inflate to (JSON escapes at most 6x)


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
    """Raises StateTooLarge when the upstream's state is over MAX_STATE_CHARS, or its handle would be over
    MAX_LARGE_TOKEN_CHARS (a state that JSON escapes make much longer)."""
    if len(state.state) > MAX_STATE_CHARS:
        raise StateTooLarge(f"requestState of {len(state.state)} characters; at most {MAX_STATE_CHARS}")
    claims = {"u": state.upstream, "w": state.principal, "t": state.target, "s": state.state}
    plain = json.dumps({**claims, "e": state.expires_at}, separators=(",", ":")).encode()
    deflated = _DEFLATED + zlib.compress(plain, 6)
    body = deflated if len(deflated) < len(plain) else plain
    try:
        return codec.ring.seal(body, version=RELAY_STATE_VERSION, max_chars=MAX_LARGE_TOKEN_CHARS)
    except ValueError:
        raise StateTooLarge(
            f"requestState of {len(state.state)} characters makes a handle over {MAX_LARGE_TOKEN_CHARS}"
        ) from None


def open_relay_state(codec: HandleCodec, token: str, now: float) -> RelayState:
    """Raises HandleError for anything that is not an unexpired relayed state this deployment sealed."""
    _, body = codec.ring.unseal(token, versions=(RELAY_STATE_VERSION,), max_chars=MAX_LARGE_TOKEN_CHARS)
    if body[:1] == _DEFLATED:
        inflate = zlib.decompressobj()
        try:
            plain = inflate.decompress(body[1:], _MAX_CLAIMS_BYTES)
        except zlib.error:
            raise HandleError("bad_claims") from None
        if inflate.unconsumed_tail or not inflate.eof:
            raise HandleError("bad_claims")
        body = plain
    fields, expires_at = parse_record(body, ("u", "w", "t", "s"), now)
    upstream, principal, target, state = fields
    return RelayState(upstream, principal, target, state, expires_at=expires_at)


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
