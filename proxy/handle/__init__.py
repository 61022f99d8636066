"""Encrypted, authenticated session handles (the ``requestState`` a client echoes back)."""

from .claims import (
    FORMAT_VERSION,
    Claims,
    FrozenMap,
    carried_ids,
    carried_session,
    decode_claims,
    encode_claims,
    id_digest,
)
from .codec import ANONYMOUS, MAX_CLOCK_SKEW, HandleCodec, principal_digest, target_digest
from .keyring import (
    MAX_TOKEN_CHARS,
    HandleError,
    Key,
    KeyLoadError,
    KeyRing,
    derive_kid,
    generate_key_b64,
    load_keys,
    load_named_keys,
    parse_key,
    token_kid,
)

__all__ = [
    "ANONYMOUS",
    "FORMAT_VERSION",
    "MAX_CLOCK_SKEW",
    "MAX_TOKEN_CHARS",
    "Claims",
    "FrozenMap",
    "HandleCodec",
    "HandleError",
    "Key",
    "KeyLoadError",
    "KeyRing",
    "carried_ids",
    "carried_session",
    "decode_claims",
    "derive_kid",
    "encode_claims",
    "generate_key_b64",
    "id_digest",
    "load_keys",
    "load_named_keys",
    "parse_key",
    "principal_digest",
    "target_digest",
    "token_kid",
]
