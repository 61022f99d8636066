"""The README's quick start, copied out of README.md (the fenced block after `<!-- quick-start -->`) and
run as written, in a directory laid out like a fresh clone: each line in order, the ports moved to free
ones, the long-running lines (the demo server, each `serve`) started, checked with a real MRTR round trip
(demo/client.py, a 2026-07-28 client over raw HTTP) and stopped."""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import peers
import pytest

from proxy.handle import load_keys, token_kid

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]
ROOT = peers.REPO_ROOT
ACTIVATE = ". .venv/bin/activate && "


def quick_start_lines() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- quick-start -->\n```sh\n(.*?)\n```", text, re.S)
    assert block, "README.md has no ```sh block after <!-- quick-start -->"
    lines = [re.sub(r"\s+#\s.*$", "", line).strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def fresh_clone(tmp: Path) -> Path:
    """The repository as a fresh clone has it, plus the set-up .venv and .peers (linked, not rebuilt)."""
    for name in ("config", "demo", "proxy", "pyproject.toml", "README.md"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp / name)
    for name in (".venv", ".peers"):
        (tmp / name).symlink_to(ROOT / name)
    (tmp / "scripts").mkdir()  # the set-up scripts work on the real checkout (idempotent there)
    for script in ("setup-venv.sh", "setup-peers.sh"):
        (tmp / "scripts" / script).write_text(f'#!/bin/sh\nexec "{ROOT}/scripts/{script}" "$@"\n')
        (tmp / "scripts" / script).chmod(0o755)
    return tmp


def ports(line: str, upstream: int, proxy: int) -> str:
    return line.replace("8000", str(upstream)).replace("8080", str(proxy))


async def sh(line: str, cwd: Path, limit_s: float = 60) -> peers.CompletedRun:
    return await peers.run_once(["bash", "-c", ACTIVATE + line], limit_s=limit_s, cwd=cwd)


@asynccontextmanager
async def background(
    name: str, make_line: Callable[[int], str], cwd: Path
) -> AsyncIterator[peers.PeerProcess]:
    async with peers.run_peer(name, lambda p: ["bash", "-c", ACTIVATE + make_line(p)], cwd=cwd) as peer:
        yield peer


async def round_trip(cwd: Path, url: str) -> str:
    run = await peers.run_once(
        [str(ROOT / ".venv/bin/python"), "demo/client.py", "--url", url], limit_s=60, cwd=cwd
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert '"resultType": "input_required"' in run.stdout
    assert "Booked a table for 4 on Friday, under the name Ada." in run.stdout
    return run.stdout


async def sealing_kid(url: str) -> str:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "quickstart-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "book_table", "arguments": {"day": "Monday"}, "_meta": meta},
    }
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "book_table"}
    timeout = aiohttp.ClientTimeout(total=30)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.post(url, json=body, headers=headers) as r,
    ):
        reply = await r.json()
    assert reply["result"]["resultType"] == "input_required", reply
    kid = token_kid(reply["result"]["requestState"])
    assert kid is not None
    return kid


async def test_the_readme_quick_start_works_as_pasted(tmp_path: Path) -> None:
    peers.require_peers({"legacy": peers.legacy_python()})
    lines = quick_start_lines()
    clone = fresh_clone(tmp_path)
    setup, demo = lines[0], lines[1]
    assert demo.endswith("&"), demo  # the demo legacy server runs in the background
    run = await sh(setup + " && command -v mrtr-proxy", clone, limit_s=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("/.venv/bin/mrtr-proxy")
    rest = lines[2:]
    assert all(line.startswith("mrtr-proxy ") for line in rest), rest
    async with background(
        "demo-legacy", lambda p: demo.removesuffix("&").replace("8000", str(p)), clone
    ) as up:
        for line in rest:
            if " keygen " in f"{line} ":
                run = await sh(line, clone)
                assert run.returncode == 0, run.stderr
                (key_file,) = re.findall(r"--out (\S+)", line)
                assert (clone / key_file).stat().st_mode & 0o777 == 0o600
                (key,) = load_keys(files=[clone / key_file])
            elif " serve " in line and "--config" in line:
                example = clone / "config" / "example.yaml"
                example.write_text(ports((ROOT / "config" / "example.yaml").read_text(), up.port, 0))

                def with_port(p: int, line: str = line, example: Path = example) -> str:
                    text = example.read_text()
                    example.write_text(re.sub(r"(\n  port: )\d+", rf"\g<1>{p}", text, count=1))
                    return line

                async with background("mrtr-proxy", with_port, clone) as proxy:
                    await round_trip(clone, f"http://127.0.0.1:{proxy.port}/mcp")  # the demo server, HTTP
                    await round_trip(clone, f"http://127.0.0.1:{proxy.port}/servers/files/mcp")  # over stdio
            elif " serve " in line:
                assert "--key-file" in line, line
                async with background(
                    "mrtr-proxy", lambda p, line=line: ports(line, up.port, p), clone
                ) as proxy:
                    await round_trip(clone, f"http://127.0.0.1:{proxy.port}/mcp")
                    assert (
                        await sealing_kid(f"http://127.0.0.1:{proxy.port}/mcp") == key.kid
                    )  # it reads that key
                    assert "keys.ephemeral" not in proxy.log_text()
            elif " check-config " in line:
                run = await sh(line, clone)
                assert run.returncode == 0, run.stderr
                assert "upstream files: stdio" in run.stdout
            elif " probe " in line:
                run = await sh(ports(line, up.port, 0), clone, limit_s=120)
                assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
            else:
                pytest.fail(f"the test does not know how to check quick-start line {line!r}")
