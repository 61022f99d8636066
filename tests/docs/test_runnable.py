"""The shell commands the docs mark runnable (`<!-- runnable -->`), run line by line against a real proxy:
`mrtr-proxy serve --config config/fleet.yaml` in front of the bundled demo server (FastMCP 1.30), in a
directory laid out like a fresh clone, the ports moved to free ones (docs/writing-docs.md). And the README's
fleet itself: the merged list `check-config --probe` prints, the member's own rule holding on a real call,
and an MRTR round through the route."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest

from docs.blocks import ROOT, blocks, markdown_files

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]
RUNNABLE = [b for path in markdown_files() for b in blocks(path) if b.marker == "runnable"]
BIN = Path(sys.executable).parent  # the venv whose mrtr-proxy the commands run


@asynccontextmanager
async def fleet(tmp: Path) -> AsyncIterator[tuple[Path, int, int]]:
    """A clone-like directory serving config/fleet.yaml: (its path, the demo server's port, the proxy's)."""
    for name in ("config", "demo"):
        shutil.copytree(ROOT / name, tmp / name)
    (tmp / ".peers").symlink_to(peers.peers_dir())
    async with peers.run_peer(
        "demo-legacy",
        lambda p: [str(peers.legacy_python()), "demo/legacy_server.py", "--port", str(p)],
        cwd=tmp,
    ) as up:
        config = tmp / "config" / "fleet.yaml"
        config.write_text(ports((ROOT / "config" / "fleet.yaml").read_text(encoding="utf-8"), up.port, 0))

        def serve(p: int) -> list[str]:
            config.write_text(ports((ROOT / "config" / "fleet.yaml").read_text(encoding="utf-8"), up.port, p))
            return [sys.executable, "-m", "proxy", "serve", "--config", "config/fleet.yaml"]

        async with peers.run_peer("mrtr-proxy", serve, cwd=tmp, env={"PYTHONPATH": str(ROOT)}) as proxy:
            yield tmp, up.port, proxy.port


def ports(text: str, upstream: int, proxy: int) -> str:
    return text.replace("8000", str(upstream)).replace("8080", str(proxy))


async def sh(line: str, cwd: Path) -> peers.CompletedRun:
    env = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)}
    return await peers.run_once(["bash", "-c", line], limit_s=60, cwd=cwd, env=env)


async def call(url: str, name: str, **extra: Any) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "docs-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    params = {"name": name, "arguments": {"day": "Friday"}, "_meta": meta, **extra}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
        http.post(url, json=body, headers=headers) as resp,
    ):
        reply: dict[str, Any] = await resp.json()
        return reply


async def test_there_are_runnable_commands() -> None:
    assert {b.path.name for b in RUNNABLE} >= {"README.md", "operations.md"}
    assert all(b.lang == "sh" for b in RUNNABLE), [b.where() for b in RUNNABLE if b.lang != "sh"]


async def test_the_runnable_commands_run_against_a_real_proxy(tmp_path: Path) -> None:
    peers.require_peers({"legacy": peers.legacy_python()})
    async with fleet(tmp_path) as (clone, up, proxy):
        for block in RUNNABLE:
            for line in block.text.splitlines():
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                run = await sh(ports(line, up, proxy), clone)
                assert run.returncode == 0, (
                    f"{block.where()}: {line}\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
                )


async def test_the_readme_fleet_serves_one_tool_with_mrtr(tmp_path: Path) -> None:
    peers.require_peers({"legacy": peers.legacy_python()})
    async with fleet(tmp_path) as (clone, _, proxy):
        run = await sh("mrtr-proxy check-config --probe config/fleet.yaml", clone)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "route fleet: 1 tools: bookings__book_table\n" in run.stdout  # fs__book_table: its own deny
        url = f"http://127.0.0.1:{proxy}/mcp"
        denied = await call(url, "fs__book_table")
        assert denied["error"]["code"] == -32602
        assert "is not available on this route" in denied["error"]["message"]
        first = (await call(url, "bookings__book_table"))["result"]
        assert first["resultType"] == "input_required", first
        ((key, request),) = first["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        answer = {"action": "accept", "content": {"guests": 4, "name": "Ada"}}
        done = await call(
            url, "bookings__book_table", inputResponses={key: answer}, requestState=first["requestState"]
        )
        assert done["result"]["resultType"] == "complete", done
        assert "Booked a table for 4 on Friday, under the name Ada." in str(done["result"]["content"])
