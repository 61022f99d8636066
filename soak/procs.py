"""The soak's processes: FastMCP 1.30 (the legacy upstream) and the proxy itself, each a real process in a
process group of its own, so stopping one stops exactly what the soak started and nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"


def peers_dir() -> Path:
    """Where scripts/setup-peers.sh installed the peers (as tests/peers.py finds them)."""
    return Path(os.environ.get("MRTR_PEERS_DIR", ROOT / ".peers"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


class StartError(RuntimeError):
    """A process died before it listened, or did not listen in time."""


@dataclass
class Proc:
    """One started process: its command, the port it listens on and its log (appended across restarts)."""

    name: str
    argv: list[str]
    port: int
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = ROOT
    popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    async def start(self, ready_s: float = 30.0) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(  # noqa: ASYNC220 - a fork, once per start
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                cwd=self.cwd,
                start_new_session=True,  # its own process group: stop() signals it and its children only
            )
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise StartError(f"{self.name} exited with {self.popen.returncode}; see {self.log}")
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(LOOPBACK, self.port), 1.0)
            except (OSError, TimeoutError):
                await asyncio.sleep(0.1)
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return
        raise StartError(f"{self.name} did not listen on {self.port} within {ready_s:g}s; see {self.log}")

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM the group, SIGKILL it after grace_s; the exit code (None if it was never started)."""
        popen, self.popen = self.popen, None
        if popen is None:
            return None
        if popen.poll() is None:
            self._signal(popen.pid, signal.SIGTERM)
            try:
                popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._signal(popen.pid, signal.SIGKILL)
                popen.wait(timeout=5)
        return popen.returncode

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)


def upstream(log_dir: Path, port: int | None = None) -> Proc:
    """FastMCP 1.30 on streamable HTTP (tests/fixtures/legacy_fastmcp_server.py): .peers/legacy."""
    port = port or free_port()
    python = peers_dir() / "legacy" / "bin" / "python"
    if not python.exists():
        raise StartError(f"{python} is missing: run scripts/setup-peers.sh legacy")
    script = ROOT / "tests" / "fixtures" / "legacy_fastmcp_server.py"
    argv = [
        str(python),
        str(script),
        "--transport",
        "streamable-http",
        "--host",
        LOOPBACK,
        "--port",
        str(port),
    ]
    return Proc("fastmcp130", argv, port, log_dir / "upstream.log")


def proxy(log_dir: Path, config: Path, port: int, source: Path = ROOT) -> Proc:
    """`python -m proxy serve --config FILE` with this interpreter, the package from `source` (this checkout
    unless told: another branch's worktree can be soaked with this driver)."""
    argv = [sys.executable, "-m", "proxy", "serve", "--config", str(config)]
    return Proc("mrtr-proxy", argv, port, log_dir / "proxy.log", {"PYTHONPATH": str(source)}, source)


def rss_kib(pid: int) -> int:
    """Resident set size, from /proc/PID/status (VmRSS, in KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_kinds(pid: int) -> dict[str, int]:
    """The open descriptors by kind (socket, pipe, anon_inode:[eventpoll], a file's path), for a report."""
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        kind = target.split(":[", 1)[0] if target.startswith(("socket:", "pipe:")) else target
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds
