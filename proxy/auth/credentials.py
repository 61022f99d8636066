"""Service credentials for the upstream in validate mode, read once at start from a file or an environment
variable (never the YAML): what replaces the client's token when the upstream must not see it."""

from __future__ import annotations

import os
from collections.abc import Mapping

from proxy.config import UpstreamCredential


class CredentialError(Exception):
    """A configured credential cannot be read; the message names the file or the variable."""


def service_credential(cred: UpstreamCredential, environ: Mapping[str, str] | None = None) -> str | None:
    """The header value for `file`/`env` sources (scheme-prefixed), None for `client_token`/`none`."""
    if cred.source == "file" and cred.file is not None:
        try:
            secret = cred.file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CredentialError(f"auth.upstream_credential.file {cred.file}: {exc}") from None
        where = f"file {cred.file}"
    elif cred.source == "env" and cred.env is not None:
        secret = (os.environ if environ is None else environ).get(cred.env, "").strip()
        where = f"environment variable {cred.env}"
    else:
        return None
    if not secret or any(ch in secret for ch in "\r\n"):
        raise CredentialError(f"auth.upstream_credential: {where} is empty or spans several lines")
    return f"{cred.scheme} {secret}" if cred.scheme else secret
