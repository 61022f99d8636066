"""The client's address, for its shares (calls.max_calls_per_address, front.legacy_sessions_per_address).

Without `front.client_address_header` it is the TCP peer. With it, the header a trusted ingress sets, read
as RFC 9110 §5.3 says a list header is: every line of it, in order, joined into one list. Each proxy in
front appends the address it saw (nginx's `$proxy_add_x_forwarded_for`, Envoy; HAProxy's `option
forwardfor` adds a line of its own instead), so whatever the client wrote comes first and the trusted
entries last: `front.trusted_hops` says how many proxies append, and the entry that many places from the
end is the address the outermost trusted one saw. Reading only the first line, as before, let a client
that sent its own line choose a fresh address per request behind HAProxy.

`Forwarded` (RFC 7239) is read with aiohttp's parser (its `for=` parameters); any other header
(`X-Forwarded-For`, `X-Real-IP`, `X-Envoy-External-Address`, …) as a comma-separated list. An entry is
normalised to the bare IP address when it is one (brackets, ports and zone dropped): `1.2.3.4:5678` and
`1.2.3.4` are one client.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web

from proxy.config import FrontConfig

MAX_ENTRY = 64


@dataclass(frozen=True, slots=True)
class AddressSource:
    header: str | None = None
    trusted_hops: int = 1

    @classmethod
    def from_config(cls, front: FrontConfig) -> AddressSource:
        return cls(front.client_address_header, front.trusted_hops)

    def of(self, request: web.BaseRequest) -> str:
        """The client's address for this request; "" when nothing is known."""
        if self.header is not None:
            if self.header.lower() == "forwarded":
                entries = [str(e.get("for", "")) for e in request.forwarded]
            else:
                entries = [e for line in request.headers.getall(self.header, ()) for e in line.split(",")]
            chosen = pick(entries, self.trusted_hops)
            if chosen:
                return chosen
        return request.remote or ""


def pick(entries: Sequence[str], trusted_hops: int) -> str:
    """The entry `trusted_hops` places from the end (the leftmost when there are fewer: fewer proxies
    appended than configured), normalised; "" when there is none or it is empty."""
    if not entries:
        return ""
    return normalise(entries[max(len(entries) - trusted_hops, 0)])


def normalise(entry: str) -> str:
    """An IP address as `ipaddress` writes it (`[2001:db8::1]:80` → `2001:db8::1`, `10.0.0.1:5` →
    `10.0.0.1`); anything else (`unknown`, an obfuscated `_id`) as written, stripped and bounded."""
    text = entry.strip().strip('"').strip()
    host = text
    if text.startswith("["):  # [v6] or [v6]:port
        host = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # v4:port
        host = text.partition(":")[0]
    try:
        return str(ipaddress.ip_address(host.partition("%")[0]))
    except ValueError:
        return text[:MAX_ENTRY]


TCP_PEER = AddressSource()  # no header: the TCP peer
