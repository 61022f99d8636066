"""A legacy MCP server (FastMCP 1.x, protocol 2025-11-25) whose tool asks the user mid-call, the old way.

`book_table` calls `ctx.elicit(...)`: over legacy Streamable HTTP that is an `elicitation/create` request sent
inline on the tool call's SSE stream, blocking until the client answers. A 2026-07-28 client cannot answer
that; through mrtr-proxy it arrives as an `input_required` round instead.

Run with the mcp==1.30.0 virtualenv: `.peers/legacy/bin/python demo/legacy_server.py --port 8000`
(`--stdio`: on stdin/stdout, as config/example.yaml's stdio upstream runs it).
"""

from __future__ import annotations

import argparse
import logging

import anyio
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel, Field


class Booking(BaseModel):
    guests: int = Field(description="How many guests?", ge=1, le=12)
    name: str = Field(description="Name for the booking")


class SessionEndIsNoError(logging.Filter):
    """mcp 1.30's `StreamableHTTPServerTransport.terminate()` (a client's DELETE ending its session) closes
    the standalone GET stream's reader while that stream's writer task still iterates it: the writer logs
    the `anyio.ClosedResourceError` as "Error in standalone SSE writer" with a traceback, though nothing
    went wrong — the session ended as asked. mrtr-proxy closes its GET stream before its DELETE (at drain,
    when an idle session is dropped), which only narrows the race: the server may still handle the DELETE
    first. So this demo's log dropped exactly that record; any other error still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        benign = record.msg == "Error in standalone SSE writer" and isinstance(exc, anyio.ClosedResourceError)
        return not benign


def build(port: int) -> FastMCP:
    server = FastMCP("demo-restaurant", host="127.0.0.1", port=port, log_level="WARNING")

    @server.tool()
    async def book_table(day: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """Book a table; asks the user for the details it needs."""
        answer = await ctx.elicit(f"Booking a table for {day}. Who is coming?", Booking)
        if answer.action != "accept":
            return f"No booking made (the user chose {answer.action})."
        return f"Booked a table for {answer.data.guests} on {day}, under the name {answer.data.name}."

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--stdio", action="store_true", help="serve on stdin/stdout instead of HTTP")
    options = parser.parse_args()
    logging.getLogger("mcp.server.streamable_http").addFilter(SessionEndIsNoError())
    build(options.port).run("stdio" if options.stdio else "streamable-http")
