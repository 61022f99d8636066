"""`mrtr-proxy serve` from start to exit: one logging path, fatal start-up errors, signals and the drain.

With `logging.format: json` (or `auto` off a terminal) every line the process writes is a JSON object: the
start-up banner, the standard library's logging and `warnings` (logs.capture_stdlib), asyncio's own error
reports (its exception handler), exceptions Python can only report as unraisable, and a fatal start-up error
such as a port already taken — one line naming the setting (`listen.port`, `replica.peer_port`,
`admin.listen`) and exit status 2, no traceback. An invalid configuration is one line too (exit status 2)
when JSON was asked for by `--log-format`, `MRTR_PROXY_LOG_FORMAT` or the file.

Signals: the first SIGTERM or SIGINT drains (app.drain); a second one during the drain forces the exit at
once, with status 128 + the signal's number (130 for a second Ctrl-C).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog
import yaml
from aiohttp import web

from proxy.config import Config
from proxy.observe import logs
from proxy.observe.metrics import METRICS
from proxy.process.admin import AdminListener
from proxy.process.app import drain
from proxy.process.appstate import FRONT_DOOR
from proxy.process.listener import GuardedSite, ListenerCollector, ListenerGuard, ListenerLimits

log = structlog.get_logger("proxy.startup")

SHUTDOWN_TIMEOUT_S = 10.0  # < the chart's drain.terminationMarginSeconds (15): exit before SIGKILL
START_FAILED = 1  # the exit status when the proxy crashes (a bug)
OPERATOR_ERROR = 2  # a setting the process cannot honour: configuration errors, a port already taken


GC_YOUNG = 2_000  # net allocations between two collections of the young generation (Python 3.11's: 700)


def fatal(message: str, **fields: Any) -> None:
    """A start-up error, said once: a JSON line when logs are JSON, else `mrtr-proxy: message` on stderr."""
    if logs.renders_json():
        log.error("startup.failed", error=message, **fields)
    else:
        print(f"mrtr-proxy: {message}", file=sys.stderr, flush=True)


def _reason(exc: OSError) -> str:
    """Why a bind failed, without the address again (asyncio's strerror repeats it): `address in use`."""
    if isinstance(exc.errno, int) and exc.errno > 0:
        return os.strerror(exc.errno).lower()
    return exc.strerror or str(exc)


def json_wanted(flag: str | None, config_file: Path | None, environ: Mapping[str, str]) -> bool:
    """Before any configuration is valid: did the operator ask for JSON logs, by flag, variable or the file
    itself? Then a configuration error is one JSON line too (the rest of the file may be what is wrong)."""
    wanted = flag or environ.get("MRTR_PROXY_LOG_FORMAT")
    if wanted is None and config_file is not None:
        with contextlib.suppress(OSError, yaml.YAMLError, AttributeError, TypeError):
            wanted = yaml.safe_load(config_file.read_text()).get("logging", {}).get("format")
    return wanted == "json"


def config_failed(source: str | None, problems: str) -> None:
    """An invalid configuration at `serve`'s start, as one JSON line (see `json_wanted`)."""
    logs.configure("info", "json")
    log.error("startup.failed", error="invalid configuration", source=source, problems=problems.splitlines())


def announce(summary: str) -> None:
    """The start-up banner (what is served, where): a log line when logs are JSON, else plain text."""
    if logs.renders_json():
        log.info("serving", summary=summary.splitlines())
    else:
        print(summary, file=sys.stderr, flush=True)


def capture_process_output(level: str) -> None:
    """The standard library's logging, `warnings` and unraisable exceptions through structlog."""
    logs.capture_stdlib(level)
    sys.unraisablehook = _unraisable


def _unraisable(unraisable: Any) -> None:
    exc = unraisable.exc_value
    log.error(
        "python.unraisable",
        message=unraisable.err_msg or "Exception ignored",
        object=repr(unraisable.object)[:200],
        exc_info=(type(exc), exc, unraisable.exc_traceback) if exc is not None else None,
    )


def exception_handler(_: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's own reports (a task or future whose exception nobody retrieved, a callback that raised)."""
    exc = context.get("exception")
    fields: dict[str, Any] = {"message": context.get("message", "")}
    for name in ("future", "task", "handle"):
        if name in context:
            fields[name] = repr(context[name])[:200]
    if isinstance(exc, BaseException):
        fields["error"] = f"{type(exc).__name__}: {exc}"
        if exc.__traceback__ is not None:
            fields["exc_info"] = (type(exc), exc, exc.__traceback__)
    log.error("asyncio.error", **fields)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed (a dependency on Linux and macOS): the proxy spends most of its time in
    socket I/O, which libuv does several times cheaper than asyncio's selector loop."""
    try:
        import uvloop  # noqa: PLC0415 - optional at run time
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(
    app: web.Application, config: Config, limits: ListenerLimits, admin: AdminListener | None = None
) -> int:
    """Serve until a signal, then drain; the exit status (0; OPERATOR_ERROR when it cannot listen;
    START_FAILED on a bug)."""
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            return runner.run(serve(app, config, limits, admin))
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers were installed
        log.warning("shutdown.interrupted", phase="start-up")
        return 128 + signal.SIGINT
    except Exception:  # a bug: one log line (JSON when the logs are), its traceback inside it
        log.exception("proxy.crashed")
        return START_FAILED


async def serve(
    app: web.Application, config: Config, limits: ListenerLimits, admin: AdminListener | None = None
) -> int:
    """Run until SIGTERM or SIGINT, then drain (readiness off, parked calls finished or handed over). The
    admin listener (proxy/process/admin.py), when configured, starts once the main sites listen."""
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(exception_handler)
    guard = ListenerGuard(limits)  # slowloris: deadlines and a connection cap
    app[FRONT_DOOR].watch = guard  # told of each request by the one middleware: no hop of its own
    # handler_cancellation: a client closing its response stream cancels its request and the upstream call
    # shutdown_timeout: after the drain, requests still in flight are ones answered at once (refusals, rounds
    # cut with -31011) or streams that end with the drain; never the aiohttp default of 60 s of silence.
    runner = web.AppRunner(
        app,
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=SHUTDOWN_TIMEOUT_S,
        keepalive_timeout=3600,  # the guard's front.idle_timeout_s cuts idle connections, and counts it
    )
    await runner.setup()
    admin_runner: web.AppRunner | None = None
    try:
        app[METRICS].registry.register(ListenerCollector(guard.stats))
        ports = [(config.listen.port, "listen.port")]
        if config.replica.peer_port is not None:  # where other replicas forward retries to this one
            ports.append((config.replica.peer_port, "replica.peer_port"))
        for port, setting in ports:
            try:
                await GuardedSite(runner, config.listen.host, port, guard).start()
            except OSError as exc:  # the setting first: the operator fixes a setting, not an address
                where = f"{config.listen.host}:{port}"
                fatal(f"cannot listen on {where} ({setting}): {_reason(exc)}", errno=exc.errno)
                return OPERATOR_ERROR
        if admin is not None:
            try:
                admin_runner = await admin.start(app)
            except OSError as exc:
                where = f"{admin.host}:{admin.port}"
                fatal(f"cannot listen on {where} (admin.listen): {_reason(exc)}", errno=exc.errno)
                return OPERATOR_ERROR
        # What start-up built (modules, the app, aiohttp's tables) lives as long as the process: out of the
        # collector's way, so its full collections walk what requests made, not all of that every time. And
        # a young generation of 2,000 objects rather than 700 (Python 3.13's own default): at 700 the
        # collector was ~6% of the proxy's instructions per pass-through call (per call: 1.411M instructions
        # at 700, 1.375M at 2,000, 1.362M at 10,000, where up to 10,000 objects of cyclic garbage could wait,
        # which parked calls' memory would show; bench/hotpath_ir.py).
        gc.collect()
        gc.freeze()
        gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
        await _until_signalled(app, loop)
        return 0
    finally:
        if admin_runner is not None:
            await admin_runner.cleanup()
        await runner.cleanup()
        await guard.close()


async def _until_signalled(app: web.Application, loop: asyncio.AbstractEventLoop) -> None:
    stop = asyncio.Event()
    seen: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        seen.append(sig)
        if len(seen) == 1:
            log.info("shutdown.signal", signal=sig.name)
            stop.set()
            return
        # A second signal: the operator wants out now, not after the drain grace.
        log.warning("shutdown.forced", signal=sig.name, reason="a second signal during the drain")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    await stop.wait()
    await drain(app)
