"""The era matrix (tests/interop/eras.py): its CI slice, run once for the module, checked cell by cell.

The slice (eras.CI_SLICE) puts each client era — 2026-07-28 (mcp 2.3.0, the TS SDK v2 client pinned and auto,
FastMCP 4's Client) and legacy (the TS client, mcp 1.30, FastMCP 4's Client) — against each server era —
legacy (FastMCP 1.30, server-everything), two eras (FastMCP 4.2.3), 2026-07-28 only (the mcp 2.3.0 server) —
at least once, every cell through the proxy's one /mcp with each answer checked in the tool's result.
`make interop-eras` runs the whole matrix.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from interop.eras import CLIENTS, EXPECTED_FAILURES, UPSTREAMS, Cell, all_cells, run_eras

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(300)]

CELLS = all_cells(ci_slice=True)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def eras() -> AsyncIterator[dict[tuple[str, str], Cell]]:
    yield {(c.client, c.upstream): c for c in await run_eras(CELLS, jobs=2)}


async def test_the_slice_covers_every_client_era_against_every_server_era() -> None:
    era_of = {c.id: c.era for c in CLIENTS}
    server_era = {u.id: u.era for u in UPSTREAMS}
    pairs = {(era_of[c], server_era[u]) for c, u in CELLS}
    assert pairs == {(c, s) for c in ("modern", "legacy") for s in ("legacy", "two eras", "modern")}
    assert {c for c, _ in CELLS} >= {"mcp2-pinned", "ts-legacy", "mcp130-legacy", "fastmcp4-modern"}


@pytest.mark.parametrize(("client", "upstream"), CELLS, ids=["/".join(c) for c in CELLS])
async def test_cell(eras: dict[tuple[str, str], Cell], client: str, upstream: str) -> None:
    cell = eras[(client, upstream)]
    if cell.status == "xfail":  # only ever a documented gap failing exactly as documented
        reasons = [why for (_, u, _), (_, why) in EXPECTED_FAILURES.items() if u == upstream]
        pytest.xfail(f"{cell.detail} — {'; '.join(reasons)}")
    assert cell.status == "pass", cell.line()
