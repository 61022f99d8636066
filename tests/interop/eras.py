"""The era matrix (issue 28): every client era x every server era, through one proxy endpoint each.

Clients: mcp 2.3.0 (`2026-07-28` pinned, `auto`), the TS SDK v2 client (pinned, auto, legacy), FastMCP 4.2.3's
Client (`2026-07-28`, `legacy`), mcp 1.30's ClientSession (legacy), Vercel's `@ai-sdk/mcp` 2.0.99 (modern:
server/discover; legacy: initialize). Upstreams: FastMCP 1.30 and server-everything (legacy), the two-era
servers FastMCP 4.2.3 and tmcp 1.20.0 (verdict `both`, default configuration: no `legacy_tools`; each has a
tool `ask_name` that asks inline and native ones), the mcp 2.3.0 SDK's server (2026-07-28 only). A cell is
one client process running its upstream's plan through the proxy's /mcp: a form elicitation round trip, two
rounds where the server has such a tool, each answer checked in the tool's result, and the era the client
negotiated. Against a two-era server each cell first runs the same client straight at the server: every step
that passes there must pass through the proxy, and every step must pass but a 2026-07-28 client's first call
of `ask_name` (refused going direct; through the proxy refused with a hint, the tool learned, and the next
call — the `ctx_elicit` step — must pass).
The drivers are the ones the other suites use (tests/interop/clients/, tests/e2e/clients/).

    .venv/bin/python tests/interop/eras.py [--slice ci] [--client PAT] [--upstream PAT] [--jobs N]

prints one line per cell (client, upstream, result, seconds) and exits 1 unless every cell is green (passed,
or failed exactly as a documented EXPECTED_FAILURES entry says).
`make interop-eras` runs it all; tests/interop/test_eras.py runs the CI slice.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fnmatch
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make tests/ importable (peers.py lives there)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import peers
from e2e.harness import running_proxy

from proxy.config import UpstreamConfig

TESTS = Path(__file__).resolve().parents[1]
PY_DRIVER = TESTS / "interop" / "clients" / "py_client.py"
TS_DRIVER = TESTS / "interop" / "clients" / "ts_client.mjs"
FASTMCP4_DRIVER = TESTS / "e2e" / "clients" / "fastmcp4_client.py"
LEGACY_DRIVER = TESTS / "e2e" / "clients" / "legacy_mirror_client.py"
AISDK_DRIVER = TESTS / "interop" / "clients" / "aisdk_client.mjs"
CELL_LIMIT_S = 90.0


@dataclass(frozen=True)
class EraClient:
    id: str
    era: str  # "modern" | "legacy": what it must negotiate with the proxy
    answer: str  # what its elicitation handler fills a name field with

    def argv(self, url: str, plan: list[dict[str, Any]]) -> list[str]:
        kind, _, mode = self.id.partition("-")
        text = json.dumps(plan)
        if kind == "mcp2":
            return [str(peers.client_python()), str(PY_DRIVER), url, mode, text]
        if kind == "ts":
            return [str(peers.node_bin()), str(TS_DRIVER), url, mode, text]
        if kind == "fastmcp4":
            wire = "2026-07-28" if mode == "modern" else "legacy"
            return [str(peers.fastmcp4_python()), str(FASTMCP4_DRIVER), url, text, wire]
        if kind == "aisdk":
            return [str(peers.node_bin()), str(AISDK_DRIVER), url, mode, text]
        return [str(peers.legacy_python()), str(LEGACY_DRIVER), "mcp", url, text]

    def results(self, out: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
        """(the protocol version it negotiated, if the driver says; its steps by id)."""
        if self.id.startswith("fastmcp4"):
            return None, {k: v for k, v in out.items() if not k.startswith("_")}
        version = out.get("protocolVersion") or (out.get("client") or {}).get("protocolVersion")
        return version, out["steps"]


CLIENTS: tuple[EraClient, ...] = (
    EraClient("mcp2-pinned", "modern", "Alice"),
    EraClient("mcp2-auto", "modern", "Alice"),
    EraClient("ts-pinned", "modern", "Alice"),
    EraClient("ts-auto", "modern", "Alice"),
    EraClient("ts-legacy", "legacy", "Alice"),
    EraClient("fastmcp4-modern", "modern", "Alice"),
    EraClient("fastmcp4-legacy", "legacy", "Alice"),
    EraClient("mcp130-legacy", "legacy", "Ada"),
    EraClient("aisdk-modern", "modern", "Alice"),
    EraClient("aisdk-legacy", "legacy", "Alice"),
)


@dataclass(frozen=True)
class EraStep:
    id: str
    tool: str
    expect: str  # the tool's result text must contain this; `{name}` is the client's answer
    prefix: bool = False  # the text must start with `expect` (it goes on with a value the client chose)
    # The first call of a tool that asks inline, by a 2026-07-28 client of a two-era server: refused going
    # direct, so through the proxy it may be refused too (with the proxy's hint; the tool is learned then).
    first: bool = False


@dataclass(frozen=True)
class EraUpstream:
    id: str
    era: str  # "legacy" | "two eras" | "modern"
    start: Callable[[], contextlib.AbstractAsyncContextManager[str]]
    steps: tuple[EraStep, ...]
    legacy_tools: tuple[str, ...] = ()
    compare_direct: bool = (
        False  # also run each client straight at the server: the proxy must do at least as well
    )


UPSTREAMS: tuple[EraUpstream, ...] = (
    EraUpstream(
        "fastmcp130",
        "legacy",
        peers.start_fastmcp,
        (
            EraStep("form", "ask_name", "accept:{name}"),
            EraStep("two", "two_questions", "accept:{name}|accept:", prefix=True),
        ),
    ),
    EraUpstream(
        "everything",
        "legacy",
        peers.start_server_everything,
        (EraStep("form", "trigger-elicitation-request", "Name: {name}"),),
    ),
    EraUpstream(  # the default configuration: no legacy_tools (the proxy learns ask_name)
        "fastmcp4",
        "two eras",
        peers.start_fastmcp4,
        (
            EraStep("form", "guard_name", "hello:{name}"),
            EraStep("two", "guard_two", "two:{name}+{name}"),
            # ctx.elicit(response_type=str): the form's one field is `value`, filled as each client fills it.
            EraStep("ctx_elicit_first", "ask_name", "accept:", prefix=True, first=True),
            EraStep("ctx_elicit", "ask_name", "accept:", prefix=True),
        ),
        compare_direct=True,
    ),
    EraUpstream(
        "tmcp",
        "two eras",
        peers.start_tmcp,
        (
            EraStep("form", "guard_name", "hello:{name}"),  # replayable: inline on legacy, native at 2026
            EraStep("ctx_elicit_first", "ask_name", "accept:", prefix=True, first=True),
            EraStep("ctx_elicit", "ask_name", "accept:", prefix=True),
        ),
        compare_direct=True,
    ),
    EraUpstream(
        "mcp2",
        "modern",
        peers.start_mcp2_server,
        (
            EraStep("form", "guard_name", "hello:{name}"),
            EraStep("two", "guard_two", "two:{name}+{name}"),
        ),
    ),
)

# The CI slice: each client era (mcp 2.3.0 and TS modern, TS / mcp 1.30 / FastMCP 4 legacy, FastMCP 4 modern)
# against each server era at least once, kept small.
CI_SLICE: frozenset[tuple[str, str]] = frozenset(
    {
        ("mcp2-pinned", "fastmcp130"),
        ("ts-legacy", "fastmcp130"),
        ("ts-auto", "everything"),
        ("mcp130-legacy", "everything"),
        ("fastmcp4-modern", "fastmcp4"),
        ("mcp130-legacy", "fastmcp4"),
        ("aisdk-modern", "tmcp"),
        ("aisdk-legacy", "fastmcp4"),
        ("ts-legacy", "tmcp"),
        ("ts-pinned", "mcp2"),
        ("fastmcp4-legacy", "mcp2"),
    }
)


# Known gaps, by (client era, upstream, step): the signature the failure must show, and why. Such a cell is
# "xfail" when every problem is one of these, so the matrix stays green only while they fail exactly so.
EXPECTED_FAILURES: dict[tuple[str, str, str], tuple[str, str]] = {}


@dataclass(frozen=True)
class Cell:
    client: str
    upstream: str
    status: str  # "pass" | "xfail" (only documented EXPECTED_FAILURES) | "fail"
    seconds: float
    detail: str = ""

    def line(self) -> str:
        return f"{self.client:<16} {self.upstream:<11} {self.status:<5} {self.seconds:6.1f}s  {self.detail}"


def all_cells(ci_slice: bool = False) -> list[tuple[str, str]]:
    cells = [(c.id, u.id) for u in UPSTREAMS for c in CLIENTS]
    return [cell for cell in cells if not ci_slice or cell in CI_SLICE]


def passed(client: EraClient, upstream: EraUpstream, out: dict[str, Any]) -> set[str]:
    """The ids of the steps that passed in one run's output."""
    _, steps = client.results(out)
    done = set()
    for step in upstream.steps:
        got = steps.get(step.id) or {}
        text = str(got.get("text", got.get("error", "missing")))
        want = step.expect.replace("{name}", client.answer)
        ok = text.startswith(want) if step.prefix else want in text
        if ok and not got.get("is_error") and "error" not in got:
            done.add(step.id)
    return done


