"""Which requests take the native relay (front/modern/relay.py); which pairs bind: routes/test_binding.py."""

from __future__ import annotations

from proxy.config import Config, UpstreamConfig
from proxy.front.modern.relay import NativeRelay
from proxy.handle import HandleCodec, KeyRing
from proxy.handle.relay_task import RelayTask, seal_relay_task
from proxy.routes.binding import BindingTable
from proxy.tasks.ids import TaskClaims, seal_task_id
from proxy.upstream.era import EraBook
from proxy.upstream.senders import ModernSenders
from proxy.wire import jsonrpc


def test_the_proxys_own_task_ids_do_not_take_the_relay() -> None:
    """A `legacy_tools` call of a modern upstream may become the proxy's own task (format 3): its tasks/*
    are the proxy's to serve (proxy/tasks), never sent to the upstream; any other task id is relayed."""
    up = UpstreamConfig(name="a", url="http://x/", era="modern", legacy_tools=("ask",))
    codec = HandleCodec(KeyRing.ephemeral())
    relay = NativeRelay(
        upstreams={"a": up},
        senders=ModernSenders({"a": up}, {}),
        eras=EraBook({"a": up}, {}),
        codec=codec,
        bindings=BindingTable(Config(upstreams=(up,))),
        call_timeout=1,
        state_ttl=1,
    )
    own = seal_task_id(codec, TaskClaims("a", "k", "127.0.0.1:1", "w", 0, 10))
    theirs = seal_relay_task(codec, RelayTask("a", "w", "task-1", 10))
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        assert not relay.takes("a", jsonrpc.Request(1, method, {"taskId": own}))
        assert relay.takes("a", jsonrpc.Request(1, method, {"taskId": theirs}))
        assert relay.takes("a", jsonrpc.Request(1, method, {"taskId": "task-1"}))
    assert not relay.takes("a", jsonrpc.Request(1, "tools/call", {"name": "ask"}))
    assert relay.takes("a", jsonrpc.Request(1, "tools/call", {"name": "other"}))


def test_param_headers_are_the_mcp_param_ones_in_any_case() -> None:
    """The client's `Mcp-Param-*` headers go upstream with a relayed request, whatever their case; nothing
    else does, and a request without any sends no extra header at all (None)."""
    from multidict import CIMultiDict, CIMultiDictProxy

    from proxy.front.modern.relay import _param_headers

    headers = CIMultiDictProxy(
        CIMultiDict(
            [
                ("Content-Type", "application/json"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Param-Region", "eu"),
                ("mcp-param-x", "1"),
                ("MCP-PARAM-", "bare"),
                ("Mcp-Params", "no"),
                ("X-Mcp-Param-Y", "no"),
            ]
        )
    )
    assert _param_headers(headers) == {"Mcp-Param-Region": "eu", "mcp-param-x": "1", "MCP-PARAM-": "bare"}
    assert _param_headers(CIMultiDictProxy(CIMultiDict([("Mcp-Method", "tools/call")]))) is None


async def test_a_retry_of_a_parked_call_is_never_probed_for() -> None:
    """A replica that has not met the upstream yet takes a retry carrying the proxy's own handle of a
    parked call the legacy way (forwarded to its owner, or taken over) without probing the upstream's era:
    such a call is parked on a legacy session whatever the upstream speaks. Anything else — a token that
    only looks like one (version byte 1, not sealed by these keys), a handle of another proxy's keys, a
    modern server's own requestState — is probed for as any request."""
    import os

    import aiohttp

    from proxy.handle import formats, token_version

    up = UpstreamConfig(name="a", url="http://127.0.0.1:9/mcp")  # era auto; nothing listens there
    codec = HandleCodec(KeyRing.ephemeral())
    async with aiohttp.ClientSession() as http:
        eras = EraBook({"a": up}, {"a": http})
        relay = NativeRelay(
            upstreams={"a": up},
            senders=ModernSenders({"a": up}, {"a": http}),
            eras=eras,
            codec=codec,
            bindings=BindingTable(Config(upstreams=(up,))),
            call_timeout=1,
            state_ttl=1,
        )
        ours = codec.ring.seal(b"claims", version=formats.CALL_HANDLE)
        assert await relay.modern("a", (), ours) is False
        assert eras.probes == 0
        others = HandleCodec(KeyRing.ephemeral()).ring.seal(b"claims", version=formats.CALL_HANDLE)
        lookalike = "AQ" + ours[2:-8] + "A" * 8
        assert token_version(lookalike) == formats.CALL_HANDLE
        for token in (others, lookalike, "server-state-" + os.urandom(8).hex()):
            before = eras.probes  # a probe nothing answers decides nothing: the next request probes again
            assert await relay.modern("a", (), token) is False  # probed: nothing answers, taken as legacy
            assert eras.probes == before + 1
