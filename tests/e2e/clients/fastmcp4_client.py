"""Drives FastMCP 4.2.3's own `Client(url, mode=MODE)` through a plan of tool calls; prints JSON results.

Runs under the peers' fastmcp4 venv (`.peers/fastmcp4/bin/python`), never the project's. The client handles
`input_required` itself (2026-07-28) or answers the server's inline requests (legacy), calling the handlers
below: every form is answered with ``{"name": "Alice"}`` (or declined / cancelled, as the step says), every
sampling request with "Paris", roots/list with file:///work/project.

    python fastmcp4_client.py URL PLAN_JSON [MODE]     MODE: "2026-07-28" (default), "auto", "legacy"

PLAN_JSON: [{"id": "a", "name": TOOL, "args": {...}, "elicit": "accept"|"decline"|"cancel",
             "progress": true}]
Output (stdout, one JSON object): {step id: {"text", "is_error", "seen"[, "progress"]} | {"error", "seen"}}
and "_mode" (the client's mode).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from mcp_types import CreateMessageResult, TextContent

BEHAVIOUR: dict[str, Any] = {"elicit": "accept"}
SEEN: list[str] = []


async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
    SEEN.append("elicit")
    action = BEHAVIOUR["elicit"]
    if action != "accept":
        return ElicitResult(action=action)
    properties = (getattr(params, "requested_schema", None) or {}).get("properties", {})
    return ElicitResult(action="accept", content={name: "Alice" for name in properties})


async def on_sample(messages: Any, params: Any, context: Any) -> Any:
    SEEN.append("sample")
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text="Paris"), model="m", stop_reason="endTurn"
    )


async def main(url: str, plan: list[dict[str, Any]], mode: str = "2026-07-28") -> None:
    out: dict[str, Any] = {"_mode": mode}
    progress: list[list[Any]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append([value, total, message])

    handlers: dict[str, Any] = {"elicitation_handler": on_elicit, "sampling_handler": on_sample}
    handlers["roots"] = ["file:///work/project"]
    async with Client(url, mode=mode, timeout=30, **handlers) as c:
        for step in plan:
            SEEN.clear()
            BEHAVIOUR["elicit"] = step.get("elicit", "accept")
            progress.clear()
            try:
                result = await c.call_tool(
                    step["name"],
                    step.get("args") or {},
                    raise_on_error=False,
                    progress_handler=on_progress if step.get("progress") else None,
                )
                text = "\n".join(getattr(item, "text", "") for item in result.content)
                out[step["id"]] = {"text": text, "is_error": bool(result.is_error)}
                if step.get("progress"):
                    out[step["id"]]["progress"] = list(progress)
            except Exception as exc:  # reported, not raised: the test asserts on it
                out[step["id"]] = {"error": f"{type(exc).__name__}: {exc}"}
            out[step["id"]]["seen"] = list(SEEN)
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:4]))
