"""What the interop matrix (matrix.py) runs: the servers with their flows, the clients, the expected
failures with their reasons, and the run's workspace (each client's root directory, a git repository).
"""

from __future__ import annotations

import contextlib
import fnmatch
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_WORKSPACE: list[Path] = []  # the run's temporary directory: the clients' roots, a git repository


def workspace() -> Path:
    if not _WORKSPACE:
        raise RuntimeError("no matrix run is in progress (run_matrix creates the workspace)")
    return _WORKSPACE[-1]


def root_path(client_id: str) -> Path:
    """The one root a client answers roots/list with: a directory of its own (with a `notes.txt`), so an
    answer can only have come from it, and a server that serves files there serves that client's."""
    return workspace() / "roots" / client_id


def root_uri(client_id: str) -> str:
    return root_path(client_id).as_uri()


def fill(value: Any, client_id: str) -> Any:
    """`value` with `{root}`, `{root_path}`, `{client}` and `{repo}` filled in for `client_id`."""
    if isinstance(value, str):
        for name, text in (
            ("{root}", root_uri(client_id)),
            ("{root_path}", str(root_path(client_id))),
            ("{client}", client_id),
            ("{repo}", str(workspace() / "repo")),
        ):
            value = value.replace(name, text)
        return value
    if isinstance(value, dict):
        return {k: fill(v, client_id) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, client_id) for v in value]
    return value


