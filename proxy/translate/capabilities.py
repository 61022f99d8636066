"""A modern client's declared capabilities, and the legacy capabilities the proxy declares upstream for it.

Upstream sessions are pooled by `ClientCapabilities`, so a legacy server only ever sends a request kind that
the modern client on whose behalf the session runs has declared.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.wire import mcp


def _obj(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, dict) else None


@dataclass(frozen=True, slots=True)
class ClientCapabilities:
    elicitation_form: bool = False
    elicitation_url: bool = False
    sampling: bool = False
    sampling_tools: bool = False
    sampling_context: bool = False
    roots: bool = False

    @classmethod
    def from_declared(cls, caps: object) -> ClientCapabilities:
        """Read `_meta["io.modelcontextprotocol/clientCapabilities"]`; unknown members are ignored."""
        declared = _obj(caps) or {}
        elicitation = _obj(declared.get("elicitation"))
        sampling = _obj(declared.get("sampling"))
        form = url = False
        if elicitation is not None:
            form, url = "form" in elicitation, "url" in elicitation
            if not form and not url:  # `elicitation: {}` means form mode only
                form = True
        return _interned(
            (
                form,
                url,
                sampling is not None,
                sampling is not None and "tools" in sampling,
                sampling is not None and "context" in sampling,
                _obj(declared.get("roots")) is not None,
            )
        )

    def allows(self, method: str, params: Mapping[str, Any]) -> bool:
        """May a server request of this kind be surfaced to the client as an input request?"""
        if method == mcp.ELICIT:
            mode = params.get("mode", "form")
            return (mode == "form" and self.elicitation_form) or (mode == "url" and self.elicitation_url)
        if method == mcp.SAMPLE:
            return self.sampling
        if method == mcp.ROOTS:
            return self.roots
        return False

    def legacy(self, version: str) -> dict[str, Any]:
        """The `capabilities` to send in `initialize` for a legacy protocol `version`."""
        out: dict[str, Any] = {}
        if self.elicitation_form or self.elicitation_url:
            if version >= "2025-11-25":
                modes: dict[str, Any] = {}
                if self.elicitation_form:
                    modes["form"] = {}
                if self.elicitation_url:
                    modes["url"] = {}
                out["elicitation"] = modes
            elif version >= "2025-06-18" and self.elicitation_form:
                out["elicitation"] = {}
        if self.sampling:
            sampling: dict[str, Any] = {}
            if version >= "2025-11-25":
                if self.sampling_tools:
                    sampling["tools"] = {}
                if self.sampling_context:
                    sampling["context"] = {}
            out["sampling"] = sampling
        if self.roots:
            out["roots"] = {"listChanged": True}  # the proxy tells roots changes (calls/roots.py)
        return out

    def describe(self) -> str:
        """Short label for logs and metrics, e.g. `elicit-form+sampling`."""
        parts = [
            name
            for name, on in (
                ("elicit-form", self.elicitation_form),
                ("elicit-url", self.elicitation_url),
                ("sampling", self.sampling),
                ("roots", self.roots),
            )
            if on
        ]
        return "+".join(parts) or "none"


@functools.lru_cache(maxsize=64)  # six flags: every set there is, made once (not per request)
def _interned(flags: tuple[bool, bool, bool, bool, bool, bool]) -> ClientCapabilities:
    return ClientCapabilities(*flags)


@functools.lru_cache(maxsize=64)
def shared_legacy(capabilities: ClientCapabilities, version: str) -> Mapping[str, Any]:
    """`capabilities.legacy(version)`, one object per capability set and version: the sessions of a pool
    declare the same, and each held its own copy for as long as it lived (a parked call's too). Read only."""
    return capabilities.legacy(version)
