"""The README demo command works: proxy + bundled legacy server show an MRTR round trip."""

from __future__ import annotations

import peers
import pytest

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


async def test_demo_script_shows_a_round_trip() -> None:
    env = {"DEMO_UPSTREAM_PORT": str(peers.free_port()), "DEMO_PROXY_PORT": str(peers.free_port())}
    run = await peers.run_once(["bash", str(peers.REPO_ROOT / "scripts" / "demo.sh")], limit_s=120, env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    out = run.stdout
    assert '"resultType": "input_required"' in out
    assert '"elicit-1"' in out
    assert "Booked a table for 4 on Friday, under the name Ada." in out
    assert '"resultType": "complete"' in out
