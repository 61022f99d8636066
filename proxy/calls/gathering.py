"""Adaptive gathering: how long a call waits for more server requests before it parks a round (pure).

Servers that send several requests at once (elicitation + sampling + roots) send them within a millisecond or
two of each other; most tools send one. A fixed quiet period taxes every round of every call to catch the
rare burst. `GatherLearner` learns, per upstream and tool, how requests arrive, and says how long to stay
quiet after the latest request before the round is parked:

- a tool never seen (or not seen for a while): `first_sight` (a tenth of `calls.gather_window_ms`, the
  quiet period the proxy always used), so the first call of a tool that sends a burst still makes one round;
- a tool seen sending bursts: twice the largest gap seen inside one of its bursts, never below `first_sight`
  (a burst is never split more eagerly than before) and never above the cap;
- a tool seen only sending lone requests: no quiet period (requests already received are still gathered);
  every `PROBE_EVERY`-th round of it is gathered as on first sight, so a tool that starts sending bursts is
  noticed again.

The whole window never exceeds the cap (`calls.gather_window_ms`) after the round's first request. What is
learned lives in memory, per replica, for at most `max_tools` upstream/tool pairs (the least recently used is
forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

PROBE_EVERY: Final = 32  # rounds of a lone-only tool between two rounds gathered as on first sight
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
        self._first_sight = self._cap / 10
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
            return self._first_sight
        if seen.bursts:
            return min(self._cap, max(self._first_sight, 2 * seen.max_gap))
        if seen.lone % PROBE_EVERY == 0:
            return self._first_sight
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
    "PROBE_EVERY",
    "Arrival",
    "GatherLearner",
    "GatherWindow",
    "Key",
    "tool_of",
]
