"""Drives mcp==2.3.0's `Client(url, mode=MODE)` through a plan of calls; prints JSON results.

Runs under the peers' client venv (`.peers/client/bin/python`), never the project's. The client handles
`input_required` itself, calling the callbacks below; each step says how the elicitation callback answers.

    python modern_client.py URL '[{"id": "a", "kind": "tool", "name": "ask_name", "elicit": "accept"}]' [MODE]

MODE is the client's `mode`: "2026-07-28" (default), "auto", or "legacy" (initialize, inline requests).
`$MRTR_ROOT_URI` (default file:///work/project) is the one root it answers roots/list with. The callbacks and
`run_step` here are also what tests/interop/clients/py_client.py drives the client with.

Output (stdout, one JSON object): {step id: {"text": str, "is_error": bool} | {"error": str}}.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp import Client, types

ROOT_URI = os.environ.get("MRTR_ROOT_URI", "file:///work/project")  # the one root roots/list returns
BEHAVIOUR: dict[str, Any] = {"elicit": "accept"}
SEEN: list[str] = []
LOGS: list[dict[str, Any]] = []  # notifications/message of the current step ({level, data})
LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"
UNTIL_TRIES = 100  # a step with "until" repeats its call at most this often (a server applying roots)


async def on_log(params: types.LoggingMessageNotificationParams) -> None:
    LOGS.append({"level": params.level, "data": params.data})


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
        elif kind == "array":  # a multi-select: its first option (the proxy checks minItems)
            items = spec.get("items", {})
            options = items.get("enum") or [o.get("const") for o in items.get("anyOf", [])]
            content[name] = options[:1]
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
        return await _call_tool(client, step, name, args)
    if kind == "prompt":
        prompt = await client.get_prompt(name, args)
        return {"text": _text(prompt.messages), "is_error": False}
    if kind == "resource":
        resource = await client.read_resource(name)
        return {"text": "\n".join(getattr(c, "text", "") for c in resource.contents), "is_error": False}
    if kind == "list_tools":
        tools = await client.list_tools()
        return {"text": ",".join(sorted(t.name for t in tools.tools)), "is_error": False}
    if kind == "list_tools_all":  # every page, following next_cursor (bounded), in the server's order
        names: list[str] = []
        cursor: str | None = None
        pages = 0
        while pages < 100:
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            names += [t.name for t in page.tools]
            pages += 1
            cursor = page.next_cursor
            if not cursor:
                break
        return {"text": ",".join(names), "pages": pages, "is_error": False}
    raise ValueError(kind)


async def _call_tool(client: Client, step: dict[str, Any], name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tools/call; with "progress", the progress it reported ([progress, total, message] each); with
    "log_level", opted in to that level (its messages in "logs"); with "until", repeated (bounded, 50 ms
    apart) until the text contains that fragment."""
    progress: list[list[Any]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append([value, total, message])

    meta = {LOG_LEVEL_META: step["log_level"]} if step.get("log_level") else None
    LOGS.clear()
    for _ in range(UNTIL_TRIES if step.get("until") else 1):
        progress.clear()
        result = await client.call_tool(
            name, args, progress_callback=on_progress if step.get("progress") else None, meta=meta
        )
        text = _text(result.content)
        if not step.get("until") or step["until"] in text:
            break
        await asyncio.sleep(0.05)
    out: dict[str, Any] = {"text": text, "is_error": bool(result.is_error)}
    if step.get("progress"):
        out["progress"] = progress
    if step.get("log_level"):
        out["logs"] = list(LOGS)
    return out


async def main(url: str, plan: list[dict[str, Any]], mode: str = "2026-07-28") -> None:
    out: dict[str, Any] = {}
    async with Client(
        url,
        mode=mode,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
        logging_callback=on_log,
        read_timeout_seconds=30,
    ) as client:
        for step in plan:
            SEEN.clear()
            try:
                out[step["id"]] = await run_step(client, step)
            except Exception as exc:  # reported, not raised: the test asserts on it
                out[step["id"]] = {"error": f"{type(exc).__name__}: {exc}"}
            out[step["id"]]["seen"] = list(SEEN)
        out["_protocol_version"] = client.protocol_version
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:4]))
