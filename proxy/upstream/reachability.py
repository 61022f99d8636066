"""Is a stdio upstream reachable, for `/readyz`: its command starts and answers `initialize`.

A child that exits at once, or never answers within `timeouts.connect_s`, is not reachable. Each check
starts the command once (then stops it), so a result is kept for `RECHECK_S`; a check runs to its end even
when the probe that started it gives up (a slow child is not cut at every probe and never found ready),
and concurrent probes share it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable

import structlog

from proxy.config import UpstreamConfig
from proxy.upstream.base import UpstreamError
from proxy.upstream.connect import stdio_settings
from proxy.upstream.router import NoCallAnswer
from proxy.upstream.stdio import StdioSession

log = structlog.get_logger(__name__)

RECHECK_S = 30.0


async def command_answers(upstream: UpstreamConfig, no_call: NoCallAnswer) -> bool:
    """Start the command, offer `initialize` (first answer within timeouts.connect_s), stop it again."""
    timeout = max(upstream.timeouts.connect_s, upstream.timeouts.initialize_s)
    settings = stdio_settings(upstream, upstream.protocol_versions, {}, initialize_timeout=timeout)
    session = StdioSession(settings, no_call)
    try:
        await session.open()
        return session.alive
    except UpstreamError:
        return False
    except Exception:  # a bug here must not fail the probe with a 500: the command is not known to answer
        log.exception("readiness.check_failed", upstream=upstream.name)
        return False
    finally:
        await session.close()


class CommandChecks:
    """The latest result per stdio upstream, and the check running for it (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._known: dict[str, tuple[float, bool]] = {}
        self._running: dict[str, asyncio.Task[bool]] = {}

    async def reachable(self, upstream: UpstreamConfig, no_call: NoCallAnswer) -> bool:
        known = self._known.get(upstream.name)
        if known is not None and self._clock() - known[0] < RECHECK_S:
            return known[1]
        task = self._running.get(upstream.name)
        if task is None:
            task = asyncio.ensure_future(command_answers(upstream, no_call))
            self._running[upstream.name] = task
            task.add_done_callback(functools.partial(self._finished, upstream.name))
        return await asyncio.shield(task)

    def _finished(self, name: str, task: asyncio.Task[bool]) -> None:
        self._running.pop(name, None)
        ok = not task.cancelled() and task.exception() is None and task.result()
        self._known[name] = (self._clock(), ok)

    async def close(self) -> None:
        for task in list(self._running.values()):
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
