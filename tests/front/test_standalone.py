"""LegacyStream: what a legacy client's GET stream is written (no subscription id, only the updates of what
it subscribed), and how its subscriptions reach the running listen."""

from __future__ import annotations

import json

from proxy.front.standalone import LegacyStream
from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import SSEDecoder

SUB = mcp.META_SUBSCRIPTION_ID


def decoded(event: bytes | None) -> dict[str, object]:
    assert event is not None
    (one,) = SSEDecoder().feed(event)
    value: dict[str, object] = json.loads(one.data)
    return value


def test_an_upstream_listens_stamp_is_removed_and_other_meta_kept() -> None:
    feed = LegacyStream()
    stamped = jsonrpc.Notification("notifications/tools/list_changed", {"_meta": {SUB: "upstream-7"}})
    assert decoded(feed.event(stamped)) == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {},
    }
    kept = jsonrpc.Notification("notifications/prompts/list_changed", {"_meta": {SUB: 1, "trace": "t"}})
    assert decoded(feed.event(kept))["params"] == {"_meta": {"trace": "t"}}


async def test_only_the_updates_of_subscribed_uris_are_written() -> None:
    feed = LegacyStream(["a://one"])
    update = jsonrpc.Notification("notifications/resources/updated", {"uri": "a://two"})
    assert feed.event(update) is None  # never subscribed (another session's, on a shared legacy session)
    assert await feed.subscribe("a://two")  # no listen running yet: it starts with it
    assert decoded(feed.event(update))["params"] == {"uri": "a://two"}
    feed.unsubscribe("a://two")
    assert feed.event(update) is None


async def test_a_subscription_goes_to_the_running_listen_and_a_refused_one_is_dropped() -> None:
    feed = LegacyStream()
    asked: list[str] = []

    async def add(uri: str) -> bool:
        asked.append(uri)
        return uri != "a://nobody"

    feed.add = add
    assert await feed.subscribe("a://one")
    assert not await feed.subscribe("a://nobody")
    assert asked == ["a://one", "a://nobody"] and feed.uris == {"a://one"}