@contextlib.contextmanager
def prepared_workspace() -> Iterator[Path]:
    """A temporary directory with each client's root (and its notes.txt) and a git repository with one
    commit; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="mrtr-interop-") as tmp:
        base = Path(tmp).resolve()
        for client in CLIENTS:
            (base / "roots" / client.id).mkdir(parents=True)
            (base / "roots" / client.id / "notes.txt").write_text(f"hello from {client.id}\n")
        repo = base / "repo"
        repo.mkdir()
        (repo / "README").write_text("made by the interop matrix\n")
        git = ["git", "-C", str(repo), "-c", "user.name=matrix", "-c", "user.email=matrix@example.com"]
        for args in (["init", "-q"], ["add", "README"], ["commit", "-q", "-m", "interop commit"]):
            subprocess.run([*git, *args], check=True, capture_output=True, timeout=30)
        _WORKSPACE.append(base)
        try:
            yield base
        finally:
            _WORKSPACE.remove(base)


# --------------------------------------------------------------------------------------------------
# what runs


@dataclass(frozen=True)
class Step:
    tool: str
    args: dict[str, Any]
    expect: str  # a fragment of the tool's result text that proves the client's answer reached the tool
    handler: str  # the client handler that must have been called ("elicit:form", "sample", "roots")
    note: str = ""  # how the legacy server asks
    # The server asks once per session and caches the answer (server-everything's roots): the handler may have
    # been called during an earlier call of the same client, so only the answer in the result is checked.
    # Also for steps that ask the client nothing (a tool's own work).
    cached: bool = False
    progress: tuple[float, ...] | None = None  # the progress values the client must see, in order
    log_level: str | None = None  # opt in to logging at this level (io.modelcontextprotocol/logLevel)
    logs: tuple[str, ...] | None = None  # the levels of the log messages the client must get, in order
    until: str | None = None  # repeat the call (bounded) until its text has this (a server applying roots)


@dataclass(frozen=True)
class ServerSpec:
    id: str
    peer: str
    transports: tuple[str, ...]  # the proxy's upstream transport names
    flows: dict[str, tuple[Step, ...]]
    kinds: tuple[str, ...] = ("py", "ts", "inspector")  # the client kinds run against it
    modern_only: tuple[str, ...] = ()  # flows that exist for 2026-07-28 clients only (the logging opt-in)


@dataclass(frozen=True)
class ClientSpec:
    id: str
    peer: str
    kind: str  # "py" | "ts" | "inspector"
    mode: str  # driver mode: "pinned" | "auto" | "legacy"
    era: str  # what it must negotiate with the proxy
    pending: str | None = None  # why it is not run yet


def _steps(*steps: tuple[Any, ...] | Step) -> tuple[Step, ...]:
    return tuple(s if isinstance(s, Step) else Step(*s) for s in steps)


def _stdio_tool(tool: str, args: dict[str, Any], expect: str, **extra: Any) -> Step:
    """A step that asks the client nothing: only its result is checked."""
    return Step(tool, args, expect, "", cached=True, **extra)


SERVERS: tuple[ServerSpec, ...] = (
    ServerSpec(
        "fastmcp",
        "FastMCP (mcp)",
        ("streamable-http", "sse", "stdio"),
        {
            "elicitation": _steps(("ask_name", {}, "accept:Alice", "elicit:form", "ctx.elicit, POST stream")),
            "sampling": _steps(
                ("sample", {"prompt": "capital?"}, "Paris", "sample", "create_message, GET stream")
            ),
            "roots": _steps(("roots", {}, "{root}", "roots", "list_roots, GET stream")),
        },
    ),
    ServerSpec(
        "everything",
        "server-everything",
        ("streamable-http", "sse", "stdio"),
        {
            "elicitation": _steps(
                ("trigger-elicitation-request", {}, "- Name: Alice", "elicit:form", "POST stream")
            ),
            "sampling": _steps(
                (
                    "trigger-sampling-request",
                    {"prompt": "capital?"},
                    '"text": "Paris"',
                    "sample",
                    "POST stream",
                )
            ),
            "roots": _steps(
                ("get-roots-list", {}, "URI: {root}", "roots", "GET stream, 350 ms after initialized", True)
            ),
        },
    ),
    ServerSpec(
        "ts-sdk-v1",
        "TS SDK v1 server",
        ("streamable-http", "sse", "stdio"),
        {
            "elicitation": _steps(
                ("ask_name", {}, "accept:Alice", "elicit:form", "elicitInput + relatedRequestId: POST"),
                ("ask_name_standalone", {}, "accept:Alice", "elicit:form", "elicitInput: GET stream"),
            ),
            "sampling": _steps(
                ("sample", {"prompt": "capital?"}, "Paris", "sample", "createMessage + relatedRequestId"),
                ("sample_standalone", {"prompt": "capital?"}, "Paris", "sample", "createMessage: GET"),
            ),
            "roots": _steps(
                ("roots", {}, "{root}", "roots", "listRoots + relatedRequestId: POST"),
                ("roots_standalone", {}, "{root}", "roots", "listRoots: GET stream"),
            ),
        },
    ),
    ServerSpec(
        "fastmcp2",
        "FastMCP 2.x",
        ("streamable-http", "sse", "stdio"),
        {
            "elicitation": _steps(("ask_name", {}, "accept:Alice", "elicit:form", "ctx.elicit")),
            "sampling": _steps(("sample", {"prompt": "capital?"}, "Paris", "sample", "ctx.sample")),
            "roots": _steps(("roots", {}, "{root}", "roots", "ctx.list_roots")),
            "progress": _steps(
                Step(
                    "progress_elicit_progress",
                    {"steps": 2},
                    "progress:accept:Alice",
                    "elicit:form",
                    "ctx.report_progress x2, ctx.elicit, ctx.report_progress x2: two rounds",
                    progress=(1, 2, 3, 4),
                )
            ),
            "logging": _steps(
                _stdio_tool("log_levels", {}, "logged", log_level="warning", logs=("warning", "error"))
            ),
        },
        kinds=("py", "ts"),
        modern_only=("logging",),
    ),
    ServerSpec(
        "filesystem",
        "server-filesystem (no directory arguments)",
        ("stdio",),
        {
            "files": _steps(
                Step(
                    "list_allowed_directories",
                    {},
                    "{root_path}",
                    "roots",
                    "roots/list right after initialized, applied asynchronously",
                    until="{root_path}",
                ),
                _stdio_tool("read_text_file", {"path": "{root_path}/notes.txt"}, "hello from {client}"),
                _stdio_tool("list_directory", {"path": "{root_path}"}, "[FILE] notes.txt"),
            )
        },
        kinds=("py", "ts"),
    ),
    ServerSpec(
        "memory",
        "server-memory",
        ("stdio",),
        {
            "graph": _steps(
                _stdio_tool(
                    "create_entities",
                    {
                        "entities": [
                            {
                                "name": "{client}-entity",
                                "entityType": "interop",
                                "observations": ["by {client}"],
                            }
                        ]
                    },
                    "{client}-entity",
                ),
                _stdio_tool("open_nodes", {"names": ["{client}-entity"]}, "by {client}"),
            )
        },
        kinds=("py", "ts"),
    ),
    *(
        ServerSpec(
            f"git-sdk{sdk}",
            f"mcp-server-git (mcp {sdk}.x)",
            ("stdio",),
            {
                "git": _steps(
                    _stdio_tool("git_log", {"repo_path": "{repo}", "max_count": 3}, "interop commit")
                )
            },
            kinds=("py", "ts"),
        )
        for sdk in (1, 2)
    ),
    *(
        ServerSpec(
            f"time-sdk{sdk}",
            f"mcp-server-time (mcp {sdk}.x)",
            ("stdio",),
            {
                "time": _steps(
                    _stdio_tool(
                        "convert_time",
                        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
                        "T21:00:00+09:00",
                    )
                )
            },
            kinds=("py", "ts"),
        )
        for sdk in (1, 2)
    ),
)
FLOWS = tuple(dict.fromkeys(flow for server in SERVERS for flow in server.flows))

CLIENTS: tuple[ClientSpec, ...] = (
    ClientSpec("mcp-pinned", "mcp (Python SDK)", "py", "pinned", "2026-07-28"),
    ClientSpec("mcp-auto", "mcp (Python SDK)", "py", "auto", "2026-07-28"),
    ClientSpec("ts-pinned", "@modelcontextprotocol/client", "ts", "pinned", "2026-07-28"),
    ClientSpec("ts-auto", "@modelcontextprotocol/client", "ts", "auto", "2026-07-28"),
    ClientSpec("inspector", "@modelcontextprotocol/inspector --cli", "inspector", "modern", "2026-07-28"),
    # Legacy clients: they `initialize` against the proxy and get the legacy server's requests as they are.
    ClientSpec("mcp-legacy", "mcp (Python SDK)", "py", "legacy", "2025-11-25"),
    ClientSpec("ts-legacy", "@modelcontextprotocol/client", "ts", "legacy", "2025-11-25"),
    ClientSpec(
        "inspector-legacy", "@modelcontextprotocol/inspector --cli", "inspector", "legacy", "2025-11-25"
    ),
)


@dataclass(frozen=True)
class ExpectedFailure:
    clients: str  # fnmatch patterns over ids
    servers: str
    transports: str
    flow: str
    signature: str  # regex the failure must match (error or result text), so another failure still FAILs
    reason: str


INSPECTOR_NO_CAPS = (
    "the Inspector CLI never declares `{cap}`: its CLI runner builds its client with `sample: false, elicit: "
    "false` (clients/cli/build/index.js; a one-shot command has nobody to answer a form and no model to "
    "sample), so the proxy declares no `{cap}` upstream either, and a legacy server is never to send such a "
    "request to such a client. FastMCP's and the TS SDK v1's tools then fail with 'Client does not support "
    "…'; server-everything does not register `{tool}` for such a client at all (tool not found)"
)
INSPECTOR_LEGACY_NO_CAPS = (
    "the Inspector CLI never declares `{cap}` in the legacy era either (its CLI runner: `sample: false, "
    "elicit: false`), and a legacy client gets the legacy server's requests as they are: the proxy declares "
    "upstream exactly the capabilities the client declared and filters nothing (it relays a streamable "
    "HTTP upstream byte for byte and bridges HTTP+SSE and stdio). server-everything does not register "
    "`{tool}` for such a client (tool not found){checks}, but {senders} the request anyway, to a client "
    "that registered no handler for it, and the Inspector answers it {answer}"
)
EXPECTED_FAILURES: tuple[ExpectedFailure, ...] = (
    ExpectedFailure(
        "inspector",
        "*",
        "*",
        "elicitation",
        r"(?i)does not support .*elicitation|not found",
        INSPECTOR_NO_CAPS.format(cap="elicitation", tool="trigger-elicitation-request"),
    ),
    ExpectedFailure(
        "inspector",
        "*",
        "*",
        "sampling",
        r"(?i)does not support sampling|not found",
        INSPECTOR_NO_CAPS.format(cap="sampling", tool="trigger-sampling-request"),
    ),
    ExpectedFailure(
        "inspector-legacy",
        "*",
        "*",
        "elicitation",
        r"(?i)does not support .*elicitation|not found|'accept:Alice' not in 'cancel'",
        INSPECTOR_LEGACY_NO_CAPS.format(
            cap="elicitation",
            tool="trigger-elicitation-request",
            checks=" and the TS SDK v1 checks first ('Client does not support form elicitation.')",
            senders="FastMCP 1.30's `ctx.elicit` sends",
            answer="with `{action: \"cancel\"}` (FastMCP's `ask_name` returns 'cancel')",
        ),
    ),
    ExpectedFailure(
        "inspector-legacy",
        "*",
        "*",
        "sampling",
        r"(?i)not found|Internal error",
        INSPECTOR_LEGACY_NO_CAPS.format(
            cap="sampling",
            tool="trigger-sampling-request",
            checks="",
            senders="FastMCP 1.30's `create_message` and the TS SDK v1's `createMessage` send",
            answer="with a JSON-RPC error, -32603 Internal error, which the tool reports",
        ),
    ),
)


def expected_failure(client: str, server: str, transport: str, flow: str) -> ExpectedFailure | None:
    for xf in EXPECTED_FAILURES:
        if (
            fnmatch.fnmatch(client, xf.clients)
            and fnmatch.fnmatch(server, xf.servers)
            and fnmatch.fnmatch(transport, xf.transports)
            and fnmatch.fnmatch(flow, xf.flow)
        ):
            return xf
    return None
