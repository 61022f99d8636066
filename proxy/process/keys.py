"""The running process's key ring: built from the configured sources at start (an ephemeral one when none
is configured), and read again on SIGHUP or when a key file changes, without touching parked calls."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Mapping

import structlog
from aiohttp import web

from proxy.cluster.keys import configured_staged_keys
from proxy.config import Config
from proxy.handle import KeyLoadError, KeyRing
from proxy.handle.rotation import Rotation
from proxy.process.appstate import CODEC, CONFIG, ROTATION

log = structlog.get_logger(__name__)


def key_ring(
    config: Config, environ: Mapping[str, str] | None = None, rotation: Rotation | None = None
) -> KeyRing:
    """The configured key ring; with no key configured, an ephemeral one (handles die with the process)."""
    keys = configured_staged_keys(config, environ)
    if keys:
        rotation = rotation or Rotation(config.keys.promote_after_s)
        return rotation.ring(keys, time.monotonic())
    log.warning(
        "keys.ephemeral",
        hint="no key configured: parked calls cannot survive a restart or move "
        "between replicas; run `mrtr-proxy keygen` and configure keys.files/dirs/env",
    )
    return KeyRing.ephemeral()


def key_sources_fingerprint(config: Config) -> tuple[tuple[str, int, int], ...]:
    """(path, mtime, size) of every configured key file and directory entry: changes when a key does."""
    paths = list(config.keys.files)
    for directory in config.keys.dirs:
        with contextlib.suppress(OSError):
            paths += sorted(directory.iterdir())
    out = []
    for path in paths:
        with contextlib.suppress(OSError):
            st = path.stat()
            out.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(out)


def reload_keys(app: web.Application) -> bool:
    """Re-read the key ring (SIGHUP, or a key file changed). Parked calls are untouched: handles sealed
    with a key that is still in the ring keep working. A bad key set is refused and the old ring kept."""
    config = app[CONFIG]
    if not (config.keys.files or config.keys.dirs or config.keys.env):
        return False  # an ephemeral ring is never replaced: that would strand every parked call
    rotation = app[ROTATION]
    try:
        keys = configured_staged_keys(config)
        if not keys:
            raise ValueError("no key configured")
        ring = rotation.ring(keys, time.monotonic())
    except (KeyLoadError, ValueError) as exc:  # ValueError: no key at all (an empty ring)
        log.error("keys.reload_failed", error=str(exc), hint="keeping the current key ring")
        return False
    app[CODEC].replace_ring(ring)
    log.info(
        "keys.reloaded",
        key_ids=list(ring.kids),
        sealing_key=ring.sealing_kid,
        keys=rotation.describe(ring, time.monotonic()),
    )
    if rotation.retained is not None:
        log.warning(
            "keys.sealing_key_retained",
            key_id=rotation.retained.key.kid,
            hint="the sealing key is gone from the key files before any other key has been loadable for "
            "keys.promote_after_s: it keeps sealing until one has (other replicas may not hold the new one)",
        )
    return True


async def install_sighup(app: web.Application) -> None:
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload_keys, app)
