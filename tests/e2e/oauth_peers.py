"""OAuth peers for the authorization tests: a JWKS endpoint the test controls (in-process aiohttp), and
the FastMCP 1.30 resource server (tests/fixtures/oauth_fastmcp_server.py) as a child process."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import peers
from aiohttp import web
from aiohttp.test_utils import TestServer

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "oauth_fastmcp_server.py"


@dataclass
class JwksServer:
    url: str
    document: dict[str, Any] = field(default_factory=lambda: {"keys": []})
    fetches: int = 0


@contextlib.asynccontextmanager
async def jwks_server() -> AsyncIterator[JwksServer]:
    """`GET /jwks` serves `server.document` as it is at that moment (rotate keys by replacing it)."""
    state: JwksServer

    async def serve(_: web.Request) -> web.Response:
        state.fetches += 1
        return web.json_response(state.document)

    app = web.Application()
    app.router.add_get("/jwks", serve)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    state = JwksServer(str(server.make_url("/jwks")))
    try:
        yield state
    finally:
        await server.close()


@contextlib.asynccontextmanager
async def start_oauth_fastmcp(
    *,
    issuer: str,
    audience: str,
    jwks_file: Path | None = None,
    jwks_url: str | None = None,
    required_scope: str | None = None,
    transport: str = "streamable-http",
) -> AsyncIterator[peers.PeerUrl]:
    """The FastMCP 1.30 resource server on 127.0.0.1: ``http://127.0.0.1:PORT/mcp``; always stopped."""
    peers.require_peers({"legacy python (mcp 1.30)": peers.legacy_python()})

    def argv(port: int) -> list[str]:
        args = [str(peers.legacy_python()), str(FIXTURE), "--port", str(port)]
        args += ["--issuer", issuer, "--audience", audience]
        args += ["--jwks-file", str(jwks_file)] if jwks_file else ["--jwks-url", str(jwks_url)]
        args += ["--transport", transport]
        return args + (["--required-scope", required_scope] if required_scope else [])

    path = "/mcp" if transport == "streamable-http" else "/sse"
    async with peers.run_peer("oauth-fastmcp", argv, env={"PYTHONUNBUFFERED": "1"}) as peer:
        yield peers.PeerUrl(f"http://{peers.LOOPBACK}:{peer.port}{path}", peer)


def write_jwks(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document))
    return path


AS_FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "oidc_provider.mjs"


@contextlib.asynccontextmanager
async def start_oidc_provider() -> AsyncIterator[str]:
    """`oidc-provider` (npm) on 127.0.0.1 (tests/fixtures/oidc_provider.mjs); yields its issuer URL."""
    peers.require_peers({"node": peers.node_bin(), "oidc-provider": peers.node_modules() / "oidc-provider"})

    def argv(port: int) -> list[str]:
        return [str(peers.node_bin()), str(AS_FIXTURE), str(port)]

    async with peers.run_peer("oidc-provider", argv) as peer:
        yield f"http://{peers.LOOPBACK}:{peer.port}/oidc"
