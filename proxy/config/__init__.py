"""Configuration: a YAML file, ``MRTR_PROXY_*`` environment variables and CLI overrides, validated by
the JSON Schema in ``proxy/config.schema.json`` and turned into frozen dataclasses.

Secrets never go in the file: the ``keys`` section only names key files, directories and
environment variables; the app reads the key material itself.
"""

from .load import load_config
from .model import (
    PROTOCOL_VERSIONS,
    AdminConfig,
    AuthConfig,
    AuthMode,
    CallsConfig,
    Config,
    ConfigError,
    CredentialSource,
    FrontConfig,
    KeysConfig,
    ListenConfig,
    LogFormat,
    LoggingConfig,
    LogLevel,
    MetricsConfig,
    PoolConfig,
    PrincipalConfig,
    PrincipalSource,
    ReplicaConfig,
    StaticRoot,
    TaskPolicy,
    TasksConfig,
    TimeoutsConfig,
    TlsConfig,
    TracingConfig,
    Transport,
    UpstreamConfig,
    UpstreamCredential,
)
from .schema import load_schema

__all__ = [
    "PROTOCOL_VERSIONS",
    "AdminConfig",
    "AuthConfig",
    "AuthMode",
    "CallsConfig",
    "Config",
    "ConfigError",
    "CredentialSource",
    "FrontConfig",
    "KeysConfig",
    "ListenConfig",
    "LogFormat",
    "LogLevel",
    "LoggingConfig",
    "MetricsConfig",
    "PoolConfig",
    "PrincipalConfig",
    "PrincipalSource",
    "ReplicaConfig",
    "StaticRoot",
    "TaskPolicy",
    "TasksConfig",
    "TimeoutsConfig",
    "TlsConfig",
    "TracingConfig",
    "Transport",
    "UpstreamConfig",
    "UpstreamCredential",
    "load_config",
    "load_schema",
]
