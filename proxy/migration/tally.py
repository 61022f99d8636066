"""What the migration report counts (issue 44): tools/call requests per upstream and tool, by path.

A call takes one of four paths, and its path says its client's era:

- `adapted`: a 2026-07-28 client, a legacy upstream (the call service turns inline asks into
  `input_required` rounds);
- `relayed`: a 2026-07-28 client, a 2026-07-28 upstream (the native relay; the server asks natively);
- `mirrored`: a legacy client of a 2026-07-28 upstream (the mirror plays the legacy server);
- `passthrough`: a legacy client, a legacy upstream (the relay or the bridge; the proxy does not read it).

`asked` counts the calls of each path whose first answer asked for input (`input_required` for adapted and
relayed, a round of asks for mirrored; a pass-through call's asks are not looked at: its `asked` stays 0).
An adapted call that asked is a tool asking inline: its cell keeps when that was first and last seen.

Cheap on the hot path: each (upstream, tool) has one preallocated `Cell` (flat int lists); counting a call
is a few list increments, no lock, and the hour's bucket is rolled by one comparison against the book's
`next_roll` (a roll happens once an hour per cell). A tool name the upstream never listed (its tools/list
as seen through the proxy, `legacy_tools` and `metrics.tools` in the configuration) is counted in the
upstream's `OTHER` cell, so the cells are bounded by upstreams x (listed tools, at most `MAX_TOOLS`, + 1).
Everything is in memory: a restart starts every count at zero (`started_at` says when).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Final

PATHS: Final = ("adapted", "relayed", "mirrored", "passthrough")
ADAPTED, RELAYED, MIRRORED, PASSTHROUGH = range(4)
MODERN_PATHS: Final = (ADAPTED, RELAYED)  # a 2026-07-28 client's
CLIENT_ERA: Final = {"adapted": "2026-07-28", "relayed": "2026-07-28", "mirrored": "legacy",
                     "passthrough": "legacy"}  # fmt: skip
OTHER: Final = "(other)"  # every tool the upstream never listed
MAX_TOOLS: Final = 200  # listed tool names kept per upstream; past it, `OTHER`
MAX_CLIENTS: Final = 32  # legacy client names kept per upstream; past it, `OTHER`
MAX_CLIENT_NAME: Final = 64
BUCKET_S: Final = 3600  # one bucket an hour …
BUCKETS: Final = 168  # … for 7 days
WIDTH: Final = 8  # per bucket: calls by path (4), then asked by path (4)
ASKED: Final = 4  # offset of `asked` in a bucket

# Marks on the aiohttp request (a mapping) by the job that served a legacy client's call (front/legacy/)
MIRRORED_KEY: Final = "mrtr.migration.mirrored"  # True: the mirror served it; "inline": via a legacy session
ASKED_KEY: Final = "mrtr.migration.asked"  # the upstream's first answer asked for input

LearnedTools = Callable[
    [str], Iterable[str]
]  # upstream -> the tools it learned to be legacy (upstream/tool_paths.py)


def _no_learned(upstream: str) -> Iterable[str]:
    return ()


class Cell:
    """One (upstream, tool): its counts over the process's life and in hourly buckets."""

    __slots__ = ("first_inline", "hour", "last_inline", "life", "ring")

    def __init__(self, hour: int) -> None:
        self.life = [0] * WIDTH
        self.ring = [0] * (WIDTH * BUCKETS)  # bucket b at [b * WIDTH, (b + 1) * WIDTH), b = hour % BUCKETS
        self.hour = hour  # the hour the ring's newest bucket is for
        self.first_inline: float | None = None  # wall time an adapted call of this tool first asked …
        self.last_inline: float | None = None  # … and last asked

    def roll(self, hour: int) -> None:
        """Zero the buckets of the hours between the newest one and `hour` (the ring moves on)."""
        gone = min(hour - self.hour, BUCKETS)
        ring = self.ring
        for h in range(hour - gone + 1, hour + 1):
            start = (h % BUCKETS) * WIDTH
            ring[start : start + WIDTH] = [0] * WIDTH
        self.hour = hour

    def window(self, hour: int, hours: int) -> list[int]:
        """The sums of the last `hours` buckets up to `hour` (the current one included)."""
        out = [0] * WIDTH
        if hour - self.hour >= BUCKETS:
            return out
        ring = self.ring
        for h in range(max(hour - hours + 1, self.hour - BUCKETS + 1), min(hour, self.hour) + 1):
            start = (h % BUCKETS) * WIDTH
            for i in range(WIDTH):
                out[i] += ring[start + i]
        return out


