"""The full OAuth dance with mcp==2.3.0's `OAuthClientProvider`, in 2026-07-28 mode, through the proxy.

Runs under the peers' client venv (`.peers/client/bin/python`)::

    python oauth_client.py URL

The client calls the proxy with no token, gets 401, discovers the protected-resource metadata at the
proxy, the authorization server's metadata, registers dynamically, runs authorization code + PKCE with
the resource indicator (a headless redirect handler follows the authorize URL through the server's
login and consent redirects until the callback), trades the code for a token, and then calls `whoami`
and the eliciting `ask_name` (answered "Alice" through MRTR rounds).

Output (stdout, one JSON object): {"whoami": str, "ask_name": str, "steps": [...], "token_type": str}
or {"error": str, "steps": [...]}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
from mcp import Client, types
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

REDIRECT = "http://localhost:53682/callback"  # never listened on: the handler stops at this redirect
STEPS: list[str] = []


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        STEPS.append("token")
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        STEPS.append("registered")
        self.client = client_info


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    STEPS.append("elicit")
    return types.ElicitResult(action="accept", content={"name": "Alice"})


def headless(codes: asyncio.Queue[AuthorizationCodeResult]) -> Any:
    async def redirect(authorize_url: str) -> None:
        """Follow the authorization server's redirects (login, consent) with its cookies, as a browser
        would, until it redirects to our callback with the code."""
        STEPS.append("authorize")
        query = parse_qs(urlsplit(authorize_url).query)
        assert query.get("code_challenge_method") == ["S256"], "PKCE S256 expected"
        assert "resource" in query, "the resource indicator must be sent (RFC 8707)"
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
            url = authorize_url
            seen: list[str] = []
            for _ in range(12):
                seen.append(urlsplit(url).path)
                resp = await http.get(url)
                location = resp.headers.get("location")
                if location is None:
                    raise RuntimeError(f"authorization stopped: HTTP {resp.status_code}: {resp.text[:300]}")
                url = urljoin(url, location)
                if url.startswith(REDIRECT):
                    got = parse_qs(urlsplit(url).query)
                    if "code" not in got:
                        raise RuntimeError(f"authorization refused: {got}")
                    await codes.put(
                        AuthorizationCodeResult(
                            code=got["code"][0],
                            state=got.get("state", [None])[0],
                            iss=got.get("iss", [None])[0],
                        )
                    )
                    return
            raise RuntimeError(f"too many redirects: {seen}")

    return redirect


async def main(url: str) -> None:
    codes: asyncio.Queue[AuthorizationCodeResult] = asyncio.Queue()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="mrtr-proxy oauth test",
            redirect_uris=[REDIRECT],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(),
        redirect_handler=headless(codes),
        callback_handler=codes.get,
    )
    out: dict[str, Any] = {}
    try:
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            Client(
                streamable_http_client(url, http_client=http),
                mode="2026-07-28",
                elicitation_callback=on_elicit,
                read_timeout_seconds=30,
            ) as client,
        ):
            whoami = await client.call_tool("whoami", {})
            out["whoami"] = whoami.content[0].text  # type: ignore[union-attr]
            asked = await client.call_tool("ask_name", {})
            out["ask_name"] = asked.content[0].text  # type: ignore[union-attr]
    except Exception as exc:  # reported, not raised: the test asserts on it
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["steps"] = STEPS
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
