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
import os
import sys
from importlib.metadata import version
from typing import Any

from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ROOT_URI = os.environ.get("MRTR_ROOT_URI", "file:///work/project")  # the one root roots/list returns
MODES = {"pinned": "2026-07-28", "auto": "auto", "legacy": "legacy"}
BEHAVIOUR: dict[str, Any] = {"elicit": "accept"}
SEEN: list[str] = []
WIRE: list[dict[str, Any]] = []


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    mode = getattr(params, "mode", None) or "form"
    SEEN.append(f"elicit:{mode}")
    action = BEHAVIOUR["elicit"]
    if action != "accept":
        return types.ElicitResult(action=action)
    if mode == "url":
        return types.ElicitResult(action="accept")
    schema = getattr(params, "requested_schema", None) or {}
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = set(schema.get("required", [])) if isinstance(schema, dict) else set()
    content: dict[str, Any] = {}
    for name, raw in props.items():
        spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
        kind = spec.get("type")
        if not (name in required or not spec.get("format") or spec.get("format") == "email"):
            continue  # an optional format-restricted string we cannot fill sensibly
        if kind == "boolean":
            content[name] = True
        elif kind in ("number", "integer"):
            content[name] = 1
        elif isinstance(spec.get("enum"), list):
            content[name] = spec["enum"][0]
        elif isinstance(spec.get("oneOf"), list):
            content[name] = spec["oneOf"][0].get("const")
        elif kind == "array":
            content[name] = []
        else:
            content[name] = {"name": "Alice", "color": "green", "email": "alice@example.com"}.get(name, "x")
    return types.ElicitResult(action="accept", content=content)


async def on_sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    SEEN.append("sample")
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="Paris"),
        model="test-model",
        stop_reason="endTurn",
    )


async def on_roots(context: Any) -> types.ListRootsResult:
    SEEN.append("roots")
    return types.ListRootsResult(roots=[types.Root(uri=ROOT_URI, name="project")])


def _text(contents: Any) -> str:
    parts = []
    for item in contents:
        text = getattr(item, "text", None)
        if text is None and getattr(item, "content", None) is not None:
            text = getattr(item.content, "text", None)
        parts.append(str(text))
    return "\n".join(parts)


async def run_step(client: Client, step: dict[str, Any]) -> dict[str, Any]:
    BEHAVIOUR["elicit"] = step.get("elicit", "accept")
    kind, name, args = step["kind"], step["name"], step.get("args") or {}
    if kind == "tool":
        result = await client.call_tool(name, args)
        return {"text": _text(result.content), "is_error": bool(result.is_error)}
    if kind == "prompt":
        prompt = await client.get_prompt(name, args)
        return {"text": _text(prompt.messages), "is_error": False}
    if kind == "resource":
        resource = await client.read_resource(name)
        return {"text": "\n".join(getattr(c, "text", "") for c in resource.contents), "is_error": False}
    if kind == "list_tools":
        tools = await client.list_tools()
        return {"text": ",".join(sorted(t.name for t in tools.tools)), "is_error": False}
    raise ValueError(kind)


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
