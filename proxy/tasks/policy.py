"""When a `tools/call` becomes a task (`calls.tasks` in the config), and the extension's capability rules.

Pure: no I/O. A client gets a task only if it declared `io.modelcontextprotocol/tasks` in that request's
capabilities (SEP-2663: the server alone decides, per request, among clients that declared it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.config import TasksConfig
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject


@dataclass(frozen=True, slots=True)
class Plan:
    """How to run one call that may become a task."""

    yield_after: float | None  # seconds the request waits before the call becomes a task; None: never
    task_on_input: bool  # the call asking for input makes it a task (instead of an input_required round)


class TaskPolicy:
    def __init__(self, config: TasksConfig) -> None:
        self.config = config
        self._forced = frozenset(config.tools)

    @property
    def enabled(self) -> bool:
        """Does the proxy create tasks at all (and so advertise the extension)?"""
        return self.config.policy != "never" or bool(self._forced)

    def forced(self, tool: object) -> bool:
        """Always a task: a client without the extension cannot call it (-32021)."""
        return isinstance(tool, str) and tool in self._forced

    def plan(self, tool: object) -> Plan | None:
        """How a call of `tool`, from a client that declared the extension, runs; None: as a plain call."""
        policy = self.config.policy
        if self.forced(tool) or policy == "always":
            return Plan(yield_after=0.0, task_on_input=True)
        if policy == "on_elicit":
            return Plan(yield_after=None, task_on_input=True)
        if policy == "after_ms":
            return Plan(yield_after=self.config.after_ms / 1000, task_on_input=False)
        return None


def declares_tasks(params: Mapping[str, Any]) -> bool:
    """Did the request declare the Tasks extension in `_meta[…clientCapabilities].extensions`?"""
    meta = params.get("_meta")
    caps = meta.get(mcp.META_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(mcp.TASKS_EXTENSION), dict)


def missing_capability(what: str) -> ErrorObject:
    """-32021 naming the extension the client must declare (SEP-2663, SEP-2575)."""
    return ErrorObject(
        jsonrpc.MISSING_CLIENT_CAPABILITY,
        f"Missing required client capability: {what} needs the {mcp.TASKS_EXTENSION} extension "
        "declared in the request's clientCapabilities",
        {"requiredCapabilities": {"extensions": {mcp.TASKS_EXTENSION: {}}}},
    )


def advertise(capabilities: Mapping[str, Any], *, enabled: bool) -> dict[str, Any]:
    """The upstream's capabilities as `server/discover` shows them: never the legacy `tasks` capability
    (2025-11-25 experimental tasks, not offered on this front), and the extension when tasks are `enabled`."""
    out = {k: v for k, v in capabilities.items() if k != "tasks"}
    if enabled:
        extensions = out.get("extensions")
        out["extensions"] = {**(extensions if isinstance(extensions, dict) else {}), mcp.TASKS_EXTENSION: {}}
    return out
