"""Router.watch: a session's standalone (session-wide) notifications go to its listener, nowhere else."""

from __future__ import annotations

from proxy.upstream.base import Inbox
from proxy.upstream.router import Router
from proxy.wire import jsonrpc

CHANGED = jsonrpc.Notification("notifications/tools/list_changed", {})
PROGRESS = jsonrpc.Notification("notifications/progress", {"progressToken": 1, "progress": 1})


def no_call(req: jsonrpc.Request) -> jsonrpc.Response:
    return jsonrpc.error(req.id, jsonrpc.INVALID_PARAMS, "no call")


async def test_standalone_notifications_reach_the_listener_only() -> None:
    router = Router(no_call)
    heard: list[jsonrpc.Notification] = []
    inbox: Inbox = Inbox()
    router.begin_call(7, inbox)
    assert router.dispatch(CHANGED, standalone=True) is None  # no listener yet: dropped
    router.watch(heard.append)
    assert router.dispatch(CHANGED, standalone=True) is None
    assert router.dispatch(PROGRESS) is None  # the call's own notification: to the call
    assert heard == [CHANGED]
    assert inbox.get_nowait() == PROGRESS and inbox.empty()
    router.watch(None)
    router.dispatch(CHANGED, standalone=True)
    assert heard == [CHANGED]


async def test_the_pools_hearing_gets_every_standalone_notification_whoever_watches() -> None:
    router = Router(no_call)
    pool: list[jsonrpc.Notification] = []
    listener: list[jsonrpc.Notification] = []
    router.heard = pool.append
    router.dispatch(CHANGED, standalone=True)  # nobody watches: the pool still hears it
    router.watch(listener.append)
    router.dispatch(CHANGED, standalone=True)
    router.dispatch(PROGRESS)  # not session-wide: neither
    assert pool == [CHANGED, CHANGED] and listener == [CHANGED]
