"""A wrong `upstreams[].era` setting, named in one line that names the setting.

`era: modern` fixes the verdict without a probe (era.py), so a legacy server under it fails every request
the proxy sends it the 2026-07-28 way (FastMCP 1.30 answers each "Bad Request: Missing session ID"), while
/readyz said ready; `era: legacy` on a server that speaks 2026-07-28 only fails every `initialize` (four
versions, four refusals) and never said why. Here the setting is checked against the server itself: one
`server/discover`, the proxy's own request (the upstream's configured headers, no client's), judged as the
era probe judges it. A legacy server under `era: modern`, and a server that answers `server/discover` and
refuses `initialize` under `era: legacy`, give `sentence`'s line: on /readyz (`upstream_problems`, state
`wrong era`), once in the log (`upstream.era_setting_wrong`), and from `check-config --probe`.

A stdio upstream is checked the same way, with `server/discover` on a child of the check's own.

When: /readyz checks each configured-era upstream once (process/readiness.py), and again whenever the
setting failed to hold for a request (EraBook.suspect on a configured verdict: a session that could not be
opened, a modern request answered the legacy way). A check that reaches nothing, or is answered 401/403,
says nothing about the setting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import aiohttp
import structlog

from proxy.config import UpstreamConfig
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.era import Verdict, discover_request, judge_discover
from proxy.upstream.modern import ModernTarget, NotModern, post
from proxy.upstream.modern_stdio import ModernChildren
from proxy.upstream.propagation import own_only, propagating

log = structlog.get_logger(__name__)


def sentence(name: str, setting: str, found: Verdict, *, initialize_refused: bool) -> str | None:
    """The one line naming a wrong `era` setting (None: the setting fits what was found). `found` is the
    verdict of a `server/discover`; `initialize_refused`: the legacy `initialize` failed too (a server of
    2026-07-28 only, not a two-era one, which `era: legacy` serves fine)."""
    if setting == "modern" and found.era == "legacy":
        return (
            f"upstream {name}: era: modern is set, but it is a legacy MCP server (server/discover answered "
            f"{found.detail or 'the legacy way'}), so every request sent to it the 2026-07-28 way fails: "
            "set era: auto (or legacy)"
        )
    if setting == "legacy" and found.era == "modern" and initialize_refused:
        versions = ", ".join(found.versions) or "2026-07-28"
        return (
            f"upstream {name}: era: legacy is set, but it speaks MCP 2026-07-28 only (server/discover "
            f"answered, supportedVersions {versions}; initialize refused), so no legacy session opens: "
            "set era: auto (or modern)"
        )
    return None


async def discover(http: aiohttp.ClientSession, upstream: UpstreamConfig, timeout: float) -> Verdict | None:
    """The verdict of one `server/discover` to a URL upstream, as the proxy's own request; None when it says
    nothing (unreachable, 401/403, no answer in `timeout`)."""
    assert upstream.url is not None
    target = ModernTarget(
        upstream.url, upstream.headers, timeout=timeout, max_message_bytes=upstream.max_message_bytes
    )
    try:
        with propagating(own_only()):
            answer = await post(http, target, discover_request())
    except NotModern as exc:
        return Verdict("legacy", "probe", detail=str(exc))
    except (UpstreamAuthChallenge, UpstreamError, TimeoutError):
        return None
    return judge_discover(answer)


async def discover_stdio(upstream: UpstreamConfig) -> Verdict | None:
    """The verdict of one `server/discover` to a stdio upstream, on a child of the check's own (stopped
    after), judged as the era probe judges it (era.py): no answer within `timeouts.connect_s` is legacy; a
    child that cannot be started says nothing."""
    timeout = upstream.timeouts.connect_s
    children = ModernChildren({upstream.name: upstream})
    try:
        answer = await children.request(upstream.name, discover_request(), timeout=timeout, probe=True)
    except TimeoutError:
        return Verdict("legacy", "probe", detail=f"no answer to server/discover in {timeout:g}s")
    except UpstreamError:
        return None
    finally:
        await children.close()
    return judge_discover(answer)


def checked(upstream: UpstreamConfig) -> bool:
    """Whether the upstream's `era` is a setting to check: fixed by the configuration, over HTTP or stdio."""
    if upstream.era == "auto" or upstream.transport == "sse":
        return False
    return upstream.url is not None or upstream.command is not None


class EraSettings:
    """Each configured-era HTTP upstream's check: the wrong-setting line found (`wrong`), checked when
    /readyz asks (`check`) or when the setting failed a request (`doubted`, run in a task of its own)."""

    def __init__(
        self, upstreams: Mapping[str, UpstreamConfig], clients: Mapping[str, aiohttp.ClientSession]
    ) -> None:
        self._upstreams = upstreams
        self._clients = clients
        self.wrong: dict[str, str] = {}
        self.checked: set[str] = set()  # checked once since start (a doubt checks again)
        self._tasks: dict[str, asyncio.Task[str | None]] = {}

    async def check(self, name: str, *, initialize_refused: bool = False) -> str | None:
        """Check `name`'s setting now (one at a time per upstream): the wrong-setting line, or None."""
        running = self._tasks.get(name)
        if running is None:
            running = self._tasks[name] = asyncio.ensure_future(self._check(name, initialize_refused))
            running.add_done_callback(lambda _: self._tasks.pop(name, None))
        return await asyncio.shield(running)

    def doubted(self, name: str, reason: str) -> None:
        """The configured era failed to hold for a request (EraBook.suspect): check the setting again, in a
        task of its own (kept until done). A session that could not be opened is a refused `initialize`."""
        up = self._upstreams.get(name)
        if up is None or not checked(up) or name in self._tasks or name in self.wrong:
            return  # a line already held is checked again by /readyz, not by every failing request
        refused = reason.startswith("could not open a session")
        task = self._tasks[name] = asyncio.ensure_future(self._check(name, refused))
        task.add_done_callback(lambda _: self._tasks.pop(name, None))

    async def _check(self, name: str, initialize_refused: bool) -> str | None:
        up = self._upstreams[name]
        if up.url is None:  # a stdio command
            found = await discover_stdio(up)
        else:
            found = await discover(self._clients[name], up, up.timeouts.initialize_s)
        self.checked.add(name)
        if found is None:
            return self.wrong.get(name)
        line = sentence(name, up.era, found, initialize_refused=initialize_refused)
        if line is None:
            if up.era == "modern" or initialize_refused:  # a fitting answer clears an earlier line
                self.wrong.pop(name, None)
            return None
        if self.wrong.get(name) != line:
            log.warning("upstream.era_setting_wrong", upstream=name, problem=line)
        self.wrong[name] = line
        return line

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


__all__ = ["EraSettings", "checked", "discover", "discover_stdio", "sentence"]
