"""The interop matrix (tests/interop/matrix.py): its CI slice, run once for the module, checked cell by cell.

Every cell of the slice — a client (mcp 2.3.0 pinned/auto/legacy, the TS SDK v2 client pinned/auto/legacy, the
Inspector CLI modern/legacy) x a server (FastMCP 1.30, server-everything, our TS SDK v1 server, FastMCP 2.x,
server-filesystem, server-memory, mcp-server-git and mcp-server-time on mcp 1.x and 2.x) x one of the server's
upstream transports x each of its flows — must pass, or be one of the documented expected failures
(matrix.EXPECTED_FAILURES) failing in exactly the documented way. The slice (matrix.in_ci_slice) runs each
client over one transport per server; `make interop` runs the whole matrix. Clients marked pending (none
today) are skipped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from interop.matrix import MatrixRun, all_cells, expected_failure, run_matrix

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(400)]

CELLS = all_cells(ci_slice=True)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def matrix() -> AsyncIterator[MatrixRun]:
    yield await run_matrix(jobs=3, ci_slice=True)


@pytest.mark.parametrize(("client", "server", "transport", "flow"), CELLS, ids=["/".join(c) for c in CELLS])
async def test_cell(matrix: MatrixRun, client: str, server: str, transport: str, flow: str) -> None:
    cell = matrix.cell(client, server, transport, flow)
    xf = expected_failure(client, server, transport, flow)
    if xf is not None:
        # judge() only says xfail when every problem matches the documented failure's signature.
        assert cell.status == "xfail", f"{cell.status}: {cell.detail}"
        pytest.xfail(f"{cell.detail} — {xf.reason}")
    assert cell.status == "pass", f"{cell.status}: {cell.detail}\n{matrix.logs}"


async def test_matrix_is_green(matrix: MatrixRun) -> None:
    assert matrix.green, "\n" + matrix.table()
    assert {c.status for c in matrix.cells} <= {"pass", "xfail", "pending"}
