"""What the soak watches in the proxy: its resident memory and open descriptors (/proc/PID), and, from the
admin listener, the calls it holds (/admin/calls) and the gauges of parked and running calls and upstream
sessions (/metrics)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp

from soak import procs

GAUGES = ("mrtr_proxy_parked_calls", "mrtr_proxy_running_calls", "mrtr_proxy_upstream_sessions")


@dataclass(frozen=True)
class Held:
    """What the proxy holds: parked and running calls, upstream sessions (gauges), /admin/calls entries."""

    parked: int
    running: int
    sessions: int
    listed: int

    @property
    def drained(self) -> bool:
        return self.parked == self.running == self.sessions == self.listed == 0

    def __str__(self) -> str:
        return f"parked {self.parked}, running {self.running}, sessions {self.sessions}, listed {self.listed}"


@dataclass(frozen=True)
class Sample:
    """The proxy process at one moment: seconds since the soak began, RSS (KiB), open descriptors."""

    at_s: float
    rss_kib: int
    fds: int
    fd_kinds: str = ""  # on the readings compared: what the descriptors are, for the report


@dataclass
class Admin:
    http: aiohttp.ClientSession
    url: str  # http://127.0.0.1:PORT
    token: str

    async def _get(self, path: str) -> aiohttp.ClientResponse:
        headers = {"Authorization": f"Bearer {self.token}"}
        resp = await self.http.get(self.url + path, headers=headers, timeout=aiohttp.ClientTimeout(total=10))
        resp.raise_for_status()
        return resp

    async def held(self) -> Held:
        async with await self._get("/metrics") as resp:
            text = await resp.text()
        totals = dict.fromkeys(GAUGES, 0.0)
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in totals:
                totals[name] += float(line.rsplit(" ", 1)[1])
        async with await self._get("/admin/calls") as resp:
            listed = len((await resp.json())["calls"])
        parked, running, sessions = (int(totals[name]) for name in GAUGES)
        return Held(parked, running, sessions, listed)

    async def until_drained(self, limit_s: float) -> tuple[Held, float]:
        """Poll (every half second, at most limit_s) until nothing is held; the last reading and its wait."""
        started = time.monotonic()
        held = await self.held()
        while not held.drained and time.monotonic() - started < limit_s:
            await asyncio.sleep(0.5)
            held = await self.held()
        return held, time.monotonic() - started


def sample(pid: int, since: float) -> Sample:
    return Sample(round(time.monotonic() - since, 1), procs.rss_kib(pid), procs.open_fds(pid))
