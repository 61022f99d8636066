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
        if up.auth.mode != "validate":
            continue
        if up.auth.jwks_file is not None:
            try:
                keys[up.name] = static_keys(up.auth.jwks_file)
            except JwksUnavailable as exc:
                problems.append(f"{where}.{exc}")
        try:
            creds[up.name] = service_credential(up.auth.upstream_credential, env)
        except CredentialError as exc:
            problems.append(f"{where}.{exc}")
    if problems:
        raise AuthSetupError(problems)
    return Prepared(keys, creds, tls)
