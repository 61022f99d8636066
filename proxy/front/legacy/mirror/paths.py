"""A two-era upstream's tool for a legacy client of the mirror (upstream/tool_paths.py): the legacy way first,
as the client going direct would be served, and straight at 2026-07-28 when that way is refused because the
tool asks natively only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.front.legacy.mirror.calls import Post, take_place
from proxy.handle import formats, token_version
from proxy.migration.tally import MigrationBook
from proxy.upstream.era import EraBook
from proxy.upstream.modern import Notify
from proxy.upstream.tool_paths import ToolPaths, legacy_refusal
from proxy.wire import jsonrpc

MAX_HELD = 256  # notifications of a first legacy attempt held until its answer


def two_era_tool(eras: EraBook, upstream: str, name: object) -> bool:
    """Whether a legacy client's call of tool `name` is a two-era upstream's, to try the legacy way first: the
    upstream's verdict is `both` and the tool was not seen asking natively only."""
    return isinstance(name, str) and eras.held(upstream) == "both" and not eras.paths.native(upstream, name)


def either(eras: EraBook, upstream: str, name: str, legacy: Post, straight: Post) -> Post:
    """A two-era upstream's tool for a legacy client: the legacy way first (its inline questions reach the
    client as they would going direct); a refusal that says the tool asks natively only (tool_paths.py) is
    sent again straight at 2026-07-28 — safe: a native tool answers `input_required` before it acts — and
    the tool remembered. A retry of a native round (the upstream's own requestState, or inputResponses
    without the proxy's handle) goes straight. Until a tool has
    been served the legacy way once, the notifications of its legacy attempt wait for the answer (at most
    `MAX_HELD`): a refused attempt's (a native tool's progress before its question) are dropped, as the
    native run sends them again."""
    paths = eras.paths

    async def post(req: jsonrpc.Request, note: Notify) -> jsonrpc.Response:
        state = req.params.get("requestState")
        if _proxy_handle(state):  # a round of the legacy way (the proxy's parked call)
            return await legacy(req, note)
        if state is not None or "inputResponses" in req.params:  # a native round's retry
            return await straight(req, note)
        if paths.answered(upstream, name):
            return await legacy(req, note)
        held: list[jsonrpc.Notification] | None = []

        async def hold(item: jsonrpc.Notification) -> None:
            nonlocal held
            if held is None:  # too many to hold: passed on as they come
                await note(item)
                return
            held.append(item)
            if len(held) >= MAX_HELD:
                for early in held:
                    await note(early)
                held = None

        answer = await legacy(req, hold)
        if (why := legacy_refusal(answer, name, _proxy_handle)) is not None:
            paths.learn_native(upstream, name, why)
            if (refused := take_place(req.id)) is not None:  # the legacy attempt's place went with it
                return refused
            return await straight(req, note)
        paths.legacy_worked(upstream, name)
        for item in held or ():
            await note(item)
        return answer

    return post


def listed(
    paths: ToolPaths,
    migration: MigrationBook | None,
    upstream: str,
    method: str,
    result: Mapping[str, Any],
    *,
    routed: bool = False,  # `upstream` is an aggregated route's name: no upstream's own tool list
) -> None:
    """A list answer the mirror got: told to the migration report, and a tool list to the tool paths (a
    change forgets what was learned, tool_paths.py) — as the native relay does for 2026-07-28 clients."""
    if migration is not None:
        migration.listed_result(upstream, method, result)
    if not routed and method == "tools/list" and isinstance(tools := result.get("tools"), list):
        paths.tool_list(upstream, (str(t.get("name")) for t in tools if isinstance(t, dict)))


def _proxy_handle(state: object) -> bool:
    """Whether a requestState is a call the proxy parked (the legacy way's rounds), not an upstream's own."""
    return isinstance(state, str) and token_version(state) == formats.CALL_HANDLE


__all__ = ["either", "listed", "two_era_tool"]
