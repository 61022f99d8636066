"""`negotiate` (upstream/router.py): which failed offers end the `initialize` negotiation. A URL that is no
Streamable HTTP endpoint (404, 405: an HTTP+SSE server's /sse, a wrong path) was offered all four versions,
its error page logged four times; any other HTTP error may be about the version and the next one is tried."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proxy.upstream.base import HttpRefused
from proxy.upstream.router import negotiate
from proxy.wire import jsonrpc

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


def exchange_refusing(status: int, accepts: str | None = None) -> tuple[Any, list[str]]:
    offered: list[str] = []

    async def exchange(method: str, params: dict[str, Any], wait: float) -> jsonrpc.Response:
        offered.append(params["protocolVersion"])
        if params["protocolVersion"] != accepts:
            raise HttpRefused(status, f"upstream answered HTTP {status}: no")
        return jsonrpc.Result(1, {"protocolVersion": accepts, "capabilities": {}, "serverInfo": {}})

    return exchange, offered


@pytest.mark.parametrize("status", [404, 405])
def test_not_an_endpoint_ends_the_negotiation_after_one_offer(status: int) -> None:
    exchange, offered = exchange_refusing(status)
    with pytest.raises(HttpRefused) as info:
        asyncio.run(negotiate(exchange, VERSIONS, {}, 1.0))
    assert offered == ["2025-11-25"]
    assert info.value.status == status
    assert str(info.value) == f"initialize failed: 2025-11-25: upstream answered HTTP {status}: no"


@pytest.mark.parametrize("status", [400, 500])
def test_other_statuses_still_try_the_next_version(status: int) -> None:
    exchange, offered = exchange_refusing(status, accepts="2025-03-26")
    info = asyncio.run(negotiate(exchange, VERSIONS, {}, 1.0))
    assert info.protocol_version == "2025-03-26"
    assert offered == ["2025-11-25", "2025-06-18", "2025-03-26"]
