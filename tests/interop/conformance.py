"""Run the official MCP conformance suite's MRTR server scenarios against mrtr-proxy.

``@modelcontextprotocol/conformance@0.2.0-alpha.12`` (installed by ``scripts/setup-peers.sh``) has 14 server
scenarios ``input-required-result-*`` (SEP-2322, spec 2026-07-28). This module starts the legacy fixture
``tests/fixtures/conformance_legacy_server.py`` (FastMCP 1.30, asks inline), the proxy in front of it
(``mrtr-proxy serve --upstream … --listen 127.0.0.1:PORT``, a subprocess), then runs each scenario with
Node 22 (``conformance server --url <proxy>/mcp --scenario S --spec-version 2026-07-28 -o DIR``) and
reads the checks it writes to ``DIR/server-S-<timestamp>/checks.json``. Everything binds 127.0.0.1, every
wait is bounded, and every process is stopped (tests/peers.py).

From the repository root::

    .venv/bin/python tests/interop/conformance.py                # table; exit 1 if any scenario fails
    .venv/bin/python tests/interop/conformance.py --json out.json --scenario input-required-result-multi-round

or ``cd tests && ../.venv/bin/python -m interop.conformance``. From Python::

    run = await run_against_proxy()          # ConformanceRun: .results[scenario] -> ScenarioResult
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
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

SPEC_VERSION = "2026-07-28"
SCENARIO_PREFIX = "input-required-result-"
SCENARIOS: tuple[str, ...] = (
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-missing-input-response",
    "input-required-result-non-tool-request",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
)

SCENARIO_TIMEOUT_MS = 20_000  # the suite's own per-scenario limit (its requests time out after 10 s)
NODE_LIMIT_S = 45.0  # our hard limit on one `conformance server` process
# Statuses the suite emits. A scenario passes when every check is SUCCESS (or informational): FAILURE
# fails it, and so does WARNING — the suite uses WARNING for its SHOULD-level checks and still exits 0.
PASSING = frozenset({"SUCCESS", "INFO", "SKIPPED"})
_TAIL = 3000


def conformance_entry() -> Path:
    return peers.node_modules() / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


def fixture_script() -> Path:
    return peers.FIXTURES_DIR / "conformance_legacy_server.py"


def proxy_argv(upstream_url: str, port: int, config: Path | None = None) -> list[str]:
    """``mrtr-proxy serve`` from the venv running us (``python -m proxy`` if the entry point is absent);
    with `config`, that file too (its upstreams replaced by `upstream_url`)."""
    entry = Path(sys.executable).with_name("mrtr-proxy")
    head = [str(entry)] if entry.exists() else [sys.executable, "-m", "proxy"]
    extra = ["--config", str(config)] if config is not None else []
    return [*head, "serve", *extra, "--upstream", upstream_url, "--listen", f"{peers.LOOPBACK}:{port}"]


def proxy_config_argv(config: Path, port: int) -> list[str]:
    """``mrtr-proxy serve --config FILE`` with the file's own upstreams (no ``--upstream``)."""
    entry = Path(sys.executable).with_name("mrtr-proxy")
    head = [str(entry)] if entry.exists() else [sys.executable, "-m", "proxy"]
    return [*head, "serve", "--config", str(config), "--listen", f"{peers.LOOPBACK}:{port}"]


def required_peers() -> dict[str, Path]:
    return {
        "legacy python (mcp 1.30)": peers.legacy_python(),
        "node 22": peers.node_bin(),
        "@modelcontextprotocol/conformance": conformance_entry(),
    }


# --------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class Check:
    """One entry of the suite's checks.json."""

    id: str
    status: str
    description: str = ""
    error: str | None = None
    details: Any = None

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Check:
        return cls(
            id=str(raw.get("id", "?")),
            status=str(raw.get("status", "?")),
            description=str(raw.get("description", "")),
            error=raw.get("errorMessage"),
            details=raw.get("details"),
        )


@dataclass(frozen=True)
class ScenarioResult:
    scenario: str
    checks: tuple[Check, ...]
    returncode: int
    timed_out: bool
    duration_s: float
    output: str  # the suite's stdout + stderr (tail)

    @property
    def problems(self) -> tuple[Check, ...]:
        """Checks that did not pass (FAILURE and WARNING)."""
        return tuple(c for c in self.checks if c.status not in PASSING)

    @property
    def completed(self) -> bool:
        """The suite ran the scenario to its end and reported checks (no crash, no timeout)."""
        timeout = any(c.id == "scenario-timeout" for c in self.checks)
        return bool(self.checks) and not self.timed_out and not timeout

    @property
    def passed(self) -> bool:
        return self.completed and not self.problems

    @property
    def verdict(self) -> str:
        if not self.completed:
            return "ERROR"
        if self.passed:
            return "PASS"
        return "FAIL" if any(c.status == "FAILURE" for c in self.problems) else "WARN"

    def describe(self) -> str:
        lines = [f"{self.scenario}: {self.verdict} (exit {self.returncode}, {self.duration_s:.1f}s)"]
        for check in self.checks:
            lines.append(f"  [{check.status}] {check.id}" + (f": {check.error}" if check.error else ""))
            if check.status not in PASSING and check.details is not None:
                lines.append(f"      details: {json.dumps(check.details)[:_TAIL]}")
        if not self.completed:
            lines.append("  suite output:\n" + self.output)
        return "\n".join(lines)


