"""Request ids: the client's `X-Request-Id` when it is sane, else a new random one.

The id is in the request's canonical log line and bound into every log line emitted while the request is
handled, sent upstream on the HTTP requests made for it (proxy/upstream/propagation.py), and echoed on the
response. That is all it is for: log correlation, never a credential (a client may choose its own), so a made
one needs to be unique, not secret. It is 128 bits of a Mersenne Twister seeded from os.urandom (again in a
forked child), not `secrets.token_hex`: that is a getrandom(2) system call per request (~0.8 µs, 0.2 µs
now). The ids that guard something (call ids, session tokens, handles' nonces) stay `secrets`/os.urandom.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping

from aiohttp import web

from proxy.upstream.propagation import propagated

REQUEST_ID_HEADER = "X-Request-Id"
MAX_LENGTH = 128
_made = random.Random()  # noqa: S311 - see the module's docstring: unique, not secret
os.register_at_fork(after_in_child=_made.seed)  # a forked child does not repeat its parent's ids


def request_id(headers: Mapping[str, str]) -> str:
    """The client's id if it is printable ASCII of at most MAX_LENGTH characters, else a fresh one."""
    given = headers.get(REQUEST_ID_HEADER, "").strip()
    if 0 < len(given) <= MAX_LENGTH and given.isascii() and given.isprintable():
        return given
    return _made.randbytes(16).hex()


def echo_request_id(_: web.Request, response: web.StreamResponse) -> None:
    """At `on_response_prepare` (process/app.py): a response prepared while its request is handled (an SSE
    stream, a relayed answer) gets the request id here; one returned to aiohttp unprepared gets it from
    the front."""
    rid = propagated().get(REQUEST_ID_HEADER)
    if rid is not None:
        response.headers[REQUEST_ID_HEADER] = rid
