"""Keep-alive to the upstream: a response goes back to its client's connection pool (aiohttp's, or the lean
client's: lean_http.py) only when its body was read to the end; released earlier, its connection is closed
and the next request pays a new TCP handshake.

`finish_body` reads (and discards) what is left of a body, for at most `limit` seconds; a body still going
after that is closed, which costs that one connection and nothing else. A reply stream whose response was
already read is finished in the background after that (`finish_later`), not closed: its caller has what it
waited for, and a server that sends the closing chunk late (FastMCP 1.30 under load: over 0.25 s with 64
calls at once on two busy cores, which cost 13-20 new connections in a 2-second bench cell) keeps its
connection all the same.
"""

from __future__ import annotations

import asyncio

import aiohttp

from proxy.upstream.response import UpstreamResponse

# A call stream after its response, a 202's "Accepted": servers end these at once (the closing chunk is
# usually in the same read as the response). This bounds what a server that keeps a reply stream open after
# its response can cost a plain request (tools/list …), whose caller waits for the exchange to end.
FINISH_WITHIN = 0.25
# A reply stream still going after its response, finished in the background: long enough for a loaded server's
# closing chunk, short enough that a server keeping its streams open costs a connection for no longer.
FINISH_LATER = 5.0


async def finish_body(resp: UpstreamResponse, limit: float = FINISH_WITHIN, *, close: bool = True) -> bool:
    """Read the rest of `resp`'s body and drop it, so its connection can be reused. True: it ended.
    After `limit` seconds False, and the connection is closed (unless not `close`: the caller finishes
    it later)."""
    content = resp.content
    if content.at_eof():
        return True
    try:
        async with asyncio.timeout(limit):
            while await content.readany():
                pass
        return True
    except TimeoutError:
        if close:
            resp.close()
    except aiohttp.ClientError:
        resp.close()
    return False


async def leave(resp: UpstreamResponse) -> None:
    """What leaving `async with resp` does: give the connection back (closed unless the body ended)."""
    resp.release()
    await resp.wait_for_close()


async def finish_later(resp: UpstreamResponse, limit: float = FINISH_LATER) -> None:
    """`finish_body` as a task of its own, which then leaves the response (its connection goes back to the
    pool, or is closed if the body did not end within `limit`)."""
    try:
        await finish_body(resp, limit)
    finally:
        await leave(resp)


__all__ = ["FINISH_LATER", "FINISH_WITHIN", "finish_body", "finish_later", "leave"]
