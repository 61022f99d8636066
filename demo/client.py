"""A tiny 2026-07-28 client that shows one MRTR round trip through mrtr-proxy, on the wire.

It calls `book_table`, receives `input_required` with an elicitation, answers it as a user would, and
retries with `inputResponses` and the opaque `requestState` — printing each exchange.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import aiohttp

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "mrtr-demo-client", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


def show(label: str, payload: dict[str, Any]) -> None:
    text = json.dumps(payload, indent=2)
    state = payload.get("params", payload.get("result", {})).get("requestState")
    if isinstance(state, str) and len(state) > 40:
        text = text.replace(state, f"{state[:24]}…({len(state)} chars, sealed)")
    print(f"\n{label}\n{text}")


async def post(
    http: aiohttp.ClientSession,
    url: str,
    rid: int,
    method: str,
    params: dict[str, Any],
    *,
    quiet: bool = False,
) -> Any:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": META}}
    headers = {
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
        "Accept": "application/json, text/event-stream",
    }
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    shown = {k: v for k, v in body.items()}
    shown["params"] = {k: v for k, v in body["params"].items() if k != "_meta"}
    if not quiet:
        show(f"--> POST {url}  ({method})", shown)
    async with http.post(url, json=body, headers=headers) as resp:
        reply = await resp.json()
    if not quiet:
        show(f"<-- HTTP {resp.status}", reply)
    return reply


async def main(url: str) -> int:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        discover = await post(http, url, 1, "server/discover", {}, quiet=True)
        server = discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
        print(f"# server/discover: the proxy presents legacy server {server!r} as a {VERSION} server.")
        args = {"name": "book_table", "arguments": {"day": "Friday"}}
        first = await post(http, url, 2, "tools/call", args)
        result = first["result"]
        assert result["resultType"] == "input_required", result
        ((key, request),) = result["inputRequests"].items()
        print(f"\n# Round 1: the legacy tool is parked mid-call; the proxy asks for input under key {key!r}.")
        print(f"# The user answers: {request['params']['message']!r} -> 4 guests, name 'Ada'.")
        final = await post(
            http,
            url,
            3,
            "tools/call",
            {
                **args,
                "inputResponses": {key: {"action": "accept", "content": {"guests": 4, "name": "Ada"}}},
                "requestState": result["requestState"],
            },
        )
        assert final["result"]["resultType"] == "complete", final
        print("\n# Done: the same legacy call resumed and finished; nothing was re-run.")
        print(final["result"]["content"][0]["text"])
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080/mcp")
    raise SystemExit(asyncio.run(main(parser.parse_args().url)))
