"""The README demo command works: proxy + bundled legacy server show an MRTR round trip."""

from __future__ import annotations

import re
import socket
from pathlib import Path

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
    # Issue 45 item 5: upstream.log held a traceback (mcp 1.30 logging the end of a session the proxy
    # DELETEd as an error) and an "Invalid HTTP request" (the script's port check sent a newline).
    found = re.search(r"this run's logs: (\S+)/proxy\.log", out)
    assert found, out[-500:]
    logs = Path(found.group(1))
    for name in ("upstream.log", "proxy.log"):
        text = (logs / name).read_text()
        assert "Traceback" not in text and "Invalid HTTP request" not in text, f"{name}:\n{text[-3000:]}"


@pytest.mark.parametrize("variable", ["DEMO_PROXY_PORT", "DEMO_UPSTREAM_PORT"])
async def test_a_taken_port_is_named_with_the_variable_that_moves_it(variable: str) -> None:
    """With 8080 or 8000 taken the demo once printed a 20-line traceback about a text/html 501 (its client
    had talked to whatever held the port) and nothing about the port."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    env = {"DEMO_UPSTREAM_PORT": str(peers.free_port()), "DEMO_PROXY_PORT": str(peers.free_port())}
    env[variable] = str(taken)
    try:
        run = await peers.run_once(
            ["bash", str(peers.REPO_ROOT / "scripts" / "demo.sh")], limit_s=60, env=env
        )
    finally:
        holder.close()
    assert run.returncode == 1
    assert f"port {taken} on 127.0.0.1" in run.stderr and "is taken by another process" in run.stderr
    assert f"set {variable} to another port" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert "setting up" not in run.stderr  # checked before the set-up, not a minute later
