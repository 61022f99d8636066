"""`make soak`: a real proxy process in front of FastMCP 1.30, with short TTLs, under mixed traffic for a
while; fails when the proxy's memory or descriptors grow, when what it holds does not drain, or on any
unexpected answer (docs/performance.md "Soak")::

    python -m soak.run --seconds 600     # the Makefile's `make soak` (SOAK_S=600)

Phases: warm-up (the first minute; a run shorter than 6 minutes: its first sixth) and a drain (no traffic
until nothing is held), traffic, the upstream stopped (calls meanwhile must get -31001) and started again on
the same port, traffic, the last drain. The RSS and descriptor readings compared are taken in the same state,
after a drain with the soak's client connections closed: after warm-up, and at the end. Drains do not count
as traffic time. Every process started is
stopped at the end, also on failure and Ctrl-C. Only 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

if __package__ in (None, ""):  # `python soak/run.py`: the repository root is where `soak` is found
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from soak import procs, traffic, watch
from soak.report import Readings, Tally, summary, verdicts

PARKED_TTL_S = 8  # calls.parked_ttl_s: an abandoned round is reaped this long after it parked
IDLE_TTL_S = 10  # pool.idle_ttl_s: an idle upstream session (a legacy client's left open too) is closed
WORKERS = 4  # concurrent clients, one principal each
PACE_S = 0.02  # a worker's pause between two sequences: the soak measures leaks, not throughput
OUTAGE_CALLS = 3  # calls by each of workers 0 and 1 while the upstream is down
QUIET_S = 6.0  # readings taken after a drain, for longer than the proxy keeps an idle upstream connection
DRAIN_LIMIT_S = PARKED_TTL_S + IDLE_TTL_S + 40
TOKEN = "soak-admin-token-0123456789abcdef"  # noqa: S105 - the soak's own admin listener, on 127.0.0.1


@dataclass(frozen=True)
class Result:
    failures: list[str]
    text: str
    logs: Path | None  # kept when the soak failed


def warmup_s(seconds: float) -> float:
    return min(60.0, seconds / 6)


def _config(directory: Path, port: int, admin_port: int, upstream_port: int) -> Path:
    (directory / "admin-token").write_text(TOKEN + "\n")
    config = {
        "listen": {"host": procs.LOOPBACK, "port": port},
        "logging": {"level": "info", "format": "json"},
        "calls": {"parked_ttl_s": PARKED_TTL_S},
        "admin": {"listen": f"{procs.LOOPBACK}:{admin_port}", "token_file": str(directory / "admin-token")},
        "upstreams": [
            {
                "name": "fastmcp",
                "url": f"http://{procs.LOOPBACK}:{upstream_port}/mcp",
                "era": "legacy",
                "pool": {"idle_ttl_s": IDLE_TTL_S},
            }
        ],
    }
    path = directory / "soak.yaml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    return path


class Soak:
    """One soak: its two processes, its clients' traffic by phase, and what it read of the proxy."""

    def __init__(self, seconds: float, directory: Path, source: Path) -> None:
        self.seconds = seconds
        self.tally = Tally()
        self.upstream = procs.upstream(directory)
        port, admin_port = procs.free_port(), procs.free_port()
        config = _config(directory, port, admin_port, self.upstream.port)
        self.proxy = procs.proxy(directory, config, port, source)
        self.url = f"http://{procs.LOOPBACK}:{port}/mcp"
        self.admin_url = f"http://{procs.LOOPBACK}:{admin_port}"
        self.began = time.monotonic()
        self.peak_rss = 0
        self.next_n = [i * 3 for i in range(WORKERS)]  # each worker starts elsewhere in the mix

    def at(self) -> float:
        return time.monotonic() - self.began

    async def _one(self, ctx: traffic.Ctx, phase: str, kind: str, run: traffic.Kind) -> None:
        try:
            outcome = await asyncio.wait_for(run(ctx), traffic.TIMEOUT_S + 5)
        except traffic.Unexpected as exc:
            self.tally.bad(self.at(), phase, kind, str(exc))
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            self.tally.bad(self.at(), phase, kind, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # an answer of a shape the checks did not foresee: unexpected too
            self.tally.bad(self.at(), phase, kind, f"{type(exc).__name__} reading the answer: {exc}")
        else:
            self.tally.ok(phase, kind, outcome)

    async def _worker(self, http: aiohttp.ClientSession, index: int, phase: str, until: float) -> None:
        ctx = traffic.Ctx(http, self.url, f"soak-user-{index}", self.next_n[index])
        mix = traffic.MIX
        for _ in range(1_000_000):  # bounded in count as well as in time
            if self.at() >= until:
                break
            kind, run = mix[ctx.n % len(mix)]
            await self._one(ctx, phase, kind, run)
            ctx.n += 1
            await asyncio.sleep(PACE_S)
        self.next_n[index] = ctx.n  # the next phase goes on through the mix where this one stopped

    async def traffic(self, phase: str, duration_s: float) -> None:
        """WORKERS clients for duration_s; their connections closed after."""
        until = self.at() + duration_s
        async with aiohttp.ClientSession() as http:
            await asyncio.gather(*(self._worker(http, i, phase, until) for i in range(WORKERS)))
        self.sample()

    def sample(self) -> watch.Sample:
        reading = watch.sample(self.proxy.pid, self.began)
        self.peak_rss = max(self.peak_rss, reading.rss_kib)
        return reading

    async def quiet_sample(self) -> watch.Sample:
        """The proxy with no traffic and no client connection, read every half second for QUIET_S: the
        fewest descriptors seen (an upstream connection is kept 4 s idle after its session's DELETE:
        proxy/upstream/lean_http.py IDLE_TTL), the last RSS."""
        fewest = self.sample().fds
        for _ in range(int(QUIET_S / 0.5)):
            await asyncio.sleep(0.5)
            reading = self.sample()
            fewest = min(fewest, reading.fds)
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(procs.fd_kinds(self.proxy.pid).items()))
        return dataclasses.replace(reading, fds=fewest, fd_kinds=kinds)

    async def restart_upstream(self) -> None:
        """Stop FastMCP, check that calls meanwhile get -31001, start it again on the same port.

        Before it, each worker's principal is left holding two idle upstream sessions (two calls at once).
        During it, workers 0 and 1 call (and must get -31001); 2 and 3 sit idle, as issue 41's idle client
        did. After it, each worker's first request, on sessions the new process never heard of, is a
        tools/list (0 and 2) or a tools/call (1 and 3): all four must be answered as if nothing had
        happened, and each combination is counted under its own name."""
        async with aiohttp.ClientSession() as http:
            for i in range(WORKERS):
                ctx = traffic.Ctx(http, self.url, f"soak-user-{i}", i)
                await self._one(ctx, "before the restart", "two calls at once", traffic.two_at_once)
        self.upstream.stop()
        async with aiohttp.ClientSession() as http:
            for i in range(2 * OUTAGE_CALLS):
                ctx = traffic.Ctx(http, self.url, f"soak-user-{i % 2}", i)
                await self._one(ctx, "outage", "call during the outage", traffic.during_outage)
        await self.upstream.start()
        async with aiohttp.ClientSession() as http:
            for i in range(WORKERS):
                ctx = traffic.Ctx(http, self.url, f"soak-user-{i}", i)
                what, first = ("call", traffic.passthrough) if i % 2 else ("tools/list", traffic.tools_list)
                during = "idle through the outage" if i >= 2 else "called during the outage"
                await self._one(ctx, "recovery", f"first {what} after the restart ({during})", first)

    async def sampler(self) -> None:
        """An RSS reading every 2 s while the soak runs, for the peak (bounded by the soak's own length)."""
        for _ in range(int(self.seconds) + 600):
            try:
                self.sample()
            except OSError:  # the proxy is gone: the soak's own readings say so
                return
            await asyncio.sleep(2.0)

    async def run(self) -> Readings:
        await self.upstream.start()
        await self.proxy.start()
        self.began = time.monotonic()
        start = self.sample()
        sampler = asyncio.get_running_loop().create_task(self.sampler())
        try:
            warm = warmup_s(self.seconds)
            await self.traffic("warm-up", warm)
            warm_held, warm_waited = await self.drain()
            warm_sample = await self.quiet_sample()
            await self.traffic("steady", (self.seconds - warm) / 2)
            await self.restart_upstream()
            await self.traffic("after restart", (self.seconds - warm) / 2)
            held, waited = await self.drain()
            end = await self.quiet_sample()
        finally:
            sampler.cancel()
        if self.proxy.popen is None or self.proxy.popen.poll() is not None:
            raise procs.StartError("the proxy exited during the soak")
        drains = (("after warm-up", warm_held, warm_waited), ("at the end", held, waited))
        return Readings(start, warm_sample, end, self.peak_rss, drains)

    async def drain(self) -> tuple[watch.Held, float]:
        """No traffic until the proxy holds nothing (at most DRAIN_LIMIT_S): the readings compared are
        taken in this same state, after warm-up and at the end."""
        async with aiohttp.ClientSession() as http:
            return await watch.Admin(http, self.admin_url, TOKEN).until_drained(DRAIN_LIMIT_S)

    def read_log(self) -> tuple[list[str], dict[str, list[str]]]:
        """What fails the soak in the proxy's log (an unhandled request, an HTTP 500), and its warning and
        error lines by request id (to explain an unexpected answer)."""
        problems: list[str] = []
        unhandled = served_500 = 0
        notes: dict[str, list[str]] = {}
        if not self.proxy.log.exists():
            return problems, notes
        for line in self.proxy.log.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            unhandled += entry.get("event") == "request.unhandled"
            served_500 += entry.get("event") == "request" and entry.get("status") == 500
            if entry.get("level") in ("warning", "error") and isinstance(entry.get("request_id"), str):
                said = {k: v for k, v in entry.items() if k not in ("request_id", "timestamp")}
                notes.setdefault(entry["request_id"], []).append(json.dumps(said)[:500])
        if unhandled:
            problems.append(f"{unhandled} request.unhandled lines in the proxy's log")
        if served_500:
            problems.append(f"{served_500} HTTP 500 answers in the proxy's log")
        return problems, notes


