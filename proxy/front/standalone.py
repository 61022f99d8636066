"""A listen (modern/listen/front.py) that feeds a legacy client's standalone GET stream of a mirror session
(front/legacy/mirror/stream.py holds one per session, front/modern/inner.py hands it to the listen): on the
front's shared floor, as the two rooms never import each other.

Written as the client's legacy server would write it: no acknowledgement, no subscription id (the stamp an
upstream's listen put on a notification is removed too), no final result at a graceful end. Its filter
grows while it runs: a legacy client subscribes to a resource with `resources/subscribe` at any time, so
each URI is added to the running listen (`add`, set by the listen once it runs: a legacy member's session
subscribes, a modern member gets a listen of its own for that URI). `resources/unsubscribe` takes the URI
out of `uris`: its updates are no longer written (the upstream's subscription ends with the stream).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import encode_event

RESOURCE_UPDATED = "notifications/resources/updated"


class LegacyStream:
    def __init__(self, uris: Iterable[str] = ()) -> None:
        self.ended = asyncio.Event()  # set: the stream ends (another GET of the session took its place)
        self.uris: set[str] = set(uris)  # what the client subscribed: only their updates are written
        self.add: Callable[[str], Awaitable[bool]] | None = None  # the running listen's, once it runs

    async def subscribe(self, uri: str) -> bool:
        """Add `uri` to the listen; False: no upstream took it."""
        self.uris.add(uri)
        if self.add is None:  # the listen starts with it (it reads `uris` once it has subscribed)
            return True
        if not await self.add(uri):
            self.uris.discard(uri)
            return False
        return True

    def unsubscribe(self, uri: str) -> None:
        self.uris.discard(uri)

    def event(self, note: jsonrpc.Notification) -> bytes | None:
        """The SSE event for `note` as a legacy server sends it (None: an update the client unsubscribed)."""
        if note.method == RESOURCE_UPDATED and note.params.get("uri") not in self.uris:
            return None
        params = dict(note.params)
        meta = params.pop("_meta", None)
        if isinstance(meta, dict) and (
            rest := {k: v for k, v in meta.items() if k != mcp.META_SUBSCRIPTION_ID}
        ):
            params["_meta"] = rest
        return encode_event(jsonrpc.dumps(jsonrpc.Notification(note.method, params)).decode())
