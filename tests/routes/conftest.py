from __future__ import annotations

from proxy.config import PrefixMode, RouteConfig, RouteMember, ToolPolicy
from proxy.routes.table import Route


def route(
    *members: str | RouteMember,
    mode: PrefixMode = "conditional",
    separator: str = "__",
    tools: ToolPolicy | None = None,
) -> Route:
    ms = tuple(m if isinstance(m, RouteMember) else RouteMember(m) for m in members)
    return Route.of(
        RouteConfig("fleet", ms, prefix_mode=mode, separator=separator, tools=tools or ToolPolicy())
    )
