"""Section 4 of a bench run: sealing and unsealing a handle (``requestState``), step by step, in µs of CPU
time, and its size in bytes."""

from __future__ import annotations

import secrets
import statistics
import time
import timeit
import uuid
from typing import Any


def handles(number: int = 20000, repeat: int = 7) -> dict[str, Any]:
    """Seal (build the claims + seal, as a parked round does) and unseal (open + verify, as a retry does)."""
    from proxy.handle import HandleCodec, KeyRing, principal_digest, target_digest

    codec = HandleCodec(KeyRing.ephemeral())
    now = int(time.time())
    cases = {
        "typical": dict(
            upstream="default",
            session=uuid.uuid4().hex,
            call=secrets.token_urlsafe(12),
            round=1,
            pending={"elicit-1": 0},
            owner="127.0.0.1:8080",
            principal=principal_digest("Bearer " + "t" * 40),
            target=target_digest("tools/call", {"name": "ask_name", "arguments": {}}),
            issued_at=now,
            expires_at=now + 600,
            last_event=None,
        ),
        "large": dict(  # three requests in one round, a resumable upstream's event id, a long owner name
            upstream="search-backend",
            session=str(uuid.uuid4()),
            call=secrets.token_urlsafe(12),
            round=7,
            pending={"elicit-3": 12, "sample-4": 13, "roots-5": 14},
            owner="mrtr-proxy-7d9f8c6b5-x2x4z.mrtr-proxy.svc.cluster.local:8080",
            principal=principal_digest("Bearer " + "t" * 400),
            target=target_digest("tools/call", {"name": "all_at_once", "arguments": {"prompt": "x" * 200}}),
            issued_at=now,
            expires_at=now + 600,
            last_event="_GET_stream:123456",
        ),
    }
    return {name: _handle_case(codec, fields, number, repeat) for name, fields in cases.items()}


def _handle_case(codec: Any, fields: dict[str, Any], number: int, repeat: int) -> dict[str, Any]:
    from proxy.handle import FORMAT_VERSION, Claims, decode_claims, encode_claims, target_digest

    claims = Claims(**fields)
    token = codec.seal(claims)
    plaintext = encode_claims(claims)
    ring = codec.ring
    verify = {"upstream": claims.upstream, "principal": claims.principal, "target": claims.target}

    def per_op(fn: Any) -> float:
        # CPU time of this process (not wall time): time spent preempted by other processes does not count.
        timer = timeit.Timer(fn, timer=time.process_time)
        return float(statistics.median(timer.repeat(number=number, repeat=repeat)) / number * 1e6)

    steps = {  # where the time goes, step by step
        "claims_build": lambda: Claims(**fields),
        "encode_claims": lambda: encode_claims(claims),
        "aead_seal_b64": lambda: ring.seal(plaintext, version=FORMAT_VERSION),
        "b64_aead_unseal": lambda: ring.unseal(token, versions=(FORMAT_VERSION,)),
        "decode_claims": lambda: decode_claims(plaintext),
        "verify": lambda: codec.verify(claims, **verify),
    }
    out: dict[str, Any] = {
        "seal_us": per_op(lambda: codec.seal(Claims(**fields))),
        "unseal_us": per_op(lambda: codec.verify(codec.open(token), **verify)),
        "target_digest_us": per_op(
            lambda: target_digest("tools/call", {"name": "ask_name", "arguments": {}})
        ),
        "handle_bytes": len(token.encode()),
        "claims_bytes": len(plaintext),
        "steps_us": {step: round(per_op(fn), 2) for step, fn in steps.items()},
    }
    out["seal_unseal_us"] = out["seal_us"] + out["unseal_us"]
    return out