async def soak(
    seconds: float, keep_logs: bool = False, source: Path = procs.ROOT, directory: Path | None = None
) -> Result:
    """The whole soak: start, traffic, drain, stop everything; the verdicts and the summary. The logs go
    to `directory` (kept), else to a temporary one removed unless the soak failed or keep_logs."""
    if directory is not None:
        keep_logs = True
    directory = directory or Path(tempfile.mkdtemp(prefix="mrtr-soak-"))
    run = Soak(seconds, directory, source)
    readings: Readings | None = None
    problems: list[str] = []
    try:
        readings = await run.run()
    except (procs.StartError, aiohttp.ClientError, OSError) as exc:
        problems.append(f"{type(exc).__name__}: {exc}")
    except asyncio.CancelledError:  # Ctrl-C (or TERM): the processes are stopped below, the logs kept
        print(f"soak: interrupted; logs: {directory}", file=sys.stderr)
        raise
    finally:
        run.proxy.stop()
        run.upstream.stop()
    in_log, notes = run.read_log()
    problems += in_log
    failures = verdicts(run.tally, readings, problems)
    header = (
        f"soak: {seconds:g}s of traffic ({WORKERS} clients), warm-up {warmup_s(seconds):g}s, "
        f"parked_ttl_s {PARKED_TTL_S}, idle_ttl_s {IDLE_TTL_S}; upstream FastMCP 1.30, restarted midway; "
        f"proxy from {source}"
    )
    keep = keep_logs or bool(failures)
    if not keep:
        shutil.rmtree(directory, ignore_errors=True)
    text = summary(run.tally, readings, failures, header, notes)
    if keep:
        text += f"\nlogs: {directory}"
    return Result(failures, text, directory if keep else None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="traffic time (default 600)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the proxy's and upstream's logs")
    parser.add_argument(
        "--proxy-source",
        type=Path,
        default=procs.ROOT,
        help="the checkout whose proxy/ package is run (default: this one), e.g. a branch's worktree",
    )
    args = parser.parse_args()
    # Ctrl-C, and a TERM the same way, stop every process started (even when started with SIGINT ignored,
    # as a shell does for a background job).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        result = asyncio.run(soak(args.seconds, args.keep_logs, args.proxy_source.resolve()))
    except KeyboardInterrupt:
        print("soak: interrupted; every process it started was stopped", file=sys.stderr)
        return 130
    print(result.text)
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
