"""Is this replica full? Shown by `/readyz` (its `saturated` detail: the replica stays ready, since it still
serves plain calls and retries) and by the `mrtr_proxy_saturated` gauges. One answer for both, computed
from the call registry and the pools at the moment it is asked."""

from __future__ import annotations

import math
from collections.abc import Mapping

from proxy.calls.service import CallService
from proxy.upstream.pool import SessionPool

SESSIONS_NEAR_FULL = 0.9  # share of pool.max_sessions in use that counts as full
REPLICA = "replica"  # the key of a replica-wide reason


def saturation(calls: CallService, pools: Mapping[str, SessionPool]) -> dict[str, str]:
    """What is full, by upstream name (or "replica"): `calls` (calls.max_parked calls held),
    `parked_calls` (the upstream's calls.parked_share of sessions wait for input) or `sessions` (90% of
    pool.max_sessions taken by calls). Empty: not saturated."""
    registry = calls.registry
    out: dict[str, str] = {}
    if registry.held >= registry.max_calls:
        out[REPLICA] = "calls"
    for name, pool in pools.items():
        if registry.parked_in(name) >= calls.park_cap(name):
            out[name] = "parked_calls"
        elif pool.in_use >= math.ceil(SESSIONS_NEAR_FULL * pool.max_sessions):
            out[name] = "sessions"
    return out