def judge(
    client: EraClient, upstream: EraUpstream, out: dict[str, Any], direct: set[str] | None = None
) -> tuple[list[str], list[str]]:
    """(every problem of one cell's output, the documented expected failures among them). `direct`: the
    steps that passed with the same client going straight to the server — each must pass through the proxy
    too, and a 2026-07-28 client's `first` call of an inline-asking tool may fail only if it failed there."""
    version, steps = client.results(out)
    problems: list[str] = []
    expected: list[str] = []
    if version is not None and (version == "2026-07-28") != (client.era == "modern"):
        problems.append(f"negotiated {version}, expected the {client.era} era")
    ok = passed(client, upstream, out)
    for step in upstream.steps:
        if step.id in ok:
            continue
        got = steps.get(step.id) or {}
        text = str(got.get("text", got.get("error", "missing")))
        if step.first and client.era == "modern" and (direct is None or step.id not in direct):
            continue  # refused going direct too; the proxy learned the tool (the next step must pass)
        known = EXPECTED_FAILURES.get((client.era, upstream.id, step.id))
        if known is not None and known[0] in text:
            expected.append(f"{step.id}: xfail ({known[0]})")
        else:
            want = step.expect.replace("{name}", client.answer)
            problems.append(f"{step.id}: {text[:160]!r} (want {want!r})")
    return problems, expected


