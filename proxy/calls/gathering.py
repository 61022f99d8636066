"""Adaptive gathering: how long a call waits for more server requests before it parks a round (pure).

Servers that send several requests at once (elicitation + sampling + roots) send them within a millisecond or
two of each other; most tools send one. A fixed quiet period taxes every round of every call to catch the
rare burst. `GatherLearner` learns, per upstream and tool, how requests arrive, and says how long to stay
quiet after the latest request before the round is parked:

- a tool never seen (or forgotten): the whole window (`calls.gather_window_ms`), once, so the first call of
  a tool that sends a burst makes one round even on a loaded machine;
- a tool seen sending bursts: twice the largest gap seen inside one of its bursts, never below a tenth of
  the cap (the quiet period the proxy always used: a burst is never split more eagerly than before) and
  never above the cap;
- a tool seen only sending lone requests: no quiet period (requests already received are still gathered).

A burst that came apart anyway is noticed: a request of the call's that arrived while its round was parked,
before the client's answers went upstream, was sent without waiting for them (`split`). Its tool is then
learned as sending bursts, with a gap of at least how late that request came, so its next rounds are gathered;
a tool that starts sending bursts costs one split round, and a tool that never does costs nothing.

The whole window never exceeds the cap after the round's first request. What is learned lives in memory, per
replica, for at most `max_tools` upstream/tool pairs (the least recently used is forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

MAX_TOOLS: Final = 4096
MAX_NAME: Final = 128  # longer tool names are learned by their first 128 characters


Key = tuple[str, str]  # (upstream, tool or method)


@dataclass(frozen=True, slots=True)
class Arrival:
    """What is known about one tool: rounds seen with one request, rounds with several, the largest gap
    (seconds) seen between two requests of one round."""

    lone: int = 0
    bursts: int = 0
    max_gap: float = 0.0


def tool_of(method: str, params: Mapping[str, Any]) -> str:
    """What a call is learned by: its tool's name for `tools/call`, else its method."""
    name = params.get("name") if method == "tools/call" else None
    return name[:MAX_NAME] if isinstance(name, str) else method


class GatherLearner:
    def __init__(self, cap: float, *, max_tools: int = MAX_TOOLS) -> None:
        self._cap = max(cap, 0.0)
        self._floor = self._cap / 10  # the least quiet period of a tool seen sending bursts
        self._max = max_tools
        self._known: OrderedDict[Key, Arrival] = OrderedDict()

    @property
    def cap(self) -> float:
        return self._cap

    def arrival(self, key: Key) -> Arrival | None:
        return self._known.get(key)

    def __len__(self) -> int:
        return len(self._known)

    def quiet(self, key: Key) -> float:
        """Seconds to wait after the latest request of a round for another one, before parking it."""
        seen = self._known.get(key)
        if seen is None:
            return self._cap
        if seen.bursts:
            return min(self._cap, max(self._floor, 2 * seen.max_gap))
        return 0.0

    def observe(self, key: Key, requests: int, max_gap: float) -> None:
        """A round of `key` was parked with `requests` requests, `max_gap` seconds apart at most."""
        if self._cap <= 0 or requests < 1:
            return
        seen = self._known.pop(key, None) or Arrival()
        if requests == 1:
            seen = Arrival(seen.lone + 1, seen.bursts, seen.max_gap)
        else:
            seen = Arrival(seen.lone, seen.bursts + 1, max(seen.max_gap, min(max_gap, self._cap)))
        self._learn(key, seen)

    def split(self, key: Key, parked_for: float) -> None:
        """A round of `key`, parked `parked_for` seconds ago, got another request before its answers went
        upstream: the burst came apart. The gap learned is the tool's quiet period plus `parked_for`, at
        most the cap: an upper bound of the real one when the round waited that quiet period (a round on
        first sight waited the whole window, and no quiet period gathers a burst spread wider)."""
        if self._cap <= 0:
            return
        gap = min(self._cap, self.quiet(key) + max(parked_for, 0.0))
        seen = self._known.pop(key, None) or Arrival()
        self._learn(key, Arrival(seen.lone, seen.bursts + 1, max(seen.max_gap, gap)))

    def _learn(self, key: Key, seen: Arrival) -> None:
        self._known[key] = seen
        while len(self._known) > self._max:
            self._known.popitem(last=False)


class GatherWindow:
    """One round's window: opened by its first request (`open`), kept open by each further one (`more`);
    `deadline` (loop time, None until opened) is when the round is parked. `parked` tells the learner."""

    __slots__ = ("_end", "_gathered", "_key", "_last", "_learner", "_max_gap", "_quiet", "deadline")

    def __init__(self, learner: GatherLearner, key: Key) -> None:
        self._learner, self._key = learner, key
        self._quiet = learner.quiet(key)
        self._end = self._last = self._max_gap = 0.0
        self._gathered = 0
        self.deadline: float | None = None

    def open(self, now: float, requests: int) -> None:
        self._end, self._last = now + self._learner.cap, now
        self._gathered, self._max_gap = requests, 0.0
        self.deadline = min(self._end, now + self._quiet)

    def more(self, now: float) -> None:
        self._max_gap, self._last = max(self._max_gap, now - self._last), now
        self._gathered += 1
        self.deadline = min(self._end, now + self._quiet)

    def parked(self) -> None:
        self._learner.observe(self._key, self._gathered, self._max_gap)


__all__ = [
    "MAX_NAME",
    "MAX_TOOLS",
    "Arrival",
    "GatherLearner",
    "GatherWindow",
    "Key",
    "tool_of",
]
