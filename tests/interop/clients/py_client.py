"""Drives mcp==2.3.0's `Client` through a plan of calls in a chosen negotiation mode; prints one JSON object.

Runs under the peers' client venv (`.peers/client/bin/python`), never the project's:

    python py_client.py URL MODE PLAN_JSON        MODE: "pinned" (mode="2026-07-28") | "auto" | "legacy"

PLAN_JSON is the plan format of tests/e2e/clients/modern_client.py (`[{"id", "kind", "name", "args",
"elicit"}]`); `$MRTR_ROOT_URI` (default file:///work/project) is the one root it answers roots/list with.
Output, the same shape as ts_client.mjs: `{"client": {name, version, mode, protocolVersion}, "steps": {id:
{text, is_error, seen} | {error, seen}}, "wire": [{http, method, status, contentType, retry?}]}`.

The client handles `input_required` by itself (mcp/client/_input_required.py): it runs the callbacks below for
every inputRequests entry and retries with inputResponses + requestState on a new JSON-RPC id. `wire` comes
from httpx event hooks on the client's own HTTP client, so the probe (`server/discover`), any `initialize`,
and every retry are visible.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# One driver for mcp 2.3.0: the callbacks, the plan format and run_step live in the e2e client.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e" / "clients"))
from modern_client import SEEN, on_elicit, on_log, on_roots, on_sample, run_step

MODES = {"pinned": "2026-07-28", "auto": "auto", "legacy": "legacy"}
WIRE: list[dict[str, Any]] = []


async def _on_request(request: Any) -> None:
    row: dict[str, Any] = {"http": request.method}
    try:
        sent = json.loads(request.content) if request.content else {}
    except (ValueError, RuntimeError):  # RuntimeError: a streaming body that was not read
        sent = {}
    if isinstance(sent, dict):
        row["method"] = sent.get("method") or ("response" if "result" in sent or "error" in sent else None)
        params = sent.get("params") or {}
        if isinstance(params, dict) and "requestState" in params:
            row["retry"] = sorted((params.get("inputResponses") or {}).keys())
    request.extensions["mrtr_row"] = row
    WIRE.append(row)


async def _on_response(response: Any) -> None:
    row = response.request.extensions.get("mrtr_row")
    if row is not None:
        row["status"] = response.status_code
        row["contentType"] = response.headers.get("content-type", "")


async def main(url: str, mode: str, plan: list[dict[str, Any]]) -> None:
    out: dict[str, Any] = {
        "client": {"name": "mcp", "version": version("mcp"), "mode": mode},
        "steps": {},
        "wire": WIRE,
    }
    http = create_mcp_http_client()
    http.event_hooks = {"request": [_on_request], "response": [_on_response]}
    try:
        async with (
            http,
            Client(
                streamable_http_client(url, http_client=http),
                mode=MODES[mode],
                elicitation_callback=on_elicit,
                sampling_callback=on_sample,
                list_roots_callback=on_roots,
                logging_callback=on_log,
                client_info=types.Implementation(name="mrtr-interop-py-client", version="1"),
                read_timeout_seconds=30,
            ) as client,
        ):
            out["client"]["protocolVersion"] = client.protocol_version
            for step in plan:
                SEEN.clear()
                try:
                    out["steps"][step["id"]] = await run_step(client, step)
                except Exception as exc:  # reported, not raised: the caller asserts on it
                    out["steps"][step["id"]] = {"error": f"{type(exc).__name__}: {exc}"}
                out["steps"][step["id"]]["seen"] = list(SEEN)
    except Exception as exc:  # a failed connect/probe, reported like a step error
        out["connectError"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
