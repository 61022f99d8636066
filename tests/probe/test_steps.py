"""The MCP-level steps over a scripted conversation (a fake: these test the steps' own logic only)."""

from __future__ import annotations

from collections.abc import Callable

from proxy.probe.channel import ProbeError, Recorder
from proxy.probe.findings import Item
from proxy.probe.steps import call_tool, list_items, offered_alone
from proxy.wire import jsonrpc

Script = Callable[[str, jsonrpc.JSONObject], jsonrpc.Response]


class Scripted:
    def __init__(self, script: Script) -> None:
        self.recorder = Recorder()
        self.sent: list[tuple[str, jsonrpc.JSONObject]] = []
        self._script = script

    async def request(self, method: str, params: jsonrpc.JSONObject, timeout: float) -> jsonrpc.Response:
        self.sent.append((method, params))
        return self._script(method, params)

    async def notify(self, method: str, params: jsonrpc.JSONObject) -> None:
        self.sent.append((method, params))


async def test_lists_follow_cursors_and_note_failures() -> None:
    def script(method: str, params: jsonrpc.JSONObject) -> jsonrpc.Response:
        if method == "tools/list":
            if params.get("cursor") == "2":
                return jsonrpc.Result(1, {"tools": [{"name": "b"}]})
            return jsonrpc.Result(
                1, {"tools": [{"name": "a", "annotations": {"readOnlyHint": True}}], "nextCursor": "2"}
            )
        if method == "prompts/list":
            return jsonrpc.error(1, jsonrpc.METHOD_NOT_FOUND, "nope")  # quietly absent
        if method == "resources/list":
            return jsonrpc.error(1, -32603, "boom")
        raise ProbeError(f"{method}: no answer within 1s")

    conv = Scripted(script)
    items, notes = await list_items(conv, {"tools": {}, "prompts": {}, "resources": {}}, 1)
    assert items == (Item("tool", "a", annotations={"readOnlyHint": True}), Item("tool", "b"))
    assert notes == (
        "resources/list failed: -32603 boom",
        "resources/templates/list failed: resources/templates/list: no answer within 1s",
    )
    assert [m for m, _ in conv.sent] == [
        "tools/list", "tools/list", "prompts/list", "resources/list", "resources/templates/list"
    ]  # fmt: skip


async def test_lists_only_what_the_capabilities_announce() -> None:
    conv = Scripted(lambda m, p: jsonrpc.Result(1, {}))
    assert await list_items(conv, {"logging": {}}, 1) == ((), ())
    assert conv.sent == []


async def test_offered_alone_is_the_echo() -> None:
    echo = Scripted(lambda m, p: jsonrpc.Result(1, {"protocolVersion": p["protocolVersion"]}))
    counter = Scripted(lambda m, p: jsonrpc.Result(1, {"protocolVersion": "2025-11-25"}))
    assert await offered_alone(echo, "2024-11-05", 1) is True
    assert await offered_alone(counter, "2024-11-05", 1) is False


async def test_call_outcomes() -> None:
    ok = Scripted(lambda m, p: jsonrpc.Result(1, {"content": [{"type": "text", "text": "hi"}]}))
    assert (await call_tool(ok, "t", {}, 1)).outcome == "result"
    bad = Scripted(
        lambda m, p: jsonrpc.Result(1, {"isError": True, "content": [{"type": "text", "text": "no"}]})
    )
    tool_error = await call_tool(bad, "t", {}, 1)
    assert (tool_error.outcome, tool_error.detail) == ("tool_error", "no")

    def slow(method: str, params: jsonrpc.JSONObject) -> jsonrpc.Response:
        raise ProbeError("tools/call: no answer within 1s")

    timed = await call_tool(Scripted(slow), "t", {}, 1)
    assert (timed.outcome, timed.detail) == ("timeout", "tools/call: no answer within 1s")
