"""Does an upstream answer `initialize`, for `/readyz`: a stdio command starts and answers it; a URL whose
pool has never opened a session is sent one (a server that asks for credentials answers too).

A child that exits at once, or never answers within `timeouts.connect_s`, is not reachable; nor is a URL
whose `initialize` fails (a wrong transport, a path that is no MCP endpoint). Each check opens one session
(then closes it), so a result is kept for `RECHECK_S`; a check runs to its end even when the probe that
started it gives up (a slow child is not cut at every probe and never found ready), and concurrent probes
share it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable

import aiohttp
import structlog

from proxy.config import UpstreamConfig
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.connect import open_upstream_session, stdio_settings
from proxy.upstream.router import NoCallAnswer
from proxy.upstream.stdio import StdioSession

log = structlog.get_logger(__name__)

RECHECK_S = 30.0


async def command_answers(upstream: UpstreamConfig, no_call: NoCallAnswer) -> str | None:
    """Start the command, offer `initialize` (first answer within timeouts.connect_s), stop it again. None
    when it answered, else what went wrong."""
    timeout = max(upstream.timeouts.connect_s, upstream.timeouts.initialize_s)
    settings = stdio_settings(upstream, upstream.protocol_versions, {}, initialize_timeout=timeout)
    session = StdioSession(settings, no_call)
    try:
        await session.open()
        return None if session.alive else "the command's session ended at once"
    except UpstreamError as exc:
        return str(exc)
    except Exception:  # a bug here must not fail the probe with a 500: the command is not known to answer
        log.exception("readiness.check_failed", upstream=upstream.name)
        return "the check failed (see the log)"
    finally:
        await session.close()


async def url_answers(
    http: aiohttp.ClientSession, upstream: UpstreamConfig, no_call: NoCallAnswer
) -> str | None:
    """Open one session to a URL upstream as a client that declares nothing and forwards nothing, close it
    again. None when it answered `initialize` or asked for credentials (the client's token is what it
    wants), else what went wrong (the same words a call's `upstream.unavailable` line has)."""
    try:
        session = await open_upstream_session(
            http, upstream, versions=upstream.protocol_versions, capabilities={}, headers={}, no_call=no_call
        )
    except UpstreamAuthChallenge:
        return None
    except UpstreamError as exc:
        return str(exc)
    except Exception:  # as above: a bug is logged, and the probe answers
        log.exception("readiness.check_failed", upstream=upstream.name)
        return "the check failed (see the log)"
    await session.close()
    return None


Check = Callable[[], Awaitable[str | None]]


class InitializeChecks:
    """The latest result per upstream, and the check running for it (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._known: dict[str, tuple[float, str | None]] = {}
        self._running: dict[str, asyncio.Task[str | None]] = {}
        self.answered: set[str] = set()  # URL upstreams whose check once succeeded: not checked again

    async def problem(self, name: str, check: Check, wait: float | None = None) -> str | None:
        """None when upstream `name` answers `initialize` (by `check`, or a result under RECHECK_S old),
        else why not. With `wait`, a check still running after it is reported as such (it runs on, and
        its result answers the next probe)."""
        known = self._known.get(name)
        if known is not None and self._clock() - known[0] < RECHECK_S:
            return known[1]
        task = self._running.get(name)
        if task is None:
            task = asyncio.ensure_future(check())
            self._running[name] = task
            task.add_done_callback(functools.partial(self._finished, name))
        if wait is None:
            return await asyncio.shield(task)
        try:
            return await asyncio.wait_for(asyncio.shield(task), wait)
        except TimeoutError:
            return f"no answer to initialize within {wait:g}s yet (the check goes on)"

    def _finished(self, name: str, task: asyncio.Task[str | None]) -> None:
        self._running.pop(name, None)
        if task.cancelled():
            problem: str | None = "the check was cancelled"
        elif (exc := task.exception()) is not None:
            problem = f"the check failed: {type(exc).__name__}"
        else:
            problem = task.result()
        self._known[name] = (self._clock(), problem)

    async def close(self) -> None:
        for task in list(self._running.values()):
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
