"""mcp==2.3.0's own `Client.listen()` against the proxy: waits for the first change event, prints JSON.

Runs under the peers' client venv (`.peers/client/bin/python`), never the project's:

    python listen_client.py URL

Output (stdout, one JSON object): {"honored": the acknowledged filter, "event": the first event's type}.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import Client


async def main(url: str) -> None:
    async with (
        Client(url, mode="2026-07-28") as client,
        client.listen(tools_list_changed=True) as subscription,
    ):
        honored = subscription.honored.model_dump(by_alias=True, exclude_none=True)
        async with asyncio.timeout(20):
            event = await anext(aiter(subscription))
    print(json.dumps({"honored": honored, "event": type(event).__name__}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
