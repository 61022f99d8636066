"""The client's address, for its share of the calls (calls.max_calls_per_address)."""

from __future__ import annotations

from collections.abc import Mapping


def client_address(headers: Mapping[str, str], remote: str | None, header: str | None) -> str:
    """The TCP peer, or with `front.client_address_header` (e.g. X-Forwarded-For) the last entry of that
    header: the address the trusted ingress in front of the proxy saw (entries before it are whatever the
    client wrote). "" when neither is known."""
    if header is not None:
        value = headers.get(header, "")
        last = value.rsplit(",", 1)[-1].strip()
        if last:
            return last[:64]
    return remote or ""
