"""`WWW-Authenticate` (RFC 9110 §11.6.1, RFC 6750 §3): parse an upstream's challenges, build ours. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_SPACE = re.compile(r"[ \t]*")
_BARE = re.compile(r'[^\s,"]+')


@dataclass(frozen=True, slots=True)
class Challenge:
    """One challenge: its scheme and auth-params (names lowercased), or a token68 instead of params."""

    scheme: str
    params: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    token68: str | None = None

    @property
    def is_bearer(self) -> bool:
        return self.scheme.lower() == "bearer"


def parse(header: str) -> tuple[Challenge, ...]:
    """Every challenge in a `WWW-Authenticate` value; what cannot be parsed ends the list (lenient: an
    upstream's header is relayed as well as it can be, never trusted for more than its parameters)."""
    out: list[Challenge] = []
    pos, n = 0, len(header)
    while pos < n:
        pos = _skip(header, pos, ", \t")
        m = _TOKEN.match(header, pos)
        if not m:
            break
        scheme, pos = m.group(), _SPACE.match(header, m.end()).end()  # type: ignore[union-attr]
        params: dict[str, str] = {}
        token68 = None
        t68 = _TOKEN68.match(header, pos)
        if t68 and not _is_param_start(header, pos) and _at_end_of_item(header, t68.end()):
            token68, pos = t68.group(), t68.end()
        else:
            while pos < n:
                start = _skip(header, pos, ", \t")
                if not _is_param_start(header, start):
                    pos = start
                    break
                name_m = _TOKEN.match(header, start)
                assert name_m is not None
                name = name_m.group().lower()
                pos = _SPACE.match(header, name_m.end()).end()  # type: ignore[union-attr]
                pos = _SPACE.match(header, pos + 1).end()  # type: ignore[union-attr]  # past "="
                value, pos = _value(header, pos)
                if value is None:
                    return (*out, Challenge(scheme, MappingProxyType(params)))
                params.setdefault(name, value)
        out.append(Challenge(scheme, MappingProxyType(params), token68))
    return tuple(out)


def bearer(challenges: tuple[Challenge, ...]) -> Challenge | None:
    return next((c for c in challenges if c.is_bearer), None)


def build(params: Mapping[str, str | None], scheme: str = "Bearer") -> str:
    """`Bearer name="value", …` in the given order, None values left out; values quoted and escaped."""
    parts = [f'{name}="{_quote(value)}"' for name, value in params.items() if value is not None]
    return f"{scheme} {', '.join(parts)}" if parts else scheme


def _quote(value: str) -> str:
    clean = "".join(ch for ch in value if ch == "\t" or " " <= ch != "\x7f")  # no CR/LF/controls
    return clean.replace("\\", "\\\\").replace('"', '\\"')


def _skip(s: str, pos: int, chars: str) -> int:
    while pos < len(s) and s[pos] in chars:
        pos += 1
    return pos


def _is_param_start(s: str, pos: int) -> bool:
    m = _TOKEN.match(s, pos)
    if not m:
        return False
    after = _SPACE.match(s, m.end()).end()  # type: ignore[union-attr]
    return after < len(s) and s[after] == "=" and not (after + 1 < len(s) and s[after + 1] == "=")


def _at_end_of_item(s: str, pos: int) -> bool:
    rest = _SPACE.match(s, pos).end()  # type: ignore[union-attr]
    return rest >= len(s) or s[rest] == ","


def _value(s: str, pos: int) -> tuple[str | None, int]:
    if pos < len(s) and s[pos] == '"':
        out, i = [], pos + 1
        while i < len(s):
            ch = s[i]
            if ch == "\\" and i + 1 < len(s):
                out.append(s[i + 1])
                i += 2
            elif ch == '"':
                return "".join(out), i + 1
            else:
                out.append(ch)
                i += 1
        return None, len(s)  # unterminated
    m = _BARE.match(s, pos)  # a token by the grammar; leniently anything up to "," or space (scope=a:b)
    return (m.group(), m.end()) if m else (None, pos)
