"""A stdio upstream's child process, whatever is spoken over it: started, its stderr logged, and stopped.

Shared by the legacy stdio session (stdio.py: one child per session, `initialize` first) and the 2026-07-28
stdio client (modern_stdio.py: one child per upstream, no handshake).

- **Start**: `command` + `args`, in `cwd` (else the proxy's), in a process group of its own. The environment
  is minimal: only the variables named in `INHERITED_ENV` are taken from the proxy's environment (so its
  own `MRTR_PROXY_*` settings and sealing keys never reach the child), and the upstream's `env` goes over
  them. `command` is looked up on that `PATH`. stdout reads are bounded by `max_line_bytes`.
- **stderr** goes to the structured log line by line (`upstream.stderr`, with the upstream name and the
  child's pid), each line cut at `max_stderr_line_bytes`; a child started for the era probe holds it until
  its era is known (`ProbationStderr`: a legacy server's complaint at the probe is one debug line).
- **Stop**: stdin is closed (a well-behaved server exits on EOF), then SIGTERM to the process group, then
  SIGKILL, each after a bounded wait; the child is always waited for, so no zombie is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Mapping
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
_HELD_STDERR: Final = 200  # stderr lines a child on probation keeps, to log if the probe keeps it
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


async def read_stderr(
    proc: asyncio.subprocess.Process,
    settings: ChildSettings,
    on_line: Callable[[bytes], None] | None = None,
) -> None:
    """Log each stderr line (or hand it to `on_line`, which logs it with `log_stderr` or holds it); a line
    over the limit is cut there, the rest of it dropped."""
    assert proc.stderr is not None
    limit = settings.max_stderr_line_bytes
    emit = on_line or (lambda line: log_stderr(settings, proc.pid, line))
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
                emit(line)
        if len(pending) > limit:
            if not skipping:
                emit(bytes(pending))
                skipping = True
            pending.clear()
    if pending and not skipping:
        emit(bytes(pending))


def log_stderr(settings: ChildSettings, pid: int, line: bytes) -> None:
    """One `upstream.stderr` line at info: what the child wrote, cut at `max_stderr_line_bytes`."""
    limit = settings.max_stderr_line_bytes
    text = line[:limit].decode("utf-8", errors="replace").rstrip("\r")
    if len(line) > limit:
        log.info("upstream.stderr", upstream=settings.upstream, pid=pid, line=text, truncated=True)
    else:
        log.info("upstream.stderr", upstream=settings.upstream, pid=pid, line=text)


class ProbationStderr:
    """A child's stderr while it is on probation (started for the era probe, era.py): held, not logged,
    until the era is known. A legacy server answers the 2026-07-28 server/discover with a dump of
    validation errors on stderr (FastMCP 1.30: 94 lines); that is the probe's expected answer, worth one
    debug line, not the operator's log. A child the probe keeps is released: what it held is logged then."""

    def __init__(self, settings: ChildSettings, *, held: bool) -> None:
        self._settings = settings
        self._held: list[bytes] | None = [] if held else None
        self._count = 0

    def line(self, pid: int, line: bytes) -> None:
        if self._held is None:
            log_stderr(self._settings, pid, line)
            return
        self._count += 1
        if len(self._held) < _HELD_STDERR:
            self._held.append(line)

    def release(self, pid: int) -> None:
        held, self._held = self._held, None
        for line in held or ():
            log_stderr(self._settings, pid, line)

    def ended(self, pid: int) -> None:
        """The child's stderr ended (or its reader was stopped): still held, one debug line counts it."""
        if self._held is not None and self._count:
            first = self._held[0][:200].decode("utf-8", errors="replace") if self._held else ""
            log.debug(
                "upstream.era_probe_stderr",
                upstream=self._settings.upstream,
                pid=pid,
                lines=self._count,
                first=first,
            )
        self._held = None


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
    "ProbationStderr",
    "child_env",
    "describe_exit",
    "exited",
    "log_stderr",
    "read_stderr",
    "spawn",
    "terminate",
]
