"""A stdio upstream's child process, whatever is spoken over it: started, its stderr logged, and stopped.

Shared by the legacy stdio session (stdio.py: one child per session, `initialize` first) and the 2026-07-28
stdio client (modern_stdio.py: one child per upstream, no handshake).

- **Start**: `command` + `args`, in `cwd` (else the proxy's), in a process group of its own. The environment
  is minimal: only the variables named in `INHERITED_ENV` are taken from the proxy's environment (so its
  own `MRTR_PROXY_*` settings and sealing keys never reach the child), and the upstream's `env` goes over
  them. `command` is looked up on that `PATH`. stdout reads are bounded by `max_line_bytes`.
- **stderr** goes to the structured log line by line (`upstream.stderr`, with the upstream name and the
  child's pid), each line cut at `max_stderr_line_bytes`.
- **Stop**: stdin is closed (a well-behaved server exits on EOF), then SIGTERM to the process group, then
  SIGKILL, each after a bounded wait; the child is always waited for, so no zombie is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Protocol

import structlog

from proxy.upstream.base import UpstreamError
from proxy.upstream.bounded import too_large
from proxy.wire import jsonrpc

log = structlog.get_logger("proxy.upstream.stdio")

# Variables the child inherits from the proxy's environment (when set); everything else stays out.
INHERITED_ENV: Final = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
)  # fmt: skip
_STDERR_CHUNK: Final = 65536
_KILL_WAIT: Final = 5.0  # after SIGKILL


class ChildSettings(Protocol):
    """What starting and stopping a child needs (StdioSettings has it)."""

    @property
    def upstream(self) -> str: ...
    @property
    def command(self) -> str: ...
    @property
    def args(self) -> tuple[str, ...]: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def cwd(self) -> Path | None: ...
    @property
    def stdin_grace(self) -> float: ...
    @property
    def term_grace(self) -> float: ...
    @property
    def max_line_bytes(self) -> int: ...
    @property
    def max_stderr_line_bytes(self) -> int: ...


def child_env(extra: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: `INHERITED_ENV` from `environ` (default: the proxy's), then `extra` over it.

    Exported shell functions (values starting with `()`) are not inherited."""
    source = os.environ if environ is None else environ
    env = {k: source[k] for k in INHERITED_ENV if k in source and not source[k].startswith("()")}
    env.update(extra)
    return env


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"upstream process was killed by {name}"
    return f"upstream process exited with code {returncode}"


async def spawn(settings: ChildSettings) -> asyncio.subprocess.Process:
    """Start the child (see the module's docstring). Raises UpstreamError when it cannot be started."""
    try:
        proc = await asyncio.create_subprocess_exec(
            settings.command,
            *settings.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=child_env(settings.env),
            cwd=settings.cwd,
            start_new_session=True,  # its own process group: signals reach its children too
            limit=settings.max_line_bytes,
        )
    except OSError as exc:
        raise UpstreamError(f"could not start {settings.command!r}: {exc.strerror or exc}") from None
    log.info("upstream.child_started", upstream=settings.upstream, pid=proc.pid, command=settings.command)
    return proc


async def terminate(proc: asyncio.subprocess.Process, settings: ChildSettings) -> None:
    """Stop the child: closes stdin, then SIGTERM, then SIGKILL; reaps it."""
    how = "exited"
    if proc.returncode is None:
        if proc.stdin is not None:
            proc.stdin.close()
        how = "stdin closed"
        if not await exited(proc, settings.stdin_grace):
            how = "SIGTERM"
            _signal_group(proc, signal.SIGTERM)
            if not await exited(proc, settings.term_grace):
                how = "SIGKILL"
                _signal_group(proc, signal.SIGKILL)
                if not await exited(proc, _KILL_WAIT):
                    log.error("upstream.child_unkillable", upstream=settings.upstream, pid=proc.pid)
                    return
    log.info(
        "upstream.child_stopped",
        upstream=settings.upstream,
        pid=proc.pid,
        returncode=proc.returncode,
        how=how,
    )


async def next_message(
    proc: asyncio.subprocess.Process, settings: ChildSettings
) -> jsonrpc.Message | str | None:
    """The child's next JSON-RPC message on stdout (blank lines skipped; an undecodable one logged and
    skipped). A str: why reading must stop (a line over `max_line_bytes`); None: stdout ended."""
    assert proc.stdout is not None
    while True:
        try:
            line = await proc.stdout.readline()
        except ValueError:  # asyncio's LimitOverrunError, as readline reports it
            return too_large(settings.max_line_bytes)
        if not line:
            return None
        if not line.strip():
            continue
        try:
            return jsonrpc.decode(line)
        except jsonrpc.InvalidMessage as exc:
            log.warning("upstream.bad_message", upstream=settings.upstream, pid=proc.pid, error=str(exc))
            preview = line[:200].decode("utf-8", errors="replace")
            log.debug("upstream.bad_line", upstream=settings.upstream, pid=proc.pid, line=preview)


async def read_stderr(proc: asyncio.subprocess.Process, settings: ChildSettings) -> None:
    """Log each stderr line; a line over the limit is cut there, the rest of it dropped."""
    assert proc.stderr is not None
    limit = settings.max_stderr_line_bytes
    pending = bytearray()
    skipping = False  # inside the dropped rest of an over-long line
    while chunk := await proc.stderr.read(_STDERR_CHUNK):
        pending += chunk
        while (end := pending.find(b"\n")) != -1:
            line = bytes(pending[:end])
            del pending[: end + 1]
            if skipping:
                skipping = False
            else:
                _log_stderr(settings, proc.pid, line)
        if len(pending) > limit:
            if not skipping:
                _log_stderr(settings, proc.pid, bytes(pending))
                skipping = True
            pending.clear()
    if pending and not skipping:
        _log_stderr(settings, proc.pid, bytes(pending))


def _log_stderr(settings: ChildSettings, pid: int, line: bytes) -> None:
    limit = settings.max_stderr_line_bytes
    text = line[:limit].decode("utf-8", errors="replace").rstrip("\r")
    if len(line) > limit:
        log.info("upstream.stderr", upstream=settings.upstream, pid=pid, line=text, truncated=True)
    else:
        log.info("upstream.stderr", upstream=settings.upstream, pid=pid, line=text)


async def exited(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    try:
        async with asyncio.timeout(timeout):
            await proc.wait()
    except TimeoutError:
        return False
    return True


def _signal_group(proc: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    """Signal the child's process group (its pid: it was started in a new session). Only while the child is
    not yet reaped, so the group id cannot belong to anyone else."""
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:  # the group id is not ours after all: signal the child alone
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


__all__ = [
    "INHERITED_ENV",
    "ChildSettings",
    "child_env",
    "describe_exit",
    "exited",
    "read_stderr",
    "spawn",
    "terminate",
]