class Upstream:
    """One upstream's cells and what its legacy clients called themselves."""

    __slots__ = ("cells", "clients", "listed", "name", "other")

    def __init__(self, name: str, tools: Iterable[str], hour: int) -> None:
        self.name = name
        self.other = Cell(hour)
        self.cells: dict[str, Cell] = {OTHER: self.other}
        self.listed: set[str] = set()
        self.clients: dict[str, int] = {}  # legacy clients' `clientInfo.name`, counted per initialize
        for tool in tools:
            self.list_tool(tool, hour)

    def list_tool(self, tool: str, hour: int) -> None:
        if tool not in self.cells and len(self.cells) <= MAX_TOOLS:
            self.cells[tool] = Cell(hour)
            self.listed.add(tool)


class MigrationBook:
    """Every upstream's migration figures in this process. `count` is the hot path."""

    def __init__(
        self,
        upstreams: Mapping[str, Iterable[str]],  # name -> tools known from the configuration
        *,
        legacy_tools: Mapping[str, Iterable[str]] | None = None,  # `upstreams[].legacy_tools`
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.started_at = clock()
        self.hour = int(self.started_at // BUCKET_S)
        self.next_roll = (self.hour + 1) * BUCKET_S
        self.upstreams = {name: Upstream(name, tools, self.hour) for name, tools in upstreams.items()}
        self.legacy_tools = {name: tuple(tools) for name, tools in (legacy_tools or {}).items()}
        self.learned: LearnedTools = _no_learned  # set at wiring time (see `learn_from`)

    def learn_from(self, learned: LearnedTools) -> None:
        """Where the upstreams' learned legacy tools come from (upstream/tool_paths.py, through process/)."""
        self.learned = learned

    def count(self, upstream: str, tool: str, path: int, asked: bool, inline: bool = False) -> None:
        """One call on `path`; `asked`: its first answer asked for input; `inline`: the upstream asked it
        inline (a legacy session's ask the proxy adapted). Unknown upstreams are not counted."""
        up = self.upstreams.get(upstream)
        if up is None:
            return
        cell = up.cells.get(tool, up.other)
        now = self.clock()
        if now >= self.next_roll:
            self.hour = int(now // BUCKET_S)
            self.next_roll = (self.hour + 1) * BUCKET_S
        hour = self.hour
        if cell.hour != hour:
            cell.roll(hour)
        base = (hour % BUCKETS) * WIDTH + path
        cell.life[path] += 1
        cell.ring[base] += 1
        if asked:
            cell.life[ASKED + path] += 1
            cell.ring[base + ASKED] += 1
            if inline:
                cell.last_inline = now
                if cell.first_inline is None:
                    cell.first_inline = now

    def listed(self, upstream: str, tools: Iterable[object]) -> None:
        """The names of a tools/list page the upstream answered: each gets a cell of its own."""
        up = self.upstreams.get(upstream)
        if up is None:
            return
        for tool in tools:
            if isinstance(tool, str) and tool not in up.cells:
                up.list_tool(tool, self.hour)

    def listed_result(self, upstream: str, method: str, result: Mapping[str, object]) -> None:
        """A list answer on its way to a client: a tools/list page's tool names get cells of their own."""
        if method != "tools/list" or upstream not in self.upstreams:
            return
        tools = result.get("tools")
        if isinstance(tools, list):
            self.listed(upstream, (t.get("name") for t in tools if isinstance(t, dict)))

    def client(self, upstream: str, name: object) -> None:
        """A legacy client's `initialize` (its `clientInfo.name`), bounded to MAX_CLIENTS names."""
        up = self.upstreams.get(upstream)
        if up is None:
            return
        key = name[:MAX_CLIENT_NAME] if isinstance(name, str) and name else "(unnamed)"
        if key not in up.clients and len(up.clients) >= MAX_CLIENTS:
            key = OTHER
        up.clients[key] = up.clients.get(key, 0) + 1
