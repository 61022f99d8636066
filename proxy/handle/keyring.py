"""AES-256-GCM key ring that seals and unseals opaque tokens, and key loading.

Token = base64url, no padding, of ``version (1) || kid (8 ascii) || nonce (12) || ciphertext+tag``;
the associated data is ``version || kid``. One key of a ring seals (the first, unless ``sealing`` names
another: staged rotation, see ``proxy/handle/rotation.py``), every key unseals.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import stat
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pybase64
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "MAX_LARGE_TOKEN_CHARS",
    "MAX_TOKEN_CHARS",
    "HandleError",
    "Key",
    "KeyLoadError",
    "KeyRing",
    "derive_kid",
    "generate_key_b64",
    "load_keys",
    "load_named_keys",
    "parse_key",
    "token_kid",
    "token_version",
]

SECRET_LEN = 32
KID_LEN = 8
NONCE_LEN = 12
TAG_LEN = 16
HEADER_LEN = 1 + KID_LEN
MIN_TOKEN_BYTES = HEADER_LEN + NONCE_LEN + TAG_LEN
MAX_TOKEN_CHARS = 4096
# The cap of a kind that carries an upstream's own payload (relay_state.py: a modern upstream's requestState,
# which real servers make tens of KB); every other kind is held to MAX_TOKEN_CHARS.
MAX_LARGE_TOKEN_CHARS = 98304
_MAX_KEY_FILE_BYTES = 1024

_B64ANY = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")


class HandleError(Exception):
    """A token or its claims were rejected; ``reason`` is a short machine-readable code."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KeyLoadError(Exception):
    """A key could not be loaded; names the source and the reason, never the key text."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(source, reason)
        self.source = source
        self.reason = reason

    def __str__(self) -> str:
        return f"key from {self.source}: {self.reason}"


def derive_kid(secret: bytes) -> str:
    """Key id: first 8 chars of base64url(sha256(b"mrtr-proxy kid" + secret))."""
    digest = hashlib.sha256(b"mrtr-proxy kid" + secret).digest()
    return base64.urlsafe_b64encode(digest)[:KID_LEN].decode("ascii")


@dataclass(frozen=True)
class Key:
    """A 32-byte AES-256-GCM key and its derived id. ``repr`` never shows the secret."""

    kid: str
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.secret, bytes) or len(self.secret) != SECRET_LEN:
            raise ValueError(f"key secret must be exactly {SECRET_LEN} bytes")
        if self.kid != derive_kid(self.secret):
            raise ValueError("kid does not match the key material")

    @classmethod
    def from_secret(cls, secret: bytes) -> Key:
        return cls(derive_kid(secret), secret)

    @classmethod
    def generate(cls) -> Key:
        return cls.from_secret(os.urandom(SECRET_LEN))

    def __repr__(self) -> str:
        return f"Key(kid={self.kid!r})"


class KeyRing:
    """Ordered keys: one seals (the first, or the one `sealing` names), all unseal. One AESGCM object per
    key, built once."""

    __slots__ = ("_aeads", "_headers", "_keys", "_seal_aead", "_seal_kid")

    def __init__(self, keys: Sequence[Key], *, sealing: str | None = None) -> None:
        if not keys:
            raise ValueError("a key ring needs at least one key")
        aeads: dict[bytes, AESGCM] = {}
        for key in keys:
            kid = key.kid.encode("ascii")
            if kid in aeads:
                raise ValueError(f"duplicate key id {key.kid!r}")
            aeads[kid] = AESGCM(key.secret)
        self._keys = tuple(keys)
        self._aeads = aeads
        self._seal_kid = (keys[0].kid if sealing is None else sealing).encode("ascii")
        if self._seal_kid not in aeads:
            raise ValueError(f"sealing key id {sealing!r} is not in the ring")
        self._seal_aead = aeads[self._seal_kid]
        self._headers: dict[int, bytes] = {}  # version -> version || sealing kid, the associated data

    @classmethod
    def ephemeral(cls) -> KeyRing:
        """A ring with one random key (single replica, handles die with the process)."""
        return cls([Key.generate()])

    @property
    def kids(self) -> tuple[str, ...]:
        return tuple(k.kid for k in self._keys)

    @property
    def sealing_kid(self) -> str:
        return self._seal_kid.decode("ascii")

    @property
    def keys(self) -> tuple[Key, ...]:
        return self._keys

    def __repr__(self) -> str:
        return f"KeyRing(kids={list(self.kids)!r}, sealing={self.sealing_kid!r})"

    def seal(self, plaintext: bytes, *, version: int, max_chars: int = MAX_TOKEN_CHARS) -> str:
        """Encrypt and authenticate ``plaintext``; raises ValueError if the token would be longer than
        ``max_chars`` (MAX_TOKEN_CHARS unless a kind has a cap of its own)."""
        header = self._headers.get(version)
        if header is None:
            if not 0 <= version <= 255:
                raise ValueError("version must fit in one byte")
            header = self._headers[version] = bytes((version,)) + self._seal_kid
        nonce = os.urandom(NONCE_LEN)
        sealed = header + nonce + self._seal_aead.encrypt(nonce, plaintext, header)
        token = pybase64.b64encode_as_string(sealed, altchars=b"-_").rstrip("=")
        if len(token) > max_chars:
            raise ValueError(f"sealed token is {len(token)} chars, over the {max_chars} cap")
        return token

    def unseal(
        self, token: str, *, versions: Container[int] = (1,), max_chars: int = MAX_TOKEN_CHARS
    ) -> tuple[int, bytes]:
        """Return ``(version, plaintext)``; anything wrong raises HandleError and nothing else. A token
        longer than ``max_chars`` is refused (``too_long``) before any work."""
        raw = _b64url_decode(token, max_chars)
        if len(raw) < MIN_TOKEN_BYTES:
            raise HandleError("too_short")
        version = raw[0]
        if version not in versions:
            raise HandleError("unknown_version")
        header = raw[:HEADER_LEN]
        aead = self._aeads.get(raw[1:HEADER_LEN])
        if aead is None:
            raise HandleError("unknown_key")
        nonce = raw[HEADER_LEN : HEADER_LEN + NONCE_LEN]
        plaintext: bytes | None
        try:
            plaintext = aead.decrypt(nonce, raw[HEADER_LEN + NONCE_LEN :], header)
        except InvalidTag:
            plaintext = None
        if plaintext is None:
            raise HandleError("auth_failed")
        return version, plaintext


def token_kid(token: object) -> str | None:
    """The key id in a token's clear header (public: it names the key, it is not the key), or None if the
    token is not even well-formed."""
    try:
        raw = _b64url_decode(token, MAX_LARGE_TOKEN_CHARS)
    except HandleError:
        return None
    if len(raw) < MIN_TOKEN_BYTES:
        return None
    return raw[1:HEADER_LEN].decode("ascii", "replace")


def token_version(token: object) -> int | None:
    """The version byte in a token's clear header (which kind of token it says it is; only unsealing
    proves it), or None if the token is not even well-formed."""
    try:
        raw = _b64url_decode(token, MAX_LARGE_TOKEN_CHARS)
    except HandleError:
        return None
    return raw[0] if len(raw) >= MIN_TOKEN_BYTES else None


_B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_B64_VALUE = {ch: i for i, ch in enumerate(_B64_ALPHABET)}
# The low bits the last character of a token of length % 4 == 2 or 3 does not use (canonical: zero), and
# the padding that length needs (length % 4 == 1 is never base64).
_UNUSED_BITS = (0, 0, 0x0F, 0x03)
_PADDING = ("", "", "==", "=")


def _b64url_decode(token: object, max_chars: int = MAX_TOKEN_CHARS) -> bytes:
    """Strict, canonical base64url without padding.

    pybase64 (SIMD) decodes; its ``validate`` refuses whatever is outside the alphabet, but with
    ``altchars`` it still takes the standard alphabet's "+" and "/", and it does not look at the unused
    trailing bits: both are refused here first, so that each token has exactly one spelling."""
    if type(token) is not str:
        raise HandleError("malformed")
    n = len(token)
    if n > max_chars:
        raise HandleError("too_long")
    rem = n & 3
    if rem == 1 or not token.isascii() or "+" in token or "/" in token or "=" in token:
        raise HandleError("malformed")
    # (A last character outside the alphabet counts as 1 here: refused now, or by validate below.)
    if rem and _B64_VALUE.get(token[-1], 1) & _UNUSED_BITS[rem]:
        raise HandleError("malformed")
    raw: bytes | None
    try:
        raw = pybase64.b64decode(token + _PADDING[rem], altchars=b"-_", validate=True)
    except ValueError:  # binascii.Error
        raw = None
    if raw is None:
        raise HandleError("malformed")  # outside the try: no chained cause or context
    return raw


# --- key loading -------------------------------------------------------------------------------


def generate_key_b64() -> str:
    """A fresh random key as base64url without padding (43 chars), for ``mrtr-proxy keygen``."""
    return base64.urlsafe_b64encode(os.urandom(SECRET_LEN)).rstrip(b"=").decode("ascii")


def parse_key(text: str | bytes, source: str) -> Key:
    """Parse one base64 (standard or url-safe, padding optional) 32-byte key."""
    if isinstance(text, bytes):
        if not text.isascii():
            raise KeyLoadError(source, "not base64 (non-ASCII content)")
        text = text.decode("ascii")
    s = text.strip()
    if not s:
        raise KeyLoadError(source, "empty")
    if not s.isascii() or not _B64ANY.fullmatch(s):
        raise KeyLoadError(source, "not base64")
    s = s.rstrip("=").replace("-", "+").replace("_", "/")
    secret: bytes | None
    try:
        secret = base64.b64decode(s + "=" * (-len(s) % 4), validate=True)
    except (binascii.Error, ValueError):
        secret = None
    if secret is None:
        raise KeyLoadError(source, "not base64")
    if len(secret) != SECRET_LEN:
        raise KeyLoadError(source, f"decodes to {len(secret)} bytes, need {SECRET_LEN}")
    return Key.from_secret(secret)


def _read_key_file(path: Path) -> Key:
    source = str(path)
    try:
        with path.open("rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise KeyLoadError(source, "not a regular file")
            data = fh.read(_MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise KeyLoadError(source, f"cannot read ({exc.strerror or type(exc).__name__})") from None
    if len(data) > _MAX_KEY_FILE_BYTES:
        raise KeyLoadError(source, "file too large for a key")
    return parse_key(data, source)


def _dir_key_files(directory: Path) -> list[Path]:
    """Regular files of a directory (symlinks followed), sorted by name, dotfiles skipped."""
    source = str(directory)
    try:
        names = sorted(entry.name for entry in os.scandir(directory))
    except OSError as exc:
        raise KeyLoadError(source, f"cannot list ({exc.strerror or type(exc).__name__})") from None
    files: list[Path] = []
    for name in names:
        if name.startswith("."):
            continue  # dotfiles and the ..data / ..<timestamp> entries of a k8s Secret mount
        path = directory / name
        if path.is_file():
            files.append(path)
        elif path.is_symlink() and not path.exists():
            raise KeyLoadError(str(path), "broken symlink")
    if not files:
        raise KeyLoadError(source, "no key files in directory")
    return files


def load_keys(
    files: Sequence[Path] = (),
    dirs: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    env_vars: Sequence[str] = (),
) -> list[Key]:
    """Load keys: ``files`` in order, then each of ``dirs`` (files sorted by name), then ``env_vars``.

    Unset or empty env vars are skipped. The same key seen twice is kept once (first position).
    The result may be empty if nothing was configured; ``KeyRing`` rejects an empty list.
    """
    return [key for _, key in load_named_keys(files, dirs, env, env_vars)]


def load_named_keys(
    files: Sequence[Path] = (),
    dirs: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    env_vars: Sequence[str] = (),
) -> list[tuple[str, Key]]:
    """As ``load_keys``, each key with the name it was found under (file name, or env var name): the
    name says its role in a rotation (``proxy/handle/rotation.py``)."""
    environ: Mapping[str, str] = os.environ if env is None else env
    found: list[tuple[str, Key]] = []
    for path in files:
        found.append((Path(path).name, _read_key_file(Path(path))))
    for directory in dirs:
        found.extend((p.name, _read_key_file(p)) for p in _dir_key_files(Path(directory)))
    for name in env_vars:
        value = environ.get(name)
        if value and value.strip():
            found.append((name, parse_key(value, f"env var {name}")))
    unique: dict[str, tuple[str, Key]] = {}
    for name, key in found:
        unique.setdefault(key.kid, (name, key))
    return list(unique.values())
