"""The configuration model: frozen dataclasses whose defaults match ``config.schema.json``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

Transport = Literal["streamable-http", "sse", "stdio"]
LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["auto", "json", "console"]
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # upstreams[].max_message_bytes' default
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # legacy versions, newest first
MODERN_PROTOCOL_VERSION = "2026-07-28"
# The upstream's protocol era: probed with server/discover (auto), or fixed. proxy/upstream/era.py.
Era = Literal["auto", "legacy", "modern"]


class ConfigError(ValueError):
    """Invalid configuration. ``problems`` holds every problem, one ``<dotted.path>: <reason>`` each;
    the message is those lines. ``source`` is the file read, if any."""

    def __init__(self, problems: Iterable[str], source: Path | None = None) -> None:
        self.problems = tuple(problems)
        self.source = source
        super().__init__("\n".join(self.problems))


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ListenConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    public_url: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    address: str | None = None
    peer_port: int | None = None
    peers: tuple[str, ...] = ()
    peer_check_s: float = 10
    key_mismatch: Literal["unready", "warn"] = "unready"


@dataclass(frozen=True, slots=True)
class AdminConfig:
    listen: str | None = (
        None  # "host:port" of the admin listener (proxy/process/admin.py); None: no admin listener
    )
    token_file: Path | None = None  # the bearer token every admin request must carry


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    public: bool = True  # /metrics on the main port too (without the rejection reasons); False: admin only
    tools: tuple[str, ...] = ()  # tool names counted by name in mrtr_proxy_tool_calls; any other is "other"


@dataclass(frozen=True, slots=True)
class MigrationConfig:
    """The migration report's verdict thresholds (proxy/migration/verdict.py; docs/migration.md)."""

    window_hours: int = 168  # the verdict's window, in hourly buckets (1 … 168)
    min_calls: int = 20  # fewer calls in the window: "too little traffic to say"
    max_legacy_percent: float = 0.0  # legacy clients' share of calls still judged "ready"
    top_clients: int = 3  # legacy client names the evidence names


@dataclass(frozen=True, slots=True)
class KeysConfig:
    """Key ring sources, in order: files, then each directory's files, then env variables."""

    files: tuple[Path, ...] = ()
    dirs: tuple[Path, ...] = ()
    env: tuple[str, ...] = ()
    promote_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: LogLevel = "info"
    format: LogFormat = "auto"


@dataclass(frozen=True, slots=True)
class FrontConfig:
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = 1048576
    max_input_responses: int = 64
    max_input_response_bytes: int = 262144
    rate_limit_per_s: float = 0
    rate_burst: int = 20
    keepalive_s: float = 15
    header_timeout_s: float = 5
    body_timeout_s: float = 10
    idle_timeout_s: float = 15
    max_connections: int = 1024
    client_address_header: str | None = None
    trusted_hops: int = 1
    legacy_sessions_per_principal: int = 64
    legacy_sessions_per_address: int = 256
    mirror_session_ttl_s: float = 86400


PrincipalSource = Literal["authorization", "jwt_claim", "header"]


@dataclass(frozen=True, slots=True)
class PrincipalConfig:
    source: PrincipalSource = "authorization"
    claim: str = "sub"
    header: str | None = None


TaskPolicy = Literal["never", "on_elicit", "always", "after_ms"]


@dataclass(frozen=True, slots=True)
class TasksConfig:
    """When a `tools/call` from a client that declared the Tasks extension is answered with a task."""

    policy: TaskPolicy = "after_ms"
    after_ms: int = 10000
    ttl_ms: int = 3600000
    poll_interval_ms: int = 1000
    tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CallsConfig:
    gather_window_ms: int = 50
    parked_ttl_s: float = 600
    max_parked: int = 10000
    max_parked_per_principal: int = 100
    call_timeout_s: float = 300
    drain_grace_s: float = 30
    tasks: TasksConfig = field(default_factory=TasksConfig)
    max_calls_per_address: int = 256
    parked_share: float = 0.75
    first_round_ttl_s: float = 120


