"""The plan (front/plan.py): which job serves a request, as a table, checked against every combination.

The table is written as the rule a reader would state (first matching row wins, `ANY` matches anything);
`test_every_situation` walks every combination of the inputs and checks the plan gives the table's job, so a
combination no row foresaw, or a row that never matches, fails here rather than on the wire.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from proxy.front.plan import (
    ClientEra,
    Job,
    LegacySession,
    RouteKind,
    Situation,
    ToolPath,
    Transport,
    UpstreamEra,
    needs_era,
    plan,
)
from proxy.wire import mcp

ANY = object()
L, M = ClientEra.LEGACY, ClientEra.MODERN
OWN, AGG, MEMBER = RouteKind.OWN, RouteKind.AGGREGATED, RouteKind.MEMBER
LEG, MOD, BOTH, UNK = UpstreamEra.LEGACY, UpstreamEra.MODERN, UpstreamEra.BOTH, UpstreamEra.UNKNOWN
HTTP, SSE, STDIO = Transport.STREAMABLE_HTTP, Transport.SSE, Transport.STDIO
MODERN_ERAS = (MOD, BOTH)
LEGACY_ERAS = (LEG, UNK)  # an era not known yet is taken as legacy, as the era book does
METHODS = ("initialize", "tools/call", "prompts/get", "tools/list", "ping", mcp.LISTEN, "tasks/get", "")

# client, route, era(s), transport(s), method(s), tool path, session, own task, crosses → job
# (the `parked` input only spares a probe: it never changes the job, see test_parked_only_spares_the_probe)
TABLE: list[tuple[Any, ...]] = [
    # A legacy client.
    (L, (AGG, MEMBER), ANY, ANY, ANY, ANY, ANY, ANY, True, Job.MIRROR),
    (L, (AGG, MEMBER), ANY, ANY, ANY, ANY, ANY, ANY, False, Job.REFUSE),
    (L, OWN, ANY, SSE, ANY, ANY, ANY, ANY, ANY, Job.BRIDGE),
    (L, OWN, ANY, ANY, ANY, ANY, LegacySession.MIRRORED, ANY, True, Job.MIRROR),
    (L, OWN, MODERN_ERAS, ANY, "initialize", ANY, LegacySession.NONE, ANY, True, Job.MIRROR),
    (L, OWN, ANY, HTTP, ANY, ANY, ANY, ANY, ANY, Job.PASS_THROUGH),
    (L, OWN, ANY, STDIO, ANY, ANY, ANY, ANY, ANY, Job.BRIDGE),
    # A modern client.
    (M, AGG, ANY, ANY, mcp.LISTEN, ANY, ANY, ANY, ANY, Job.LISTEN),
    (M, AGG, ANY, ANY, ANY, ANY, ANY, ANY, ANY, Job.AGGREGATE),
    (M, (OWN, MEMBER), ANY, ANY, "ping", ANY, ANY, ANY, ANY, Job.ADAPT),
    (M, (OWN, MEMBER), ANY, ANY, ANY, ANY, ANY, True, ANY, Job.ADAPT),
    (M, (OWN, MEMBER), ANY, ANY, "tools/call", ToolPath.LEGACY, ANY, ANY, ANY, Job.ADAPT),
    (M, (OWN, MEMBER), MODERN_ERAS, ANY, ANY, ANY, ANY, ANY, True, Job.RELAY),
    (M, (OWN, MEMBER), ANY, ANY, mcp.LISTEN, ANY, ANY, ANY, ANY, Job.LISTEN),
    (M, (OWN, MEMBER), ANY, ANY, ANY, ANY, ANY, ANY, ANY, Job.ADAPT),
]


def _matches(cell: Any, value: Any) -> bool:
    if cell is ANY:
        return True
    if isinstance(cell, tuple):
        return value in cell
    return bool(cell == value)


def _expected(s: Situation) -> tuple[int, Job]:
    values = (s.client, s.route, s.era, s.transport, s.method, s.tool, s.session, s.own_task, s.crosses)
    for index, row in enumerate(TABLE):
        if all(_matches(cell, value) for cell, value in zip(row[:-1], values, strict=True)):
            return index, row[-1]
    raise AssertionError(f"no row of the table for {s}")


def _every() -> list[Situation]:
    flags = (False, True)
    eras = (ClientEra, RouteKind, UpstreamEra, Transport)
    inputs = (*eras, METHODS, ToolPath, LegacySession, flags, flags, flags)
    return [Situation(*values) for values in itertools.product(*inputs)]


def test_every_situation() -> None:
    used: set[int] = set()
    for s in _every():
        row, job = _expected(s)
        used.add(row)
        assert plan(s) is job, s
    assert used == set(range(len(TABLE))), "a row of the table never decides anything"


def test_parked_only_spares_the_probe() -> None:
    for s in _every():
        assert plan(s) is plan(Situation(**{**_fields(s), "parked": not s.parked}))


def _fields(s: Situation) -> dict[str, Any]:
    return {name: getattr(s, name) for name in Situation.__slots__}


@pytest.mark.parametrize(
    ("situation", "job"),
    [
        # The rows a newcomer asks about first, spelled out.
        (Situation(M, OWN, LEG, HTTP, "tools/call"), Job.ADAPT),
        (Situation(M, OWN, MOD, HTTP, "tools/call"), Job.RELAY),
        (Situation(M, OWN, BOTH, HTTP, "tools/call"), Job.RELAY),
        (Situation(M, OWN, BOTH, HTTP, "tools/call", tool=ToolPath.LEGACY), Job.ADAPT),
        (Situation(M, OWN, MOD, STDIO, mcp.LISTEN), Job.RELAY),
        (Situation(M, OWN, LEG, STDIO, mcp.LISTEN), Job.LISTEN),
        (Situation(M, AGG, UNK, HTTP, "tools/list"), Job.AGGREGATE),
        (Situation(M, MEMBER, MOD, HTTP, "tools/call"), Job.RELAY),
        (Situation(M, OWN, MOD, HTTP, "tools/call", crosses=False), Job.ADAPT),
        (Situation(L, OWN, MOD, HTTP, "initialize"), Job.MIRROR),
        (Situation(L, OWN, BOTH, STDIO, "initialize"), Job.MIRROR),
        (Situation(L, OWN, LEG, HTTP, "initialize"), Job.PASS_THROUGH),
        (Situation(L, OWN, MOD, HTTP, "tools/call", session=LegacySession.RELAYED), Job.PASS_THROUGH),
        (Situation(L, OWN, LEG, HTTP, "tools/call", session=LegacySession.MIRRORED), Job.MIRROR),
        (Situation(L, OWN, MOD, SSE, "initialize"), Job.BRIDGE),
        (Situation(L, OWN, LEG, STDIO, "initialize"), Job.BRIDGE),
        (Situation(L, AGG, UNK, HTTP, "initialize"), Job.MIRROR),
        (Situation(L, AGG, UNK, HTTP, "initialize", crosses=False), Job.REFUSE),
    ],
)
def test_named_rows(situation: Situation, job: Job) -> None:
    assert plan(situation) is job


def test_the_era_is_asked_only_when_it_decides() -> None:
    """For every combination where `needs_era` says no, no era changes the job (so no probe is needed) — but
    a retry of a call parked here: that one goes by the verdict held, if any, and is adapted while none is."""
    for s in _every():
        if s.parked or needs_era(s):
            continue
        jobs = {plan(Situation(**{**_fields(s), "era": era})) for era in UpstreamEra}
        assert len(jobs) == 1, s


def test_the_era_matters_where_it_is_asked() -> None:
    """A legacy client's initialize of a Streamable HTTP upstream, a modern tools/call: the era decides."""
    initialize = Situation(L, OWN, UNK, HTTP, "initialize")
    assert needs_era(initialize)
    assert {plan(Situation(**{**_fields(initialize), "era": era})) for era in UpstreamEra} == {
        Job.MIRROR,
        Job.PASS_THROUGH,
    }
    assert needs_era(Situation(M, OWN, UNK, HTTP, "tools/call"))
    assert not needs_era(Situation(M, OWN, UNK, HTTP, "tools/call", parked=True))  # parked here: no probe
    assert plan(Situation(M, OWN, UNK, HTTP, "tools/call", parked=True)) is Job.ADAPT
    assert not needs_era(Situation(M, AGG, UNK, HTTP, "tools/call"))  # the member's, later
    assert not needs_era(Situation(L, OWN, UNK, HTTP, "tools/call", session=LegacySession.RELAYED))
