"""Staged rotation at run time: the configured keys with their roles, and promotion when it falls due."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

import structlog

from proxy.config import Config
from proxy.handle import HandleCodec, load_named_keys
from proxy.handle.rotation import Rotation, StagedKey

log = structlog.get_logger("proxy.app")


def configured_staged_keys(config: Config, environ: Mapping[str, str] | None = None) -> list[StagedKey]:
    """As `configured_keys`, with the rotation role each key's name gives (proxy/handle/rotation.py)."""
    named = load_named_keys(
        files=config.keys.files,
        dirs=config.keys.dirs,
        env=os.environ if environ is None else environ,
        env_vars=config.keys.env,
    )
    return [StagedKey.of(name, key) for name, key in named]


def promote_due_key(rotation: Rotation, codec: HandleCodec) -> bool:
    """Staged rotation: seal with a key once it has been loadable for `keys.promote_after_s`."""
    ring = rotation.due(codec.ring, time.monotonic())
    if ring is None:
        return False
    previous = codec.ring.sealing_kid
    codec.replace_ring(ring)
    if ring.sealing_kid != previous:
        log.warning("keys.promoted", sealing_key=ring.sealing_kid, previous_sealing_key=previous)
    else:
        log.info("keys.retained_key_dropped", key_ids=list(ring.kids), sealing_key=ring.sealing_kid)
    return True