async def run_client(client: EraClient, upstream: EraUpstream, url: str) -> tuple[dict[str, Any] | None, str]:
    """One client process running the upstream's plan at `url`: (its output, or None and why)."""
    plan = [{"id": s.id, "kind": "tool", "name": s.tool, "args": {}} for s in upstream.steps]
    run = await peers.run_once(client.argv(url, plan), limit_s=CELL_LIMIT_S)
    if run.timed_out or run.returncode != 0:
        why = "timed out" if run.timed_out else f"exit {run.returncode}"
        return None, f"{why}: {run.stderr[-300:]!r}"
    try:
        out: dict[str, Any] = json.loads(run.stdout)
    except ValueError as exc:
        return None, f"unreadable output ({exc}): {run.stdout[-300:]!r}"
    return out, ""


async def run_cell(client: EraClient, upstream: EraUpstream, url: str, direct_url: str | None = None) -> Cell:
    started = time.monotonic()
    direct: set[str] | None = None
    note = ""
    if direct_url is not None:  # the same client straight at the server first: what the proxy must match
        straight, _ = await run_client(client, upstream, direct_url)
        direct = passed(client, upstream, straight) if straight is not None else set()
        note = f"direct {len(direct)}/{len(upstream.steps)}"
    out, why = await run_client(client, upstream, url)
    seconds = time.monotonic() - started
    if out is None:
        return Cell(client.id, upstream.id, "fail", seconds, why)
    try:
        problems, expected = judge(client, upstream, out, direct)
    except (KeyError, AttributeError) as exc:
        problems, expected = [f"unreadable output ({exc})"], []
    status = "fail" if problems else "xfail" if expected else "pass"
    shown = ([note] if note else []) + problems + expected
    return Cell(client.id, upstream.id, status, seconds, "; ".join(shown))


