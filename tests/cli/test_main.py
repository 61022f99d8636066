"""The `mrtr-proxy` command as an operator runs it: keygen, check-config, serve (bad config, SIGHUP)."""

from __future__ import annotations

import base64
import os
import signal
import sys
from pathlib import Path

import peers
import pytest
from waiting import eventually

from proxy.cli.main import main
from proxy.handle import generate_key_b64

PROXY = [sys.executable, "-m", "proxy"]


def test_keygen_prints_a_32_byte_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keygen"]) == 0
    key = capsys.readouterr().out.strip()
    assert len(base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))) == 32
    assert main(["keygen"]) == 0
    assert capsys.readouterr().out.strip() != key


def test_check_config_prints_what_it_would_serve(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", str(peers.REPO_ROOT / "config" / "example.yaml")]) == 0
    out = capsys.readouterr().out
    assert "upstream search: streamable-http http://127.0.0.1:8000/mcp -> /servers/search/mcp and /mcp" in out
    assert "upstream files: stdio" in out


def test_check_config_rejects_with_dotted_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("listen: {port: 70000}\ncalls: {gather_window_ms: -1}\nupstreams: []\nsurprise: 1\n")
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"invalid configuration in {bad}" in err
    for fragment in ("listen.port:", "calls.gather_window_ms:", "upstreams:", "unknown key 'surprise'"):
        assert fragment in err


@pytest.mark.asyncio(loop_scope="session")
async def test_serve_refuses_a_bad_key_and_names_the_source(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("c2hvcnQ=")  # base64, but not 32 bytes
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"keys: {{files: [{key}]}}\nupstreams: [{{name: a, url: 'http://127.0.0.1:1/mcp'}}]\n")
    run = await peers.run_once([*PROXY, "serve", "--config", str(cfg), "--listen", "127.0.0.1:1"], limit_s=30)
    assert run.returncode == 2
    assert str(key) in run.stderr
    assert "c2hvcnQ" not in run.stderr  # the key text itself is never printed


@pytest.mark.asyncio(loop_scope="session")
async def test_sighup_reloads_the_key_ring(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "1-old").write_text(generate_key_b64())
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"keys: {{dirs: [{keys}]}}\nupstreams: [{{name: a, url: 'http://127.0.0.1:1/mcp'}}]\n")
    async with peers.run_peer(
        "mrtr-proxy",
        lambda p: [
            *PROXY,
            "serve",
            "--config",
            str(cfg),
            "--listen",
            f"127.0.0.1:{p}",
            "--log-format",
            "json",
        ],
    ) as peer:
        (keys / "0-new").write_text(generate_key_b64())
        os.kill(peer.process.pid, signal.SIGHUP)
        await eventually(
            lambda: '"keys.reloaded"' in peer.log_text(), "the keys.reloaded line", seen=peer.log_text
        )
        assert peer.log_text().count('"key_ids"') >= 1


@pytest.mark.asyncio(loop_scope="session")
async def test_peer_port_serves_forwarded_retries(tmp_path: Path) -> None:
    """With replica.peer_port, a second listener serves the peer route, and handles name it as the owner."""
    import aiohttp

    peer_port = peers.free_port()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"replica: {{peer_port: {peer_port}}}\nupstreams: [{{name: a, url: 'http://127.0.0.1:1/mcp'}}]\n"
    )
    async with peers.run_peer(
        "mrtr-proxy", lambda p: [*PROXY, "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{p}"]
    ) as peer:
        out = peer.log_text()
        assert f"(replica 127.0.0.1:{peer_port})" in out
        async with aiohttp.ClientSession() as http:
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "x", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
            }
            headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "x"}
            # Unsigned: refused, whatever it carries (only replicas holding the key ring sign).
            async with http.post(
                f"http://127.0.0.1:{peer_port}/_mrtr/forward/mcp",
                json=body,
                headers={**headers, "X-Mrtr-Forwarded-By": "127.0.0.1:9"},
            ) as r:
                assert r.status == 401
                assert (await r.json())["error"] == {
                    "code": -32600,
                    "message": "Peer authentication failed (the peer route is for replicas)",
                }
            # The peer route is served on the peer port only, and the peer port serves nothing else.
            async with http.post(f"http://127.0.0.1:{peer.port}/_mrtr/forward/mcp", json=body) as r:
                assert r.status == 404
            async with http.post(f"http://127.0.0.1:{peer_port}/mcp", json=body, headers=headers) as r:
                assert r.status == 404
        assert '"peer.auth_failed"' in peer.log_text()
