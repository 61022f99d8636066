"""`mrtr-proxy serve | keygen | check-config | probe | migration`."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from proxy.auth.setup import AuthSetupError, prepare
from proxy.cli import glob_check
from proxy.cli import keys as cli_keys
from proxy.cli import migration as cli_migration
from proxy.cli import routes as cli_routes
from proxy.config import AuthConfig, Config, ConfigError, load_config
from proxy.handle import KeyLoadError
from proxy.observe import logs
from proxy.observe.tracing import TracingUnavailable
from proxy.probe import cli as probe_cli
from proxy.process import startup
from proxy.process.admin import AdminSetupError, prepare_admin
from proxy.process.app import create_app
from proxy.process.hardening import forbid_process_inspection
from proxy.process.listener import ListenerLimits


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mrtr-proxy", description=__doc__)
    parser.add_argument("--version", action="version", version=f"mrtr-proxy {cli_keys.version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", type=Path, help="YAML configuration file")
    serve.add_argument(
        "--upstream", help="URL of one legacy Streamable HTTP server (replaces the file's upstreams)"
    )
    check = sub.add_parser("check-config", help="validate a configuration file and print what it would serve")
    check.add_argument("file", type=Path)
    check.add_argument("--effective", action="store_true", help="print the merged configuration as YAML")
    check.add_argument(
        "--probe",
        action="store_true",
        help="ask each upstream live, in its own era, as a client that declares elicitation, sampling and "
        "roots: its era (a wrong `era` setting named), its tools; each route's merged names and clashes",
    )
    for command in (serve, check):  # check-config takes serve's overrides: --effective shows their result
        command.add_argument("--listen", help="HOST:PORT to listen on (default 127.0.0.1:8080)")
        command.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
        command.add_argument("--log-format", choices=["auto", "json", "console"])
        command.add_argument("--replica-address", help="address other replicas reach this one at")
        command.add_argument(
            "--key-file", type=Path, action="append", help="sealing key file (replaces keys.files)"
        )
    keygen = sub.add_parser("keygen", help="print a new base64 sealing key (32 random bytes)")
    keygen.add_argument("--out", type=Path, help="write it to this file (mode 0600) instead")
    keygen.add_argument("--force", action="store_true", help="with --out: replace an existing file")
    probe_cli.add_parser(sub)
    cli_migration.add_parser(sub)
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    names = ("upstream", "listen", "log_level", "log_format", "replica_address")
    out = {name: getattr(args, name, None) for name in names if getattr(args, name, None) is not None}
    if args.key_file:
        out["keys.files"] = [str(p.absolute()) for p in args.key_file]
    return out


def _auth(auth: AuthConfig) -> str:
    if auth.mode == "passthrough":
        return "passthrough (the upstream checks tokens; the client's token goes to it)"
    keys = auth.jwks_url or f"file {auth.jwks_file}"
    return f"validate (keys {keys}; upstream credential {auth.upstream_credential.source})"


def _describe(config: Config) -> str:
    lines = [f"listen {config.listen.host}:{config.listen.port} (replica {config.replica_address})"]
    for up in config.upstreams:
        where = up.url if up.url else " ".join([up.command or "", *up.args])
        first = next((u for u in config.upstreams if u.standalone), None) is up
        paths = f"/servers/{up.name}/mcp" + (
            " and /mcp" if first and not any(r.default for r in config.routes) else ""
        )
        paths = paths if up.standalone else "only through routes"
        lines.append(f"upstream {up.name}: {up.transport} {where} -> {paths}, auth {_auth(up.auth)}")
    routes = cli_routes.describe(config) + glob_check.describe(config)  # the routes', then members' rules
    return "\n".join(lines + routes + cli_routes.describe_bindings(config))


def listener_limits(config: Config) -> ListenerLimits:
    front = config.front
    return ListenerLimits(
        header_timeout_s=front.header_timeout_s,
        body_timeout_s=front.body_timeout_s,
        idle_timeout_s=front.idle_timeout_s,
        max_connections=front.max_connections,
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "probe":
        return probe_cli.run(args)
    if args.command == "migration":
        return cli_migration.run(args)
    if args.command == "keygen":
        return cli_keys.keygen(args.out, args.force)
    try:
        if args.command == "check-config":
            checked = load_config(args.file, _overrides(args))
            try:
                prepare(checked)  # the TLS files, static JWKS and service credentials it names
                prepare_admin(checked)  # the admin token file, when admin.listen is set
            except (AuthSetupError, AdminSetupError) as exc:
                print(f"mrtr-proxy: invalid configuration in {args.file}:", file=sys.stderr)
                print(str(exc), file=sys.stderr)
                return 2
            if (code := cli_keys.check_keys(checked, "check-config", yaml_out=args.effective)) is not None:
                return code
            print(cli_keys.effective_yaml(checked) if args.effective else _describe(checked))
            for line in [] if args.probe or args.effective else glob_check.unchecked(checked):
                print(line)  # said once: without --probe the policy's globs were not checked
            if args.probe:
                logs.configure("warning", "console")  # stdout is the report; the probes' info lines are noise
                lines, ok = asyncio.run(cli_routes.probe(checked))
                print("\n".join(lines))
                return 0 if ok else 1
            return 0
        config = load_config(args.config, _overrides(args))
    except ConfigError as exc:
        if args.command == "serve" and startup.json_wanted(args.log_format, args.config, os.environ):
            startup.config_failed(str(exc.source) if exc.source else None, str(exc))
            return 2
        print(
            f"mrtr-proxy: invalid configuration{f' in {exc.source}' if exc.source else ''}:", file=sys.stderr
        )
        print(str(exc), file=sys.stderr)
        return 2
    logs.configure(config.logging.level, config.logging.format)
    startup.capture_process_output(config.logging.level)  # one logging path: JSON lines when JSON
    if (code := cli_keys.check_keys(config, "serve")) is not None:
        return code
    forbid_process_inspection()  # before any stdio child starts: /proc/<pid>/environ, mem, fd: root only
    try:
        app = create_app(config, handle_signals=True)
        admin = prepare_admin(config)  # the operator's listener (proxy/process/admin.py), when configured
    except (KeyLoadError, TracingUnavailable, AuthSetupError, AdminSetupError) as exc:
        startup.fatal(str(exc))
        return 2
    startup.announce(_describe(config))
    return startup.run(app, config, listener_limits(config), admin)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