@contextlib.asynccontextmanager
async def proxied(upstream: EraUpstream) -> AsyncIterator[tuple[str, str]]:
    """The upstream and one proxy in front of it; yields (the proxy's /mcp, the upstream's own)."""
    async with upstream.start() as url:
        config = UpstreamConfig(name="default", url=url, legacy_tools=upstream.legacy_tools)
        async with running_proxy(config) as proxy:
            yield proxy.url, url


async def run_eras(
    cells: Sequence[tuple[str, str]], jobs: int = 2, report: Callable[[Cell], None] | None = None
) -> list[Cell]:
    """Run `cells` (client id, upstream id): one upstream and its proxy at a time, `jobs` clients at once."""
    clients = {c.id: c for c in CLIENTS}
    done: list[Cell] = []
    gate = asyncio.Semaphore(jobs)
    for upstream in UPSTREAMS:
        mine = [clients[c] for c, u in cells if u == upstream.id]
        if not mine:
            continue
        async with proxied(upstream) as (url, own):
            direct = own if upstream.compare_direct else None

            async def one(
                client: EraClient,
                url: str = url,
                upstream: EraUpstream = upstream,
                direct: str | None = direct,
            ) -> Cell:
                async with gate:
                    cell = await run_cell(client, upstream, url, direct)
                if report is not None:
                    report(cell)
                return cell

            done += await asyncio.gather(*(one(c) for c in mine))
    return done


def markdown(cells: Sequence[Cell]) -> str:
    """The docs table: one row per client, one column per upstream."""
    ups = [u for u in UPSTREAMS if any(c.upstream == u.id for c in cells)]
    head = "| client | " + " | ".join(f"{u.id} ({u.era})" for u in ups) + " |"
    rows = [head, "|" + "---|" * (len(ups) + 1)]
    for client in CLIENTS:
        got = {c.upstream: c for c in cells if c.client == client.id}
        if got:
            marks = [f"{got[u.id].status} {got[u.id].seconds:.1f}s" if u.id in got else "" for u in ups]
            rows.append(f"| {client.id} ({client.era}) | " + " | ".join(marks) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--client", action="append", help="client id pattern (repeatable); default all")
    parser.add_argument("--upstream", action="append", help="upstream id pattern (repeatable); default all")
    parser.add_argument("--slice", choices=["full", "ci"], default="full", help="ci: the slice CI runs")
    parser.add_argument("--jobs", type=int, default=2, help="clients run at once against one upstream")
    parser.add_argument("--markdown", action="store_true", help="also print the docs table")
    args = parser.parse_args()
    cells = [
        (c, u)
        for c, u in all_cells(ci_slice=args.slice == "ci")
        if any(fnmatch.fnmatch(c, p) for p in args.client or ["*"])
        and any(fnmatch.fnmatch(u, p) for p in args.upstream or ["*"])
    ]
    peers.require_peers()
    from proxy.observe import logs

    logs.configure("warning", "json", stream=sys.stderr)  # the in-process proxy: warnings only, off stdout
    print(f"{'client':<16} {'upstream':<11} {'res':<5} {'time':>7}")
    report: Callable[[Cell], None] = lambda cell: print(cell.line(), flush=True)  # noqa: E731
    cells_run = asyncio.run(run_eras(cells, jobs=args.jobs, report=report))
    passed = sum(c.status in ("pass", "xfail") for c in cells_run)
    print(f"{passed}/{len(cells_run)} cells green (pass or documented xfail)")
    if args.markdown:
        print(markdown(sorted(cells_run, key=lambda c: (c.client, c.upstream))))
    sys.exit(0 if cells_run and passed == len(cells_run) else 1)


if __name__ == "__main__":
    main()