@dataclass
class ConformanceRun:
    results: dict[str, ScenarioResult] = field(default_factory=dict)
    proxy_log: str = ""
    fixture_log: str = ""
    duration_s: float = 0.0

    def summary(self) -> str:
        width = max((len(s) for s in self.results), default=10)
        rows = [
            f"{r.verdict:5} {s:{width}}  {len(r.checks) - len(r.problems)}/{len(r.checks)} checks"
            for s, r in self.results.items()
        ]
        passed = sum(r.passed for r in self.results.values())
        rows.append(f"{passed}/{len(self.results)} scenarios passed in {self.duration_s:.1f}s")
        return "\n".join(rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "duration_s": round(self.duration_s, 2),
            "scenarios": {
                s: {"verdict": r.verdict, **{k: v for k, v in asdict(r).items() if k != "output"}}
                for s, r in self.results.items()
            },
        }


# --------------------------------------------------------------------------------------------------
# running the suite


async def list_server_scenarios(prefix: str = SCENARIO_PREFIX, *, limit_s: float = 30.0) -> list[str]:
    """The server scenarios the installed suite offers whose name starts with `prefix`."""
    run = await peers.run_once([str(peers.node_bin()), str(conformance_entry()), "list"], limit_s=limit_s)
    if run.returncode != 0:
        raise RuntimeError(f"`conformance list` failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    names: list[str] = []
    for line in run.stdout.splitlines():
        if line.startswith("Client scenarios"):
            break
        item = line.strip().removeprefix("- ").split(" ", 1)[0]
        if item.startswith(prefix):
            names.append(item)
    return names


async def list_server_scenarios_at(spec_version: str, *, limit_s: float = 30.0) -> list[str]:
    """Every server scenario the installed suite applies at `spec_version` (``conformance list --server
    --spec-version V``: cumulative for dated versions, pending ones included), in the suite's order."""
    argv = [
        str(peers.node_bin()),
        str(conformance_entry()),
        "list",
        "--server",
        "--spec-version",
        spec_version,
    ]
    run = await peers.run_once(argv, limit_s=limit_s)
    if run.returncode != 0:
        raise RuntimeError(f"`conformance list` failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    return [
        line.strip().removeprefix("- ").split(" ", 1)[0]
        for line in run.stdout.splitlines()
        if line.startswith("  - ")
    ]


async def run_scenario(
    url: str,
    scenario: str,
    *,
    spec_version: str = SPEC_VERSION,
    scenario_timeout_ms: int = SCENARIO_TIMEOUT_MS,
    limit_s: float = NODE_LIMIT_S,
    keep_dir: Path | None = None,
    force: bool = False,
) -> ScenarioResult:
    """Run one server scenario against `url` and parse the checks.json it writes. `force`: run it even if the
    suite says it is not on `spec_version`'s timeline (extension scenarios, e.g. `tasks-*`)."""
    with tempfile.TemporaryDirectory(prefix="mrtr-conformance-") as tmp:
        out = Path(tmp) / "results"
        argv = [
            str(peers.node_bin()),
            str(conformance_entry()),
            "server",
            "--url",
            url,
            "--scenario",
            scenario,
            "--spec-version",
            spec_version,
            "--timeout",
            str(scenario_timeout_ms),
            "-o",
            str(out),
            *(["--force"] if force else []),
        ]
        started = time.monotonic()
        run = await peers.run_once(argv, limit_s=limit_s, cwd=Path(tmp))
        duration = time.monotonic() - started
        raw = _read_checks(out, scenario, keep_dir)
    output = (run.stdout + run.stderr)[-_TAIL:]
    return ScenarioResult(
        scenario=scenario,
        checks=tuple(Check.parse(c) for c in raw),
        returncode=run.returncode,
        timed_out=run.timed_out,
        duration_s=duration,
        output=output,
    )


def _read_checks(out: Path, scenario: str, keep_dir: Path | None) -> list[dict[str, Any]]:
    """The checks.json the suite wrote under `out` (``server-<scenario>-<timestamp>/``), [] if none."""
    files = sorted(out.glob(f"server-{scenario}-*/checks.json"))  # `out` is this run's own directory
    if not files:
        return []
    text = files[-1].read_text()
    if keep_dir is not None:
        keep_dir.mkdir(parents=True, exist_ok=True)
        (keep_dir / f"{scenario}.checks.json").write_text(text)
    checks: list[dict[str, Any]] = json.loads(text)
    return checks


@contextlib.asynccontextmanager
async def start_fixture(script: Path | None = None) -> AsyncIterator[peers.PeerUrl]:
    """A legacy conformance fixture (FastMCP 1.30; default `fixture_script()`) on 127.0.0.1:
    ``http://127.0.0.1:PORT/mcp``."""
    peers.require_peers({"legacy python (mcp 1.30)": peers.legacy_python()})
    path = str(script or fixture_script())

    def argv(port: int) -> list[str]:
        return [str(peers.legacy_python()), path, "--host", peers.LOOPBACK, "--port", str(port)]

    async with peers.run_peer("conformance-fixture", argv, env={"PYTHONUNBUFFERED": "1"}) as peer:
        yield peers.PeerUrl(f"http://{peers.LOOPBACK}:{peer.port}/mcp", peer)


@contextlib.asynccontextmanager
async def start_proxy(upstream_url: str, config: Path | None = None) -> AsyncIterator[peers.PeerUrl]:
    """``mrtr-proxy serve`` (subprocess, ephemeral sealing key) in front of `upstream_url`, configured by
    the YAML file `config` if given."""
    async with peers.run_peer(
        "mrtr-proxy",
        lambda port: proxy_argv(upstream_url, port, config),
        env={"PYTHONUNBUFFERED": "1"},
        cwd=peers.REPO_ROOT,
    ) as peer:
        yield peers.PeerUrl(f"http://{peers.LOOPBACK}:{peer.port}/mcp", peer)


@contextlib.asynccontextmanager
async def start_proxy_config(config: Path) -> AsyncIterator[peers.PeerUrl]:
    """``mrtr-proxy serve --config FILE`` (subprocess, ephemeral sealing key) with the file's own upstreams
    (no ``--upstream``: that would replace them); yields the first upstream's ``…/mcp``, the others are at
    ``…/servers/<name>/mcp``."""
    async with peers.run_peer(
        "mrtr-proxy",
        lambda port: proxy_config_argv(config, port),
        env={"PYTHONUNBUFFERED": "1"},
        cwd=peers.REPO_ROOT,
    ) as peer:
        yield peers.PeerUrl(f"http://{peers.LOOPBACK}:{peer.port}/mcp", peer)


async def run_against_proxy(
    scenarios: Iterable[str] = SCENARIOS,
    *,
    keep_dir: Path | None = None,
    fixture: Path | None = None,
    config: Path | None = None,
    force: bool = False,
) -> ConformanceRun:
    """Fixture → proxy → each scenario in turn (each has its own `limit_s`); everything stopped after.
    `fixture` (a legacy server script) and `config` (the proxy's YAML) default to the MRTR set's."""
    peers.require_peers(required_peers())
    started = time.monotonic()
    run = ConformanceRun()
    scratch = tempfile.TemporaryDirectory(prefix="mrtr-conformance-cfg-")
    if config is None:
        # A wide gather window, so requests sent together stay one round even on a loaded CI machine
        # (multiple-input-requests sends them on two streams).
        config = Path(scratch.name) / "proxy.yaml"
        config.write_text("calls: {gather_window_ms: 300}\n")
    async with start_fixture(fixture) as upstream, start_proxy(upstream, config) as proxy_url:
        for scenario in scenarios:
            run.results[scenario] = await run_scenario(proxy_url, scenario, keep_dir=keep_dir, force=force)
        run.proxy_log = proxy_url.peer.log_text(tail=None)
        run.fixture_log = upstream.peer.log_text(tail=None)
    scratch.cleanup()
    run.duration_s = time.monotonic() - started
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenario", action="append", help="run only this scenario (repeatable)")
    parser.add_argument("--json", type=Path, help="write the parsed results here")
    parser.add_argument("--keep", type=Path, help="copy each scenario's checks.json into this directory")
    parser.add_argument("-v", "--verbose", action="store_true", help="every check of every scenario")
    args = parser.parse_args(argv)
    run = asyncio.run(run_against_proxy(args.scenario or SCENARIOS, keep_dir=args.keep))
    for result in run.results.values():
        if args.verbose or not result.passed:
            print(result.describe(), end="\n\n")
    print(run.summary())
    if args.json is not None:
        args.json.write_text(json.dumps(run.to_json(), indent=2) + "\n")
    return 0 if all(r.passed for r in run.results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
