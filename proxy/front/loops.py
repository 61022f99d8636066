"""Request loops: an upstream that leads back to the proxy (its own address configured as an upstream, two
gateways each in front of the other, an ingress rule that sends the upstream's host to the proxy).

Without a check, every pass around such a loop is a new client request: it opens another upstream session
(whose `initialize` comes around again) or probes the upstream's era again, until a pool limit or a timeout
ends it, with a connection and a pending request held at every level. So every upstream HTTP request made
for a client request carries `Via` (RFC 9110 §7.6.3): what the client's request said, plus this proxy's own
entry, `1.1 mrtr-proxy-<12 hex>`, a pseudonym drawn when the app is made (it says nothing about the
deployment). A request whose `Via` already names this proxy has come back around: refused at once with HTTP
508 and a JSON-RPC error, which the proxy that sent it answers its own client with. A loop through several
proxies is caught the first time it reaches one of them twice.
"""

from __future__ import annotations

import os

import structlog
from multidict import istr

from proxy.front.checks import Refusal
from proxy.wire import jsonrpc
from proxy.wire.jsonrpc import ErrorObject

VIA = istr("Via")
MAX_VIA = 2048  # characters of the Via a client's request may bring (a few proxies' entries need ~100)
LOOP_STATUS = 508  # Loop Detected (RFC 5842)
LOOP = (
    "Request loop: this request has already passed through this proxy (its Via header names it); an upstream "
    "URL or route leads back to the proxy"
)
LONG_VIA = f"The Via header is longer than {MAX_VIA} characters"

log = structlog.get_logger(__name__)


class Hop:
    """This proxy's entry in `Via`, and the check of a request's `Via` for it. One per app."""

    __slots__ = ("_token", "entry")

    def __init__(self, token: str | None = None) -> None:
        self._token = token or f"mrtr-proxy-{os.urandom(6).hex()}"
        self.entry = f"1.1 {self._token}"  # received-protocol and a pseudonym (RFC 9110 §7.6.3)

    def via(self, incoming: str | None) -> str:
        """The `Via` to send upstream for a request that came with `incoming` (its Via header lines joined,
        or None). Raises Refusal: the request has been here before (508), or its Via is over MAX_VIA (400)."""
        if incoming is None:
            return self.entry
        if self._token in incoming:
            log.warning("request.loop", via=incoming[:300])
            raise Refusal(LOOP_STATUS, ErrorObject(jsonrpc.INVALID_REQUEST, LOOP))
        if len(incoming) > MAX_VIA:
            raise Refusal(400, ErrorObject(jsonrpc.INVALID_REQUEST, LONG_VIA))
        return f"{incoming}, {self.entry}"


__all__ = ["LONG_VIA", "LOOP", "LOOP_STATUS", "MAX_VIA", "VIA", "Hop"]