@dataclass(frozen=True, slots=True)
class TracingConfig:
    """Optional OpenTelemetry tracing (needs the `otel` extra when enabled; see proxy/observe/tracing.py)."""

    enabled: bool = False
    service_name: str = "mrtr-proxy"
    otlp_endpoint: str | None = None
    sample_ratio: float = 1.0


@dataclass(frozen=True, slots=True)
class StaticRoot:
    uri: str
    name: str | None = None


@dataclass(frozen=True, slots=True)
class PoolConfig:
    max_sessions: int = 1024
    max_sessions_per_principal: int = 0  # 0: no cap of its own (the calls' and legacy shares still apply)
    idle_ttl_s: float = 300
    reuse_sessions: bool = True
    acquire_timeout_s: float = 5

    @classmethod
    def defaults(cls, transport: str) -> PoolConfig:
        """The defaults for `transport`. A stdio session is a child process (a FastMCP 1.30 one: ~55 MiB
        resident), so stdio pools are sized to a machine, not to a network server's capacity."""
        if transport == "stdio":
            return cls(max_sessions=STDIO_MAX_SESSIONS, max_sessions_per_principal=STDIO_PER_PRINCIPAL)
        return cls()


STDIO_MAX_SESSIONS = 32  # children per stdio upstream: ~1.7 GiB of FastMCP 1.30 children
STDIO_PER_PRINCIPAL = 4  # children one principal may hold


@dataclass(frozen=True, slots=True)
class TimeoutsConfig:
    connect_s: float = 10
    initialize_s: float = 30


AuthMode = Literal["passthrough", "validate"]
CredentialSource = Literal["client_token", "file", "env", "none"]
DEFAULT_ALGORITHMS = ("RS256", "ES256", "PS256", "EdDSA")


@dataclass(frozen=True, slots=True)
class UpstreamCredential:
    """What goes upstream as credentials in auth.mode validate (read at start; never from the YAML)."""

    source: CredentialSource = "client_token"
    file: Path | None = None
    env: str | None = None
    header: str = "authorization"
    scheme: str = "Bearer"


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """OAuth for one upstream's routes: the upstream is the resource server (passthrough) or the proxy is."""

    mode: AuthMode = "passthrough"
    public_url: str | None = None
    metadata: Mapping[str, object] | None = None
    authorization_servers: tuple[str, ...] = ()
    issuer: tuple[str, ...] = ()
    jwks_url: str | None = None
    jwks_file: Path | None = None
    audience: tuple[str, ...] = ()
    required_scopes: tuple[str, ...] = ()
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    token_types: tuple[str, ...] = ("at+jwt",)  # the JOSE `typ` accepted (RFC 9068 §4)
    leeway_s: float = 30
    principal_claim: str = "sub"
    jwks_cache_ttl_s: float = 300
    jwks_min_refresh_s: float = 10
    upstream_credential: UpstreamCredential = field(default_factory=UpstreamCredential)
    claim_headers: Mapping[str, str] = field(default_factory=_empty)

    @property
    def issuers(self) -> tuple[str, ...]:
        return self.issuer or self.authorization_servers


