"""What authorization and upstream TLS read at start, once: static signing keys, service credentials and
SSL contexts, per upstream. Every problem is reported at once, naming the setting and the file or variable."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from proxy.auth.credentials import CredentialError, service_credential
from proxy.auth.jwks import JwksUnavailable, StaticKeys, static_keys
from proxy.config import Config
from proxy.upstream.tls import TlsSetupError, client_context


class AuthSetupError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(problems))


@dataclass(frozen=True, slots=True)
class Prepared:
    static_keys: Mapping[str, StaticKeys]
    credentials: Mapping[str, str | None]
    tls: Mapping[str, ssl.SSLContext | None]


def prepare(config: Config, environ: Mapping[str, str] | None = None) -> Prepared:
    """Raises AuthSetupError listing every file or variable that cannot be used."""
    env = os.environ if environ is None else environ
    problems: list[str] = []
    keys: dict[str, StaticKeys] = {}
    creds: dict[str, str | None] = {}
    tls: dict[str, ssl.SSLContext | None] = {}
    for i, up in enumerate(config.upstreams):
        where = f"upstreams.{i}"
        try:
            tls[up.name] = client_context(up.tls, where)
        except TlsSetupError as exc:
            problems.append(str(exc))
    sides = [(f"upstreams.{i}", up.name, up.auth) for i, up in enumerate(config.upstreams)]
    sides += [(f"routes.{i}", route.name, route.auth) for i, route in enumerate(config.routes)]
    for where, name, auth in sides:  # route and upstream names never clash (config/schema.py)
        if auth.mode != "validate":
            continue
        if auth.jwks_file is not None:
            try:
                keys[name] = static_keys(auth.jwks_file)
            except JwksUnavailable as exc:
                problems.append(f"{where}.{exc}")
        try:
            creds[name] = service_credential(auth.upstream_credential, env)
        except CredentialError as exc:
            problems.append(f"{where}.{exc}")
    if problems:
        raise AuthSetupError(problems)
    return Prepared(keys, creds, tls)
