"""SessionLevels (calls/scope.py): logging/setLevel is sent once per session and level, only to an upstream
that declares `logging`; a refusal leaves the level unknown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from proxy.calls.scope import SessionLevels
from proxy.upstream.base import ServerInfo, UpstreamError
from proxy.wire import jsonrpc

pytestmark = pytest.mark.asyncio


class Session:
    def __init__(self, capabilities: Mapping[str, Any], answer: str = "ok") -> None:
        self.info = ServerInfo("2025-11-25", capabilities, {}, None)
        self.sent: list[tuple[str, Mapping[str, Any]]] = []
        self.answer = answer

    async def request(self, method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        self.sent.append((method, params))
        if self.answer == "lost":
            raise UpstreamError("gone")
        if self.answer == "error":
            return jsonrpc.error(1, -32601, "Method not found")
        return jsonrpc.Result(1, {})


async def test_set_once_per_level() -> None:
    levels, session = SessionLevels(), Session({"logging": {}})
    for level in ("info", "info", "debug", None, "debug"):
        await levels.ensure(session, level)  # type: ignore[arg-type]
    assert session.sent == [("logging/setLevel", {"level": "info"}), ("logging/setLevel", {"level": "debug"})]
    assert levels.level(session) == "debug"  # type: ignore[arg-type]


async def test_not_sent_without_the_logging_capability() -> None:
    levels, session = SessionLevels(), Session({"tools": {}})
    await levels.ensure(session, "info")  # type: ignore[arg-type]
    assert session.sent == []


@pytest.mark.parametrize("answer", ["error", "lost"])
async def test_a_refusal_is_not_remembered(answer: str) -> None:
    levels, session = SessionLevels(), Session({"logging": {}}, answer)
    await levels.ensure(session, "info")  # type: ignore[arg-type]
    await levels.ensure(session, "info")  # type: ignore[arg-type]
    assert len(session.sent) == 2
    assert levels.level(session) is None  # type: ignore[arg-type]