@dataclass(frozen=True, slots=True)
class TlsConfig:
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    @property
    def configured(self) -> bool:
        return any((self.ca_file, self.cert_file, self.key_file))


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    name: str
    url: str | None = None
    transport: Transport = "streamable-http"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_empty)
    cwd: Path | None = None
    headers: Mapping[str, str] = field(default_factory=_empty)
    forward_headers: tuple[str, ...] = ("authorization",)
    hosts: tuple[str, ...] = ()
    era: Era = "auto"
    # Tools of a two-era upstream that ask with server-initiated requests (FastMCP's ctx.elicit): a
    # 2026-07-28 client's call of one goes through the proxy's MRTR over a legacy session, not the relay.
    legacy_tools: tuple[str, ...] = ()
    # Learn such tools of a two-era (`both`) upstream when a 2026-07-28 call of one is refused (the client
    # gets the refusal and a hint; the next call goes the legacy way). Per replica, in memory.
    learn_legacy_tools: bool = True
    protocol_versions: tuple[str, ...] = PROTOCOL_VERSIONS  # the legacy ones offered at initialize
    static_roots: tuple[StaticRoot, ...] = ()
    pool: PoolConfig = field(default_factory=PoolConfig)
    timeouts: TimeoutsConfig = field(default_factory=TimeoutsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    tls: TlsConfig = field(default_factory=TlsConfig)
    # The largest single read from this upstream (a JSON body, an SSE line or event, a stdio line).
    max_message_bytes: int = MAX_MESSAGE_BYTES
    standalone: bool = True  # False: served only through the aggregated routes that list it


PrefixMode = Literal["conditional", "always", "never"]


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """Which tools a route (or one upstream in it) exposes: `allow` / `deny` are names or globs of the
    names the client sees; `require_scopes` maps a glob to the scopes a validated token must carry,
    `require_claims` to the claims it must have (each one of the accepted values)."""

    allow: tuple[str, ...] = ()  # (): every tool
    deny: tuple[str, ...] = ()
    require_scopes: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    require_claims: Mapping[str, Mapping[str, tuple[str, ...]]] = field(
        default_factory=lambda: MappingProxyType({})
    )  # glob -> {claim: accepted values}


@dataclass(frozen=True, slots=True)
class RouteMember:
    """One upstream in an aggregated route (proxy/routes/)."""

    upstream: str
    prefix: str | None = None  # None: the upstream's name (when the route's prefix_mode prefixes)
    tools: ToolPolicy = field(default_factory=ToolPolicy)


@dataclass(frozen=True, slots=True)
class RouteConfig:
    """An aggregated route: several upstreams behind /servers/<name>/mcp (and /mcp when `default`)."""

    name: str
    upstreams: tuple[RouteMember, ...]
    default: bool = False
    prefix_mode: PrefixMode = "conditional"
    separator: str = "__"
    list_timeout_s: float = 10
    list_cache_ms: int = 5000  # an upstream's list page is given again this long (0: always asked)
    tools: ToolPolicy = field(default_factory=ToolPolicy)
    auth: AuthConfig = field(default_factory=AuthConfig)
    hosts: tuple[str, ...] = ()  # Host names that route /mcp to this route (as an upstream's hosts)


@dataclass(frozen=True, slots=True)
class Config:
    upstreams: tuple[UpstreamConfig, ...]
    routes: tuple[RouteConfig, ...] = ()
    listen: ListenConfig = field(default_factory=ListenConfig)
    replica: ReplicaConfig = field(default_factory=ReplicaConfig)
    keys: KeysConfig = field(default_factory=KeysConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    principal: PrincipalConfig = field(default_factory=PrincipalConfig)
    front: FrontConfig = field(default_factory=FrontConfig)
    calls: CallsConfig = field(default_factory=CallsConfig)
    tracing: TracingConfig = field(default_factory=TracingConfig)
    admin: AdminConfig = field(default_factory=AdminConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    migration: MigrationConfig = field(default_factory=MigrationConfig)

    @property
    def replica_address(self) -> str:
        """replica.address, else "<listen.host>:<peer port, or listen.port>" (an IPv6 host in brackets)."""
        if self.replica.address:
            return self.replica.address
        host = f"[{self.listen.host}]" if ":" in self.listen.host else self.listen.host
        return f"{host}:{self.replica.peer_port or self.listen.port}"

    @property
    def default_upstream(self) -> UpstreamConfig:
        """The first upstream, also served at ``/mcp``."""
        return self.upstreams[0]

    def route(self, name: str) -> RouteConfig:
        """The aggregated route called ``name``; KeyError if there is none."""
        for route in self.routes:
            if route.name == name:
                return route
        raise KeyError(name)

    def upstream(self, name: str) -> UpstreamConfig:
        """The upstream called ``name``; KeyError if there is none."""
        for up in self.upstreams:
            if up.name == name:
                return up
        raise KeyError(name)
