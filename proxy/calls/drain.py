"""Ending calls for the process, not for their clients: reaping parked calls nobody came back for, and
shutting down (`drain`: hand the resumable ones over to another replica, cancel the rest; `close`)."""

from __future__ import annotations

import asyncio

from proxy.calls.driver import CallDriver, EngineState, log
from proxy.calls.registry import LiveCall
from proxy.upstream.base import TransportLost


class NotCancellable(Exception):
    """An operator's cancel that cannot be done; `status` is the admin listener's HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Drain:
    """Ends calls for the process (reaping, an operator's cancel, shutdown); each with `driver`."""

    def __init__(self, state: EngineState, driver: CallDriver) -> None:
        self._state = state
        self._driver = driver

    async def reap_expired(self) -> int:
        """Cancel parked calls whose client never came back; the upstream is told."""
        expired = self._state.registry.expired()
        for call in expired:
            log.info("call.reaped", call=call.id, upstream=call.upstream, round=call.exchange.round)
            self._state.observer.reaped(call.upstream, self._state.registry.parked_for(call))
            await self._driver.abandon(call, "the client did not answer in time")
        return len(expired)

    async def cancel_parked(self, call_id: str) -> LiveCall:
        """An operator cancels a parked call (proxy/process/admin.py): its pending requests are answered, the
        upstream gets notifications/cancelled, the session is closed; the client's retry is told an
        operator cancelled it. NotCancellable when the call is not here, running, or a task's."""
        call = self._state.registry.get(call_id)
        if call is None:
            raise NotCancellable("no such call on this replica", 404)
        if not call.parked:
            raise NotCancellable("the call is running a round; only parked calls can be cancelled", 409)
        if call.task is not None:
            raise NotCancellable(f"the call belongs to task {call.task}; cancel it with tasks/cancel", 409)
        log.info(
            "call.cancelled_by_operator", call=call.id, upstream=call.upstream, round=call.exchange.round
        )
        await self._driver.abandon(call, "cancelled by an operator", by_operator=True)
        return call

    async def drain(self, grace: float) -> None:
        """Shutting down: give live calls `grace` seconds to finish (their retries are still served), then
        leave the parked ones another replica can take over (resumable upstream stream) and cancel the rest
        upstream. The client always gets an answer: a completed call, a takeover, or "lost, not re-run"."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while len(self._state.registry) and loop.time() < deadline:  # noqa: ASYNC110 - calls end in many places
            await asyncio.sleep(0.1)
        self._state.stopping = True  # also: a call unknown here from now on may be one left for a takeover
        for call in self._state.registry:
            pool = self._state.pools[call.upstream]
            # A task's call cannot be taken over (its task lives here only): it is cancelled like the rest.
            if (
                call.parked
                and call.task is None
                and call.session.last_event_id is not None
                and pool.can_adopt
            ):
                self._state.registry.remove(call)
                call.session.end_call()
                pool.forget(call.key, call.session)
                await call.session.detach()
                log.info("call.left_for_takeover", call=call.id, upstream=call.upstream)
            elif not call.parked:  # a round is running: its driver answers its client (-31011) and ends it
                call.inbox.put_nowait(TransportLost("the proxy replica shut down"))
            else:
                await self._driver.abandon(call, "the proxy is shutting down")
        cut_until = loop.time() + 5.0  # bounded: the drivers just woke up
        while any(not c.parked for c in self._state.registry) and loop.time() < cut_until:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        for call in self._state.registry:
            await self._driver.abandon(call, "the proxy is shutting down")

    async def close(self) -> None:
        for call in self._state.registry:
            await self._driver.abandon(call, "the proxy is shutting down")
