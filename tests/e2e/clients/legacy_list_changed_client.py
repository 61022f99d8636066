"""mcp 1.30's ClientSession hearing `notifications/tools/list_changed` on the GET stream it opens itself.

    .peers/legacy/bin/python legacy_list_changed_client.py URL ADD_TOOL

Initializes (the client then opens its standalone GET stream on its own, in the background: when it is up
is not told), then calls ADD_TOOL (a tool that adds a tool and announces it) with a fresh name until its
message handler gets a list_changed (each wait bounded, at most 10 tries), and lists the tools again.
Output: {"heard": [the notification methods the message handler got], "listed": bool (an added tool is in
the list)}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def run(url: str, add_tool: str) -> dict[str, Any]:
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamablehttp_client

    heard: list[str] = []
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            heard.append(message.root.method)
            if isinstance(message.root, types.ToolListChangedNotification):
                changed.set()

    added: list[str] = []
    async with (
        streamablehttp_client(url) as (read, write, _),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        for attempt in range(10):
            name = f"heard_{attempt}"
            await session.call_tool(add_tool, {"name": name})
            added.append(name)
            try:
                await asyncio.wait_for(changed.wait(), 2.0)
            except TimeoutError:
                continue
            break
        listed = await session.list_tools()
        names = {tool.name for tool in listed.tools}
    prefix = add_tool.removesuffix("add_tool")
    return {"heard": sorted(set(heard)), "listed": any(prefix + n in names for n in added)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(sys.argv[1], sys.argv[2]))))
