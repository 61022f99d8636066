"""Key and operator helpers of the CLI: `keygen --out`, `--key-file`, key checks at start and in
`check-config`, warnings about unknown `MRTR_PROXY_*` variables, `--version`, `check-config --effective`."""

from __future__ import annotations

import dataclasses
import enum
import os
import stat
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import structlog
import yaml

from proxy.cluster.keys import configured_staged_keys
from proxy.config import Config
from proxy.config.load import ENV_PREFIX, SHORTCUTS
from proxy.config.schema import wildcard_host
from proxy.handle import KeyLoadError, generate_key_b64
from proxy.observe import logs
from proxy.upstream.era import fixed_verdict

log = structlog.get_logger("proxy.cli")

KNOWN_ENV = tuple(ENV_PREFIX + name.upper() for name in SHORTCUTS)
REDACTED = "<redacted>"
# Settings whose value may be a secret: shown as REDACTED by `check-config --effective`.
_SECRET_NAMES = ("token", "secret", "password", "credential", "authorization", "cookie", "api_key", "apikey")


def version() -> str:
    try:
        return metadata.version("mrtr-proxy")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree without install
        return "0+unknown"


def write_key_file(path: Path, *, force: bool = False) -> None:
    """Write a new key to `path`, mode 0600; refuses an existing file unless `force`. Raises OSError."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)  # also when --force replaced a file with a wider mode
        os.write(fd, (generate_key_b64() + "\n").encode("ascii"))
    finally:
        os.close(fd)


def unknown_env(environ: Mapping[str, str], config: Config) -> list[str]:
    """`MRTR_PROXY_*` variables the proxy does not read (a typo is otherwise silently ignored); variables
    the configuration names (`keys.env`, `upstream_credential.env`, e.g. `MRTR_PROXY_KEY_NEXT`) count."""
    named = {*KNOWN_ENV, *config.keys.env, *(up.auth.upstream_credential.env for up in config.upstreams)}
    return sorted(k for k in environ if k.startswith(ENV_PREFIX) and k not in named)


def key_problems(config: Config, environ: Mapping[str, str]) -> tuple[list[str], int]:
    """What is wrong with the configured key sources, as `keys.<section>: reason` lines (never key text),
    and how many keys load (read once)."""
    problems = [
        f"keys.env: environment variable {name} is unset or empty"
        for name in config.keys.env
        if not environ.get(name, "").strip()
    ]
    count = 0
    try:
        count = len(configured_staged_keys(config, environ))
    except KeyLoadError as exc:
        problems.append(f"keys: {exc}")
    return problems, count


def loose_key_files(config: Config) -> list[str]:
    """Configured key files others can read: world access, or group access for a group this process is
    not in (`chmod 600` them)."""
    paths = list(config.keys.files)
    for directory in config.keys.dirs:
        try:
            paths += sorted(p for p in directory.iterdir() if not p.name.startswith(".") and p.is_file())
        except OSError:
            continue
    own_groups = {os.getgid(), *os.getgroups()}
    loose = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        # Group access counts unless the group is one this process is in (the chart's 0440 + fsGroup).
        if st.st_mode & stat.S_IRWXO or (st.st_mode & stat.S_IRWXG and st.st_gid not in own_groups):
            loose.append(f"{path} (mode {stat.S_IMODE(st.st_mode):04o})")
    return loose


def _plain(value: Any, name: str = "") -> Any:
    where = name.lower().endswith(("_file", "_env", "_header", "source"))  # names where a secret is, not it
    secret_name = (
        not where and any(w in name.lower() for w in _SECRET_NAMES) and value not in (None, "", {}, ())
    )
    if secret_name and not isinstance(value, Mapping | tuple | list) and not dataclasses.is_dataclass(value):
        return REDACTED
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping | MappingProxyType):
        return {str(k): _plain(v, f"{name}.{k}" if name == "headers" else str(k)) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v, name) for v in value]
    if isinstance(value, str) and "://" in value:
        return _redact_url(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _redact_url(url: str) -> str:
    """Credentials in a URL (`user:pass@`, `?token=`) redacted."""
    parts = urlsplit(url)
    if parts.password is not None or parts.username is not None:
        parts = parts._replace(
            netloc=f"{REDACTED}@{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"
        )
    if parts.query:
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        safe = [
            (k, REDACTED if any(w in k.lower() for w in (*_SECRET_NAMES, "key", "sig")) else v)
            for k, v in pairs
        ]
        parts = parts._replace(query=urlencode(safe, safe="<>"))
    return urlunsplit(parts)


def effective_yaml(config: Config) -> str:
    """The merged configuration as YAML. Header values and anything named like a secret are redacted
    (the file holds no key material: keys are only named)."""
    plain = _plain(config)
    for up, configured in zip(plain.get("upstreams", []), config.upstreams, strict=True):
        up["headers"] = {k: REDACTED for k in up.get("headers") or {}}
        up["env"] = {k: REDACTED for k in up.get("env") or {}}
        fixed = fixed_verdict(configured)  # the era the transport decides (sse: legacy); auto: probed
        up["era"] = fixed.era if fixed is not None else configured.era
    text: str = yaml.safe_dump(plain, sort_keys=False, default_flow_style=False)
    return text


def keygen(out: Path | None, force: bool) -> int:
    """`mrtr-proxy keygen [--out FILE [--force]]`."""
    if out is None:
        print(generate_key_b64())
        return 0
    try:
        write_key_file(out, force=force)
    except FileExistsError:
        print(f"mrtr-proxy: {out} exists; not replaced (--force replaces it)", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mrtr-proxy: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"mrtr-proxy: wrote a new key to {out} (mode 0600)", file=sys.stderr)
    return 0


def check_keys(
    config: Config, command: str, environ: Mapping[str, str] | None = None, *, yaml_out: bool = False
) -> int | None:
    """Start-up checks of `serve` and `check-config`: exit code 2 on a key problem (None: go on); warnings
    for key files others can read and unknown `MRTR_PROXY_*` variables. Never prints key material. With
    `yaml_out` (`check-config --effective`) stdout is YAML only, so the keys note goes to stderr too."""
    env = os.environ if environ is None else environ
    for name in unknown_env(env, config):
        _warn(command, "config.unknown_env", f"{name} is not a setting (known: {', '.join(KNOWN_ENV)})")
    if config.replica.address is None and wildcard_host(config.replica_address):
        _warn(
            command,
            "config.replica_address_wildcard",
            f"the replica address is {config.replica_address} (from listen.host), which no other replica can "
            "reach: "
            + (
                "replica.peers is set, so retries forwarded here and key checks will fail"
                if config.replica.peers
                else "fine for a single replica"
            )
            + "; set replica.address (this replica's own IP or name) before running more than one",
        )
    for path in loose_key_files(config):
        _warn(command, "keys.file_readable_by_others", f"key file {path} is readable by others: chmod 600 it")
    problems, count = key_problems(config, env)
    if problems:
        if command == "serve" and logs.renders_json():  # one logging path (process/startup.py): one JSON line
            log.error("startup.failed", error="invalid key configuration", problems=problems)
            return 2
        print("mrtr-proxy: invalid key configuration:", file=sys.stderr)
        print("\n".join(problems), file=sys.stderr)
        return 2
    if command == "check-config":
        what = f"{count} key(s) loaded" if count else "no key configured: an ephemeral key at start"
        print(f"keys: {what}", file=sys.stderr if yaml_out else sys.stdout)
    return None


def _warn(command: str, event: str, message: str) -> None:
    if command == "check-config":  # stdout is the report (or the YAML of --effective)
        print(f"mrtr-proxy: warning: {message}", file=sys.stderr)
    else:
        log.warning(event, message=message)
