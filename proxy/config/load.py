"""Reading: YAML file, then ``MRTR_PROXY_*`` variables, then CLI overrides; validate; build the model."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from .model import (
    MODERN_PROTOCOL_VERSION,
    PROTOCOL_VERSIONS,
    AdminConfig,
    AuthConfig,
    CallsConfig,
    Config,
    ConfigError,
    FrontConfig,
    KeysConfig,
    ListenConfig,
    LoggingConfig,
    MetricsConfig,
    MigrationConfig,
    PoolConfig,
    PrincipalConfig,
    ReplicaConfig,
    RouteConfig,
    RouteMember,
    StaticRoot,
    TasksConfig,
    TimeoutsConfig,
    TlsConfig,
    ToolPolicy,
    TracingConfig,
    UpstreamConfig,
    UpstreamCredential,
)
from .schema import path_order, schema_problems, schema_type, semantic_problems

ENV_PREFIX = "MRTR_PROXY_"
ALIASES = {"log_level": "logging.level", "log_format": "logging.format", "replica_address": "replica.address"}
SHORTCUTS = ("listen", "upstream", *ALIASES)  # override names besides dotted paths; env: MRTR_PROXY_<NAME>
FLAGS = {"keys.files": "key-file"}  # dotted overrides the CLI sets with a flag of another name


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and keeps dates (``2025-11-25``) as strings."""

    yaml_implicit_resolvers = {  # noqa: RUF012 -- replaces the inherited class attribute
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.MarkedYAMLError(problem=f"duplicate key {key!r}", problem_mark=key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: cannot read config file: {exc}"], path) from None
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 -- a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError([f"{where}: invalid YAML: {exc.problem or exc.context}"], path) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: invalid YAML: {exc}"], path) from None


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    """Make relative paths written in the file relative to the file's directory."""

    def fix(p: Any) -> Any:
        return str(base / p) if isinstance(p, str) and p and not Path(p).is_absolute() else p

    keys, ups, admin = raw.get("keys"), raw.get("upstreams"), raw.get("admin")
    routes = raw.get("routes")
    for route in routes if isinstance(routes, list) else ():
        auth = route.get("auth") if isinstance(route, dict) else None
        if isinstance(auth, dict) and "jwks_file" in auth:
            auth["jwks_file"] = fix(auth["jwks_file"])
    if isinstance(admin, dict) and isinstance(admin.get("token_file"), str):
        admin["token_file"] = fix(admin["token_file"])
    if isinstance(keys, dict):
        for section in ("files", "dirs"):
            if isinstance(keys.get(section), list):
                keys[section] = [fix(p) for p in keys[section]]
    for up in ups if isinstance(ups, list) else ():
        if isinstance(up, dict) and "cwd" in up:
            up["cwd"] = fix(up["cwd"])
        if not isinstance(up, dict):
            continue
        tls, auth = up.get("tls"), up.get("auth")
        sections: tuple[tuple[Any, tuple[str, ...]], ...] = (
            (tls, ("ca_file", "cert_file", "key_file")),
            (auth, ("jwks_file",)),
        )
        for section, names in sections:
            for name in names if isinstance(section, dict) else ():
                if name in section:
                    section[name] = fix(section[name])
        cred = auth.get("upstream_credential") if isinstance(auth, dict) else None
        if isinstance(cred, dict) and "file" in cred:
            cred["file"] = fix(cred["file"])


def _set(raw: dict[str, Any], dotted: str, value: Any, problems: list[str], origin: str) -> None:
    parts = dotted.split(".")
    if isinstance(value, str) and schema_type(parts) in ("integer", "number", "boolean", "array", "object"):
        try:
            value = yaml.safe_load(value)  # "100" -> 100, "[a, b]" -> list, "true" -> True
        except yaml.YAMLError:
            problems.append(f"{dotted}: cannot parse {value!r} ({origin})")
            return
    node: Any = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            if last:
                node[int(part)] = value
            node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            node = node.setdefault(part, {})
        else:
            problems.append(f"{'.'.join(parts[:i]) or '(top level)'}: cannot set {dotted} ({origin})")
            return


def _target(name: str) -> str:
    """The dotted path an override or variable sets."""
    return {"listen": "listen", "upstream": "upstreams"}.get(name) or ALIASES.get(name, name)


def _attribute(problems: list[str], origins: Mapping[str, str], path: Path | None) -> tuple[list[str], bool]:
    """Each problem names its source: a problem under a path set by a variable or flag gets that origin;
    when any does, the file's own problems say `(in FILE)`. Second value: every problem is the file's."""
    out: list[str] = []
    mine: list[bool] = []
    for line in problems:
        where = line.split(": ", 1)[0]
        origin = next(
            (
                o
                for t, o in origins.items()
                if where == t or where.startswith(t + ".") or where.startswith(t + "[")
            ),
            None,
        )
        from_file = "(from " not in line and origin is None
        mine.append(from_file)
        out.append(line if origin is None or "(from " in line else f"{line} ({origin})")
    if path is not None and not all(mine):
        out = [f"{line} (in {path})" if m else line for line, m in zip(out, mine, strict=True)]
    return out, all(mine)


def _apply(raw: dict[str, Any], name: str, value: Any, problems: list[str], origin: str) -> None:
    if name == "listen":
        host, sep, port = str(value).rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif ":" in host:
            sep = ""  # an IPv6 address needs brackets
        if not sep:
            problems.append(f"listen: expected host:port or [ipv6]:port, got {value!r} ({origin})")
            return
        base = raw["listen"] if isinstance(raw.get("listen"), dict) else {}
        raw["listen"] = {**base, "host": host, "port": int(port) if port.isdigit() else port}
    elif name == "upstream":
        raw["upstreams"] = [{"name": "default", "url": value, "transport": "streamable-http"}]
    elif name in ALIASES or "." in name:
        _set(raw, ALIASES.get(name, name), value, problems, origin)
    else:
        problems.append(f"{name}: unknown override ({origin})")


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    return value


def _section(cls: Callable[..., Any], raw: Any, paths: tuple[str, ...] = ()) -> Any:
    return cls(**{k: tuple(map(Path, v)) if k in paths else _freeze(v) for k, v in (raw or {}).items()})


def _calls(raw: Any) -> CallsConfig:
    calls = dict(raw or {})
    calls["tasks"] = _section(TasksConfig, calls.get("tasks"))
    config: CallsConfig = _section(CallsConfig, calls)
    return config


def _build_upstream(raw: dict[str, Any]) -> UpstreamConfig:
    up = {k: _freeze(v) for k, v in raw.items()}
    up.setdefault("transport", "stdio" if raw.get("command") is not None else "streamable-http")
    listed = raw.get("protocol_versions", PROTOCOL_VERSIONS)
    legacy = tuple(sorted((v for v in listed if v != MODERN_PROTOCOL_VERSION), reverse=True))
    up["protocol_versions"] = legacy or PROTOCOL_VERSIONS  # only 2026-07-28 listed: era modern (below)
    if "era" not in raw and MODERN_PROTOCOL_VERSION in listed:
        up["era"] = "auto" if legacy else "modern"
    up["static_roots"] = tuple(StaticRoot(**r) for r in raw.get("static_roots", ()))
    up["pool"] = replace(PoolConfig.defaults(up["transport"]), **_section(dict, raw.get("pool")))
    up["timeouts"] = _section(TimeoutsConfig, raw.get("timeouts"))
    up["cwd"] = None if raw.get("cwd") is None else Path(raw["cwd"])
    up["tls"] = TlsConfig(**{k: None if v is None else Path(v) for k, v in (raw.get("tls") or {}).items()})
    up["auth"] = _auth(raw.get("auth"))
    return UpstreamConfig(**up)


def _tools(raw: Any) -> ToolPolicy:
    raw = raw or {}
    scopes = {glob: tuple(names) for glob, names in (raw.get("require_scopes") or {}).items()}
    claims = {
        glob: MappingProxyType({claim: tuple(values) for claim, values in wanted.items()})
        for glob, wanted in (raw.get("require_claims") or {}).items()
    }
    return ToolPolicy(
        allow=tuple(raw.get("allow", ())),
        deny=tuple(raw.get("deny", ())),
        require_scopes=MappingProxyType(scopes),
        require_claims=MappingProxyType(claims),
    )


def _build_route(raw: dict[str, Any]) -> RouteConfig:
    """A route; a member given as a plain string is that upstream with no settings of its own."""
    members = tuple(
        RouteMember(m)
        if isinstance(m, str)
        else RouteMember(m["upstream"], m.get("prefix"), _tools(m.get("tools")))
        for m in raw["upstreams"]
    )
    route = {k: _freeze(v) for k, v in raw.items()}
    route.update(upstreams=members, tools=_tools(raw.get("tools")), auth=_auth(raw.get("auth")))
    return RouteConfig(**route)


def _auth(raw: Any) -> AuthConfig:
    auth = {k: _freeze(v) for k, v in (raw or {}).items()}
    cred = dict((raw or {}).get("upstream_credential") or {})
    if cred.get("file") is not None:
        cred["file"] = Path(cred["file"])
    auth["upstream_credential"] = UpstreamCredential(**cred)
    if auth.get("jwks_file") is not None:
        auth["jwks_file"] = Path(auth["jwks_file"])
    if (raw or {}).get("metadata") is not None:
        auth["metadata"] = MappingProxyType(dict(raw["metadata"]))  # served as JSON: kept as the file had it
    return AuthConfig(**auth)


def load_config(
    path: Path | None, overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> Config:
    """Load the configuration; raise ConfigError listing every problem.

    ``path``: YAML file (None: defaults only; relative paths in it are relative to its directory).
    ``env``: ``MRTR_PROXY_LISTEN``/``_UPSTREAM``/``_LOG_LEVEL``/``_LOG_FORMAT``/``_REPLICA_ADDRESS`` are
    read from it (None: ``os.environ``) and override the file. ``overrides`` (CLI) win over both: keys are
    dotted paths (``calls.gather_window_ms``; string values parsed as YAML where the schema wants a
    non-string) or the shortcuts ``listen`` ("host:port", "[ipv6]:port"), ``upstream`` (a URL, replaces
    the upstreams with one named "default"), ``log_level``, ``log_format``, ``replica_address``.
    None values are ignored.
    """
    raw: Any = {} if path is None else _read_yaml(path)
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        raise ConfigError([f"(top level): expected a mapping of settings (key: value), got {kind}"], path)
    if path is not None:
        _resolve_paths(raw, path.absolute().parent)
    problems: list[str] = []
    origins: dict[str, str] = {}
    env = os.environ if env is None else env
    for name in SHORTCUTS:
        if (var := ENV_PREFIX + name.upper()) in env:
            origins[_target(name)] = f"from {var}"
            _apply(raw, name, env[var], problems, f"from {var}")
    for name, value in (overrides or {}).items():
        if value is not None:
            origin = (
                f"from --{FLAGS.get(name, name).replace('_', '-')}" if name in (*SHORTCUTS, *FLAGS) else ""
            )
            origins[_target(name)] = origin or "from override"
            _apply(raw, name, value, problems, origin or "from override")
    problems += [*schema_problems(raw), *semantic_problems(raw)]
    if problems:
        lines, all_file = _attribute(sorted(dict.fromkeys(problems), key=path_order), origins, path)
        raise ConfigError(lines, path if all_file else None)
    return Config(
        upstreams=tuple(_build_upstream(up) for up in raw["upstreams"]),
        routes=tuple(_build_route(route) for route in raw.get("routes") or ()),
        listen=_section(ListenConfig, raw.get("listen")),
        replica=_section(ReplicaConfig, raw.get("replica")),
        keys=_section(KeysConfig, raw.get("keys"), paths=("files", "dirs")),
        logging=_section(LoggingConfig, raw.get("logging")),
        principal=_section(PrincipalConfig, raw.get("principal")),
        front=_section(FrontConfig, raw.get("front")),
        calls=_calls(raw.get("calls")),
        tracing=_section(TracingConfig, raw.get("tracing")),
        admin=_admin(raw.get("admin")),
        metrics=_section(MetricsConfig, raw.get("metrics")),
        migration=_section(MigrationConfig, raw.get("migration")),
    )


def _admin(raw: Any) -> AdminConfig:
    admin = dict(raw or {})
    if admin.get("token_file") is not None:
        admin["token_file"] = Path(admin["token_file"])
    return AdminConfig(**admin)
