"""`mrtr-proxy probe TARGET`: argument parsing and the exit status (0 frontable, 1 not, 2 bad usage)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from proxy.probe import report
from proxy.probe.run import Options, probe
from proxy.probe.verdicts import cannot_front


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "probe",
        help="report how an MCP server (legacy, 2026-07-28, or both) would behave behind the proxy, with a "
        "ready upstream block",
        description="Asks server/discover, then connects as a legacy client (never calls a tool unless "
        "--call is given). TARGET is an "
        "http(s) URL (…/mcp or …/sse) or, after --, a stdio server's command line.",
    )
    parser.add_argument("target", nargs="*", help="URL, or -- COMMAND ARGS… for a stdio server")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--header", action="append", default=[], help="'Name: value' sent on every HTTP request"
    )
    parser.add_argument(
        "--env", action="append", default=[], help="NAME=value for a stdio server (it inherits little else)"
    )
    parser.add_argument("--call", metavar="NAME", help="also call this tool (tools have side effects)")
    parser.add_argument("--args", metavar="JSON", default="{}", help="arguments for --call (a JSON object)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per step (default 10)")


def run(args: argparse.Namespace) -> int:
    try:
        options = _options(args)
    except ValueError as exc:
        print(f"mrtr-proxy probe: {exc}", file=sys.stderr)
        return 2
    findings = asyncio.run(probe(options))
    print(
        report.to_json_text(findings) if args.json else report.to_text(findings),
        end="" if not args.json else "\n",
    )
    if cannot_front(findings):
        print(f"mrtr-proxy probe: {findings.error or 'this server cannot be fronted'}", file=sys.stderr)
        return 1
    return 0


def _options(args: argparse.Namespace) -> Options:
    target: list[str] = list(args.target)
    if not target:
        raise ValueError("give a URL, or -- COMMAND ARGS… for a stdio server")
    try:
        arguments = json.loads(args.args)
    except ValueError:
        raise ValueError(f"--args is not JSON: {args.args!r}") from None
    if not isinstance(arguments, dict):
        raise ValueError("--args must be a JSON object")
    if args.timeout <= 0:
        raise ValueError("--timeout must be positive")
    step = min(args.timeout, 20.0)
    common: dict[str, Any] = {
        "headers": parse_headers(args.header),
        "env": parse_env(args.env),
        "call": args.call,
        "call_arguments": arguments,
        "step_s": step,
    }
    if len(target) == 1 and target[0].startswith(("http://", "https://")):
        return Options(url=target[0], **common)
    return Options(command=tuple(target), **common)


def parse_env(values: Sequence[str]) -> dict[str, str]:
    """`--env NAME=value` → {NAME: value}; raises ValueError naming a bad one."""
    out: dict[str, str] = {}
    for raw in values:
        name, sep, value = raw.partition("=")
        if not sep or not name:
            raise ValueError(f"--env {raw!r}: expected NAME=value")
        out[name] = value
    return out


def parse_headers(values: Sequence[str]) -> dict[str, str]:
    """`--header 'Name: value'` → {Name: value}; raises ValueError naming a bad one."""
    out: dict[str, str] = {}
    for raw in values:
        name, sep, value = raw.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--header {raw!r}: expected 'Name: value'")
        out[name.strip()] = value.strip()
    return out
