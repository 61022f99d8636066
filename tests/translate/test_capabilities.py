"""ClientCapabilities: reading the declared `_meta` capabilities, gating requests, legacy declarations."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.translate.capabilities import ClientCapabilities as Caps
from proxy.wire import mcp

NONE = Caps()
FORM = Caps(elicitation_form=True)
URL = Caps(elicitation_url=True)
BOTH = Caps(elicitation_form=True, elicitation_url=True)
ALL = Caps(
    elicitation_form=True,
    elicitation_url=True,
    sampling=True,
    sampling_tools=True,
    sampling_context=True,
    roots=True,
)


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        pytest.param(None, NONE, id="none"),
        pytest.param({}, NONE, id="empty"),
        pytest.param([], NONE, id="array"),
        pytest.param("elicitation", NONE, id="string"),
        pytest.param({"elicitation": {}}, FORM, id="elicitation-empty-is-form-only"),
        pytest.param({"elicitation": {"form": {}}}, FORM, id="elicitation-form"),
        pytest.param({"elicitation": {"url": {}}}, URL, id="elicitation-url-only"),
        pytest.param({"elicitation": {"form": {}, "url": {}}}, BOTH, id="elicitation-both"),
        pytest.param({"elicitation": {"other": {}}}, FORM, id="elicitation-unknown-mode-only-is-form"),
        pytest.param({"elicitation": True}, NONE, id="elicitation-true-ignored"),
        pytest.param({"elicitation": None}, NONE, id="elicitation-null-ignored"),
        pytest.param({"elicitation": ["form"]}, NONE, id="elicitation-array-ignored"),
        pytest.param({"sampling": {}}, Caps(sampling=True), id="sampling"),
        pytest.param(
            {"sampling": {"tools": {}}}, Caps(sampling=True, sampling_tools=True), id="sampling-tools"
        ),
        pytest.param(
            {"sampling": {"context": {}}}, Caps(sampling=True, sampling_context=True), id="sampling-context"
        ),
        pytest.param(
            {"sampling": {"tools": {}, "context": {}}},
            Caps(sampling=True, sampling_tools=True, sampling_context=True),
            id="sampling-tools-context",
        ),
        pytest.param({"sampling": 1}, NONE, id="sampling-number-ignored"),
        pytest.param({"sampling": "yes"}, NONE, id="sampling-string-ignored"),
        pytest.param({"roots": {}}, Caps(roots=True), id="roots"),
        pytest.param({"roots": {"listChanged": True}}, Caps(roots=True), id="roots-list-changed"),
        pytest.param({"roots": True}, NONE, id="roots-true-ignored"),
        pytest.param({"experimental": {}, "extensions": {"x/y": {}}}, NONE, id="unknown-members-ignored"),
        pytest.param(
            {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}, "context": {}}, "roots": {}},
            ALL,
            id="everything",
        ),
    ],
)
def test_from_declared(declared: object, expected: Caps) -> None:
    assert Caps.from_declared(declared) == expected


FORM_REQ: dict[str, Any] = {"message": "m", "requestedSchema": {"type": "object"}}


@pytest.mark.parametrize(
    ("caps", "method", "params", "allowed"),
    [
        pytest.param(FORM, mcp.ELICIT, FORM_REQ, True, id="form-no-mode"),
        pytest.param(FORM, mcp.ELICIT, {"mode": "form"}, True, id="form-explicit"),
        pytest.param(FORM, mcp.ELICIT, {"mode": "url"}, False, id="form-only-refuses-url"),
        pytest.param(URL, mcp.ELICIT, {"mode": "url"}, True, id="url"),
        pytest.param(URL, mcp.ELICIT, {}, False, id="url-only-refuses-form"),
        pytest.param(BOTH, mcp.ELICIT, {"mode": "url"}, True, id="both-url"),
        pytest.param(BOTH, mcp.ELICIT, {}, True, id="both-form"),
        pytest.param(BOTH, mcp.ELICIT, {"mode": "other"}, False, id="unknown-mode"),
        pytest.param(BOTH, mcp.ELICIT, {"mode": None}, False, id="null-mode"),
        pytest.param(NONE, mcp.ELICIT, {}, False, id="no-elicitation"),
        pytest.param(Caps(sampling=True), mcp.SAMPLE, {}, True, id="sampling"),
        pytest.param(BOTH, mcp.SAMPLE, {}, False, id="no-sampling"),
        pytest.param(Caps(roots=True), mcp.ROOTS, {}, True, id="roots"),
        pytest.param(Caps(sampling=True), mcp.ROOTS, {}, False, id="no-roots"),
        pytest.param(ALL, mcp.PING, {}, False, id="ping-never"),
        pytest.param(ALL, "tools/call", {}, False, id="other-method-never"),
    ],
)
def test_allows(caps: Caps, method: str, params: dict[str, Any], allowed: bool) -> None:
    assert caps.allows(method, params) is allowed


ROOTS = {"roots": {"listChanged": True}}


@pytest.mark.parametrize(
    ("caps", "version", "expected"),
    [
        pytest.param(NONE, "2025-11-25", {}, id="none"),
        pytest.param(
            ALL,
            "2025-11-25",
            {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}, "context": {}}, **ROOTS},
            id="all-2025-11-25",
        ),
        pytest.param(ALL, "2025-06-18", {"elicitation": {}, "sampling": {}, **ROOTS}, id="all-2025-06-18"),
        pytest.param(ALL, "2025-03-26", {"sampling": {}, **ROOTS}, id="all-2025-03-26"),
        pytest.param(ALL, "2024-11-05", {"sampling": {}, **ROOTS}, id="all-2024-11-05"),
        pytest.param(FORM, "2025-11-25", {"elicitation": {"form": {}}}, id="form-2025-11-25"),
        pytest.param(FORM, "2025-06-18", {"elicitation": {}}, id="form-2025-06-18"),
        pytest.param(FORM, "2025-03-26", {}, id="form-2025-03-26"),
        pytest.param(FORM, "2024-11-05", {}, id="form-2024-11-05"),
        pytest.param(URL, "2025-11-25", {"elicitation": {"url": {}}}, id="url-2025-11-25"),
        pytest.param(URL, "2025-06-18", {}, id="url-only-2025-06-18-no-elicitation"),
        pytest.param(URL, "2024-11-05", {}, id="url-2024-11-05"),
        pytest.param(BOTH, "2025-06-18", {"elicitation": {}}, id="both-2025-06-18-form-only"),
        pytest.param(Caps(sampling=True), "2025-11-25", {"sampling": {}}, id="plain-sampling-2025-11-25"),
        pytest.param(
            Caps(sampling=True, sampling_tools=True),
            "2025-11-25",
            {"sampling": {"tools": {}}},
            id="sampling-tools-2025-11-25",
        ),
        pytest.param(
            Caps(sampling=True, sampling_context=True),
            "2025-11-25",
            {"sampling": {"context": {}}},
            id="sampling-context-2025-11-25",
        ),
        pytest.param(
            Caps(sampling=True, sampling_tools=True, sampling_context=True),
            "2025-06-18",
            {"sampling": {}},
            id="sampling-tools-dropped-2025-06-18",
        ),
        pytest.param(Caps(roots=True), "2024-11-05", ROOTS, id="roots-2024-11-05"),
    ],
)
def test_legacy(caps: Caps, version: str, expected: dict[str, Any]) -> None:
    assert caps.legacy(version) == expected


@pytest.mark.parametrize("version", mcp.LEGACY_VERSIONS)
def test_legacy_returns_fresh_dicts(version: str) -> None:
    first = ALL.legacy(version)
    first.clear()
    assert ALL.legacy(version) != {}


@pytest.mark.parametrize(
    ("caps", "label"),
    [
        pytest.param(NONE, "none", id="none"),
        pytest.param(FORM, "elicit-form", id="form"),
        pytest.param(URL, "elicit-url", id="url"),
        pytest.param(Caps(elicitation_form=True, sampling=True), "elicit-form+sampling", id="form-sampling"),
        pytest.param(ALL, "elicit-form+elicit-url+sampling+roots", id="all"),
        pytest.param(Caps(roots=True), "roots", id="roots"),
    ],
)
def test_describe(caps: Caps, label: str) -> None:
    assert caps.describe() == label


def test_hashable_and_frozen() -> None:
    assert len({Caps.from_declared({"elicitation": {}}), FORM}) == 1
    with pytest.raises(AttributeError):
        FORM.roots = True  # type: ignore[misc]


def test_equal_declarations_give_one_shared_instance() -> None:
    """Interned: a request's capabilities are a look-up, and the pool's keys find them equal by identity."""
    first = Caps.from_declared({"elicitation": {"form": {}}, "roots": {}})
    again = Caps.from_declared({"roots": {"listChanged": True}, "elicitation": {}})
    assert first is again
    assert first == Caps(elicitation_form=True, roots=True)
    assert Caps.from_declared({"sampling": {}}) is not first
