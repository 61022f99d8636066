"""The soak (soak/run.py, `make soak`) for 60 seconds: a real proxy process in front of FastMCP 1.30 with
short TTLs under mixed traffic (pass-through, MRTR rounds completed and abandoned, hang-ups, forged
requestState, 200 KB arguments, legacy sessions closed and left open, the upstream restarted midway), then the
drain; it fails on any unexpected answer, RSS or descriptor growth, or anything left held.

No __init__.py here: this folder would otherwise be imported as the package `soak` and hide the driver's."""

from __future__ import annotations

import sys
from pathlib import Path

import peers
import pytest

if str(peers.REPO_ROOT) not in sys.path:  # the driver lives at the repository root, beside proxy/
    sys.path.insert(0, str(peers.REPO_ROOT))

from soak import run


@pytest.mark.peers
@pytest.mark.timeout(300)  # 60 s of traffic, the restart, the drain (TTLs 8 and 10 s), starts and stops
@pytest.mark.asyncio(loop_scope="session")
async def test_a_minute_of_mixed_traffic_leaves_nothing_behind(tmp_path: Path) -> None:
    result = await run.soak(60, directory=tmp_path)
    print(result.text)
    assert result.failures == [], result.text
