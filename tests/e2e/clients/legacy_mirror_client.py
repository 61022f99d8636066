"""Drives a real legacy Python client through a plan of tool calls and prints one JSON object.

    .peers/legacy/bin/python legacy_mirror_client.py mcp URL PLAN_JSON          # mcp 1.30's ClientSession
    .peers/fastmcp4/bin/python legacy_mirror_client.py fastmcp URL PLAN_JSON    # FastMCP 4, mode="legacy"

PLAN_JSON: [{"id", "name", "args"?, "elicit"?: "accept"|"decline"|"cancel", "progress"?: bool,
             "cancel"?: bool (mcp only: the elicitation callback sends notifications/cancelled for the call)}]
Both clients declare elicitation (form and url), sampling and roots. An accepted form is filled from its
schema: an enum's second value, a titled enum's last const, `ada@example.com` for format email,
`1815-12-10` for format date, `Ada` for other strings. Sampling answers `Paris`; roots are
`file:///work/project`. Output: {"protocolVersion", "steps": {id: {"text", "is_error", "seen", "progress",
"logs"} | {"error", "seen"}}}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any

ROOT = "file:///work/project"
seen: list[str] = []
progress: list[list[float | None]] = []
logs: list[str] = []
step: dict[str, Any] = {}


def fill(schema: dict[str, Any]) -> dict[str, Any]:
    content: dict[str, Any] = {}
    for name, spec in (schema.get("properties") or {}).items():
        if "enum" in spec:
            content[name] = spec["enum"][1 % len(spec["enum"])]
        elif "oneOf" in spec:
            content[name] = spec["oneOf"][-1]["const"]
        elif spec.get("format") == "email":
            content[name] = "ada@example.com"
        elif spec.get("format") == "date":
            content[name] = "1815-12-10"
        else:
            content[name] = "Ada"
    return content


def answer(params: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    mode = params.get("mode") or "form"
    seen.append(f"elicit:{mode}")
    action = step.get("elicit", "accept")
    if action != "accept" or mode == "url":
        return action, None
    return action, fill(params.get("requestedSchema") or {})


async def run_mcp(url: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamablehttp_client

    holder: dict[str, ClientSession] = {}

    async def on_elicit(context: Any, params: Any) -> Any:
        if step.get("cancel"):
            session = holder["s"]
            rid = session._request_id - 1  # the call in flight: the only request this client has out
            note = types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=rid, reason="user")
            )
            await session.send_notification(types.ClientNotification(note))
            seen.append("cancel-sent")
        action, content = answer(params.model_dump(by_alias=True, exclude_none=True))
        return types.ElicitResult(action=action, content=content)

    async def on_sample(context: Any, params: Any) -> Any:
        seen.append("sample")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="m"
        )

    async def on_roots(context: Any) -> Any:
        seen.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri=ROOT, name="project")])

    async def on_log(params: Any) -> None:
        logs.append(json.dumps(params.data) if not isinstance(params.data, str) else params.data)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append([value, total])

    out: dict[str, Any] = {"steps": {}}
    async with (
        streamablehttp_client(url) as (read, write, _),
        ClientSession(
            read,
            write,
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
            list_roots_callback=on_roots,
            logging_callback=on_log,
        ) as session,
    ):
        holder["s"] = session
        init = await session.initialize()
        out["protocolVersion"] = init.protocolVersion
        out["server"] = init.serverInfo.name
        for item in plan:
            await _step(out, item, lambda i: _mcp_call(session, i, on_progress))
    return out


async def _mcp_call(session: Any, item: dict[str, Any], on_progress: Any) -> dict[str, Any]:
    timeout = timedelta(seconds=3) if item.get("cancel") else None
    result = await session.call_tool(
        item["name"], item.get("args") or {}, read_timeout_seconds=timeout, progress_callback=on_progress
    )
    return {"text": result.content[0].text if result.content else "", "is_error": bool(result.isError)}


async def run_fastmcp(url: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    from fastmcp import Client
    from fastmcp.client.elicitation import ElicitResult
    from mcp_types import CreateMessageResult, TextContent

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        action, content = answer(params.model_dump(by_alias=True, exclude_none=True))
        return ElicitResult(action=action, content=content)

    async def on_sample(messages: Any, params: Any, context: Any) -> Any:
        seen.append("sample")
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="Paris"), model="m"
        )

    async def on_log(message: Any) -> None:
        data = message.data
        logs.append(json.dumps(data) if not isinstance(data, str) else data)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append([value, total])

    client = Client(
        url,
        mode="legacy",
        elicitation_handler=on_elicit,
        sampling_handler=on_sample,
        roots=[ROOT],
        log_handler=on_log,
        progress_handler=on_progress,
    )
    out: dict[str, Any] = {"steps": {}}
    async with client:
        out["protocolVersion"] = client.initialize_result.protocol_version
        out["server"] = client.initialize_result.server_info.name

        async def call(item: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(item["name"], item.get("args") or {}, raise_on_error=False)
            text = result.content[0].text if result.content else ""
            return {"text": text, "is_error": bool(result.is_error)}

        for item in plan:
            await _step(out, item, call)
    return out


async def _step(out: dict[str, Any], item: dict[str, Any], call: Any) -> None:
    step.clear()
    step.update(item)
    seen.clear()
    progress.clear()
    logs.clear()
    try:
        row = await call(item)
    except Exception as exc:
        row = {"error": f"{type(exc).__name__}: {exc}"}
    row.update(seen=list(seen), progress=list(progress), logs=list(logs))
    out["steps"][item["id"]] = row


def main() -> None:
    kind, url, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    runner = run_mcp if kind == "mcp" else run_fastmcp
    print(json.dumps(asyncio.run(runner(url, plan))))


if __name__ == "__main__":
    main()
