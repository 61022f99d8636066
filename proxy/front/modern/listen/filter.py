"""The filter of a `subscriptions/listen` request (listen.py), checked at the boundary: which list_changed
flags it opts into, the resource URIs and task ids, each list bounded. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.wire import jsonrpc

LIST_CHANGED = {
    "toolsListChanged": ("tools", "notifications/tools/list_changed"),
    "promptsListChanged": ("prompts", "notifications/prompts/list_changed"),
    "resourcesListChanged": ("resources", "notifications/resources/list_changed"),
}
MAX_ITEMS = 256  # resourceSubscriptions / taskIds per listen


class Refused(Exception):
    def __init__(self, error: jsonrpc.ErrorObject) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(slots=True)
class Wanted:
    flags: list[str]
    uris: list[str]
    task_ids: list[str]


def parse_filter(params: Mapping[str, Any]) -> Wanted:
    """The `notifications` filter, checked: it is required, and each field opts in to one kind."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise Refused(_invalid("params.notifications must be an object"))
    flags = [flag for flag in LIST_CHANGED if wanted.get(flag) is True]
    lists: list[list[str]] = []
    for name in ("resourceSubscriptions", "taskIds"):
        value = wanted.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise Refused(_invalid(f"params.notifications.{name} must be a list of strings"))
        if len(value) > MAX_ITEMS:
            raise Refused(
                _invalid(f"params.notifications.{name} has {len(value)} items; at most {MAX_ITEMS}")
            )
        lists.append(list(dict.fromkeys(value)))
    return Wanted(flags, *lists)


def _invalid(message: str) -> jsonrpc.ErrorObject:
    return jsonrpc.ErrorObject(jsonrpc.INVALID_PARAMS, message)
