"""The probe's answers to server requests, and one message stream's request/response matching."""

from __future__ import annotations

import asyncio

import pytest

from proxy.probe.channel import ProbeError, Recorder, StreamChannel, answer
from proxy.wire import jsonrpc


def test_answers_give_a_tool_nothing_to_act_on() -> None:
    assert answer(jsonrpc.Request(1, "roots/list", {})) == jsonrpc.Result(1, {"roots": []})
    assert answer(jsonrpc.Request(2, "elicitation/create", {})) == jsonrpc.Result(2, {"action": "decline"})
    assert answer(jsonrpc.Request(3, "ping", {})) == jsonrpc.Result(3, {})
    sampled = answer(jsonrpc.Request(4, "sampling/createMessage", {}))
    assert isinstance(sampled, jsonrpc.Error) and sampled.error.code == -1
    other = answer(jsonrpc.Request(5, "x/y", {}))
    assert isinstance(other, jsonrpc.Error) and other.error.code == jsonrpc.METHOD_NOT_FOUND


async def test_stream_channel_matches_answers_and_records_requests() -> None:
    sent: list[bytes] = []
    recorder = Recorder()

    async def send(body: bytes) -> None:
        sent.append(body)

    channel = StreamChannel(send, recorder)
    task = asyncio.ensure_future(channel.request("tools/list", {}, 5))
    await asyncio.sleep(0)
    await channel.deliver(jsonrpc.Request(0, "roots/list", {}))
    await channel.deliver(jsonrpc.Result(1, {"tools": []}))
    assert await task == jsonrpc.Result(1, {"tools": []})
    assert recorder.outside == ["roots/list"]
    assert [jsonrpc.decode(b) for b in sent] == [
        jsonrpc.Request(1, "tools/list", {}),
        jsonrpc.Result(0, {"roots": []}),
    ]


async def test_stream_channel_fails_waiting_requests_when_the_stream_ends() -> None:
    async def send(body: bytes) -> None:
        return None

    channel = StreamChannel(send, Recorder())
    task = asyncio.ensure_future(channel.request("ping", {}, 5))
    await asyncio.sleep(0)
    channel.fail("the server exited with code 1")
    with pytest.raises(ProbeError, match="exited with code 1"):
        await task
    with pytest.raises(ProbeError, match="exited with code 1"):
        await channel.request("ping", {}, 5)
