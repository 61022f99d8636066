"""Request ids: the client's `X-Request-Id` when it is sane, else a new random one.

The id is in the request's canonical log line and bound into every log line emitted while the request is
handled, sent upstream on the HTTP requests made for it (proxy/upstream/propagation.py), and echoed on the
response.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from aiohttp import web

from proxy.upstream.propagation import propagated

REQUEST_ID_HEADER = "X-Request-Id"
MAX_LENGTH = 128


def request_id(headers: Mapping[str, str]) -> str:
    """The client's id if it is printable ASCII of at most MAX_LENGTH characters, else a fresh one."""
    given = headers.get(REQUEST_ID_HEADER, "").strip()
    if 0 < len(given) <= MAX_LENGTH and given.isascii() and given.isprintable():
        return given
    return secrets.token_hex(16)


async def echo_request_id(_: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: a response prepared while its request is handled (an SSE stream, a relayed
    answer) gets the request id here; one returned to aiohttp unprepared gets it from the front."""
    rid = propagated().get(REQUEST_ID_HEADER)
    if rid is not None:
        response.headers[REQUEST_ID_HEADER] = rid
