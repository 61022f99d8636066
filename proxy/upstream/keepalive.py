"""Keep-alive to the upstream: a response goes back to aiohttp's connection pool only when its body was read
to the end; released earlier, aiohttp closes the connection and the next request pays a new TCP handshake.

`finish_body` reads (and discards) what is left of a body, for at most `limit` seconds; a body still going
after that is closed, which costs that one connection and nothing else.
"""

from __future__ import annotations

import asyncio

import aiohttp

# A call stream after its response, a 202's "Accepted": servers end these at once (the closing chunk is
# usually in the same read as the response). This bounds what a server that keeps a reply stream open after
# its response can cost a plain request (tools/list …), whose caller waits for the exchange to end.
FINISH_WITHIN = 0.25


async def finish_body(resp: aiohttp.ClientResponse, limit: float = FINISH_WITHIN) -> None:
    """Read the rest of `resp`'s body and drop it, so its connection can be reused; close it after `limit`."""
    content = resp.content
    if content.at_eof():
        return
    try:
        async with asyncio.timeout(limit):
            while await content.readany():
                pass
    except TimeoutError:
        resp.close()
    except aiohttp.ClientError:
        resp.close()


__all__ = ["FINISH_WITHIN", "finish_body"]
