"""`/readyz` reachability as the real process judges it (proxy/process/readiness.py, upstream/reachability.py;
issue 20, item 7): a stdio command that starts and answers `initialize` is reachable, one on PATH that
exits at once is not; a URL with nothing listening is not. Requests to the ones down fail cleanly, and every
line the process writes stays JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aiohttp
import peers
import pytest

PROXY = [sys.executable, "-m", "proxy"]
FAKE = Path(__file__).parents[1] / "upstream" / "fakes" / "fake_stdio_server.py"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}


@pytest.mark.asyncio(loop_scope="session")
async def test_readyz_says_which_upstreams_answer(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    upstreams = [
        {"name": "answers", "command": sys.executable, "args": [str(FAKE)]},
        {"name": "exits", "command": "false"},  # on PATH, dies at once
        {"name": "down", "url": f"http://127.0.0.1:{peers.free_port()}/mcp"},
        {"name": "sse-down", "url": f"http://127.0.0.1:{peers.free_port()}/sse", "transport": "sse"},
    ]
    cfg.write_text(json.dumps({"logging": {"format": "json"}, "upstreams": upstreams}))
    argv = [*PROXY, "serve", "--config", str(cfg)]
    async with (
        peers.run_peer("mrtr-proxy", lambda p: [*argv, "--listen", f"127.0.0.1:{p}"]) as proxy,
        aiohttp.ClientSession() as http,
    ):
        async with http.get(f"http://127.0.0.1:{proxy.port}/readyz") as r:
            status, body = r.status, await r.json()
        for name in (
            "exits",
            "down",
            "sse-down",
        ):  # the requests fail cleanly, and leave no unretrieved future behind
            async with http.post(
                f"http://127.0.0.1:{proxy.port}/servers/{name}/mcp", json=LIST, headers=HEADERS
            ) as r:
                assert (await r.json())["error"]["code"] == -31001
        text = proxy.log_text(tail=None)
    assert status == 200 and body["status"] == "ready"
    down = {"exits": "unreachable", "down": "unreachable", "sse-down": "unreachable"}
    assert body["upstreams"] == {"answers": "reachable", **down}
    assert all(isinstance(json.loads(line), dict) for line in text.splitlines())
    assert "never retrieved" not in text
