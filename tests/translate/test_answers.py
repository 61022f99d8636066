"""Input responses checked in full: elicitation content against the whole requested schema (the elicitation
spec's restricted subset), sampling and roots results against their shapes. Each problem names the field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.translate.answers import (
    elicitation_problem,
    plainly_valid,
    roots_problem,
    sampling_problem,
    schema_problem,
)

# Every property kind the 2025-11-25 / 2026-07-28 elicitation spec allows in a form's requestedSchema.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "born": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number", "minimum": 0.5, "maximum": 1.5},
        "ok": {"type": "boolean"},
        "color": {"type": "string", "enum": ["Red", "Green"]},
        "hex": {"type": "string", "oneOf": [{"const": "#f00", "title": "Red"}, {"const": "#0f0"}]},
        "tags": {
            "type": "array",
            "minItems": 1,
            "maxItems": 2,
            "items": {"type": "string", "enum": ["a", "b", "c"]},
        },
        "hexes": {
            "type": "array",
            "minItems": 1,
            "items": {"anyOf": [{"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}]},
        },
    },
    "required": ["name", "age"],
}
FULL: dict[str, Any] = {
    "name": "Ann",
    "email": "ann@example.com",
    "site": "https://example.com/a",
    "born": "1990-02-28",
    "at": "2026-07-28T10:00:00Z",
    "age": 30,
    "score": 1.0,
    "ok": True,
    "color": "Red",
    "hex": "#0f0",
    "tags": ["a", "c"],
    "hexes": ["#f00"],
}
FORM = {"message": "m", "requestedSchema": SCHEMA}


def accept(content: object) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def test_a_full_valid_answer_and_the_minimal_one_pass() -> None:
    assert elicitation_problem(accept(FULL), FORM) is None
    assert elicitation_problem(accept({"name": "Al", "age": 0}), FORM) is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"name": "A"}, "content.name: 'A' is too short"),
        ({"name": "Annabel"}, "content.name: 'Annabel' is too long"),
        ({"name": 3}, "content.name: 3 is not of type 'string'"),
        ({"email": "not-an-email"}, "content.email: 'not-an-email' is not a 'email'"),
        ({"site": "no scheme"}, "content.site: 'no scheme' is not a 'uri'"),
        ({"born": "1990-02-30"}, "content.born: '1990-02-30' is not a 'date'"),
        ({"born": "28/02/1990"}, "content.born: '28/02/1990' is not a 'date'"),
        ({"at": "2026-07-28 10:00"}, "content.at: '2026-07-28 10:00' is not a 'date-time'"),
        ({"age": -1}, "content.age: -1 is less than the minimum of 0"),
        ({"age": 151}, "content.age: 151 is greater than the maximum of 150"),
        ({"age": 1.5}, "content.age: 1.5 is not of type 'integer'"),
        ({"age": True}, "content.age: True is not of type 'integer'"),
        ({"score": 2}, "content.score: 2 is greater than the maximum of 1.5"),
        ({"ok": "yes"}, "content.ok: 'yes' is not of type 'boolean'"),
        ({"color": "Blue"}, "content.color: 'Blue' is not one of ['Red', 'Green']"),
        ({"hex": "#00f"}, "content.hex: '#00f' is not valid under any of the given schemas"),
        ({"tags": []}, "content.tags: [] should be non-empty"),
        ({"tags": ["a", "b", "c"]}, "content.tags: ['a', 'b', 'c'] is too long"),
        ({"tags": ["a", "z"]}, "content.tags[1]: 'z' is not one of ['a', 'b', 'c']"),
        ({"hexes": ["#00f"]}, "content.hexes[0]: '#00f' is not valid under any of the given schemas"),
    ],
)
def test_each_constraint_is_enforced_and_the_failing_field_is_named(
    change: dict[str, Any], problem: str
) -> None:
    assert elicitation_problem(accept({**FULL, **change}), FORM) == problem


def test_a_missing_required_field_is_named() -> None:
    content = {k: v for k, v in FULL.items() if k != "age"}
    assert elicitation_problem(accept(content), FORM) == "content.age: 'age' is a required property"
    assert elicitation_problem({"action": "accept"}, FORM) == "content.name: 'name' is a required property"


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_only_an_accept_carries_content(action: str) -> None:
    assert elicitation_problem({"action": action}, FORM) is None
    assert elicitation_problem({"action": action, "content": {}}, FORM) is None
    assert (
        elicitation_problem({"action": action, "content": {"name": "Ann"}}, FORM)
        == f"content: a {action} carries no content (only an accept does)"
    )


def test_url_mode_and_unknown_requests_check_no_schema() -> None:
    url = {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e", "requestedSchema": SCHEMA}
    assert elicitation_problem({"action": "accept"}, url) is None
    assert elicitation_problem(accept({}), None) is None
    assert elicitation_problem({"action": "maybe"}, FORM) is not None


def test_a_broken_schema_is_the_upstreams_problem() -> None:
    assert schema_problem({"type": "no-such-type"}, {}) is None


FIELD_VALUES = {
    "name": st.text(min_size=2, max_size=5),
    "age": st.integers(0, 150),
    "score": st.floats(0.5, 1.5),
    "ok": st.booleans(),
    "color": st.sampled_from(["Red", "Green"]),
    "hex": st.sampled_from(["#f00", "#0f0"]),
    "tags": st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2),
    "hexes": st.lists(st.sampled_from(["#f00", "#0f0"]), min_size=1, max_size=4),
    "born": st.dates().map(lambda d: d.isoformat()).filter(lambda s: len(s) == 10),
}
OPTIONAL = {k: v for k, v in FIELD_VALUES.items() if k not in SCHEMA["required"]}


@given(st.fixed_dictionaries({"name": FIELD_VALUES["name"], "age": FIELD_VALUES["age"]}, optional=OPTIONAL))
def test_property_every_answer_the_schema_allows_passes(content: dict[str, Any]) -> None:
    assert elicitation_problem(accept(content), FORM) is None


@given(
    st.fixed_dictionaries({"name": FIELD_VALUES["name"], "age": FIELD_VALUES["age"]}, optional=OPTIONAL),
    st.sampled_from(sorted(FIELD_VALUES)),
    st.one_of(st.none(), st.lists(st.integers(), min_size=3), st.dictionaries(st.text(), st.integers())),
)
def test_property_one_wrong_value_is_refused_and_named(
    content: dict[str, Any], key: str, bad: object
) -> None:
    problem = elicitation_problem(accept({**content, key: bad}), FORM)
    assert problem is not None and problem.startswith(f"content.{key}")


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ({"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}, None),
        (
            {
                "role": "user",
                "content": [{"type": "text", "text": "x"}],
                "model": "m",
                "stopReason": "endTurn",
            },
            None,
        ),
        (
            {"role": "system", "content": {"type": "text"}, "model": "m"},
            "role: 'system' is not 'user' or 'assistant'",
        ),
        ({"role": "assistant", "content": "hi", "model": "m"}, "content: must be a content block"),
        (
            {"role": "assistant", "content": [{"text": "x"}], "model": "m"},
            "content[0]: must be a content block",
        ),
        (
            {"role": "assistant", "content": {"type": "text"}},
            "model: a sampling response needs a string 'model'",
        ),
        (
            {"role": "assistant", "content": {"type": "text"}, "model": "m", "stopReason": 1},
            "stopReason: must be",
        ),
    ],
)
def test_sampling_results_have_the_spec_shape(response: dict[str, Any], problem: str | None) -> None:
    found = sampling_problem(response)
    assert found == problem if problem is None else (found or "").startswith(problem)


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ({"roots": [{"uri": "file:///a", "name": "a"}, {"uri": "file:///b"}]}, None),
        ({"roots": ["file:///a"]}, "roots[0]: must be an object"),
        ({"roots": [{"uri": "file:///a"}, {"uri": "https://x"}]}, "roots[1].uri: must be a file:// URI"),
        ({"roots": [{"uri": "file:///a", "name": 3}]}, "roots[0].name: must be a string"),
    ],
)
def test_roots_results_have_the_spec_shape(response: dict[str, Any], problem: str | None) -> None:
    assert roots_problem(response) == problem


def test_a_schema_too_deep_for_jsonschema_is_not_checked_rather_than_a_recursion_error() -> None:
    """A requestedSchema 120 levels deep (a message may nest 254) was a RecursionError when the client's
    answer was checked: an HTTP 500 to the client. Like an invalid schema, it is the upstream's problem."""
    schema: dict[str, Any] = {"type": "string"}
    content: Any = "x"
    for _ in range(120):
        schema, content = {"type": "object", "properties": {"a": schema}}, {"a": content}
    params = {
        "mode": "form",
        "message": "m",
        "requestedSchema": {"type": "object", "properties": {"a": schema}},
    }
    assert elicitation_problem({"action": "accept", "content": {"a": content}}, params) is None
    assert elicitation_problem({"action": "accept", "content": {"a": 3}}, params) is None


# A form of plain fields (what FastMCP's pydantic models ask) is checked without jsonschema when the answer
# fills it; whatever the shortcut says, the answer is the full check's.
PLAIN: dict[str, Any] = {
    "type": "object",
    "title": "Person",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "age": {"type": "integer", "description": "years", "default": 1},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
    },
    "required": ["name"],
}
PLAIN_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3), st.just([])
)


def test_a_plain_form_filled_in_passes_without_the_schema_machinery() -> None:

    content = {"name": "Ann", "age": 3.0, "score": 2, "ok": False, "extra": [1]}
    assert plainly_valid(PLAIN, content)
    assert schema_problem(PLAIN, content) is None
    assert elicitation_problem(accept(content), {"requestedSchema": PLAIN}) is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"age": 3}, "content.name: 'name' is a required property"),
        ({"name": "Ann", "age": True}, "content.age: True is not of type 'integer'"),
        ({"name": "Ann", "score": "1"}, "content.score: '1' is not of type 'number'"),
        ({"name": 1}, "content.name: 1 is not of type 'string'"),
    ],
)
def test_a_plain_form_filled_in_wrongly_gets_the_full_checks_words(
    content: dict[str, Any], problem: str
) -> None:

    assert not plainly_valid(PLAIN, content)
    assert elicitation_problem(accept(content), {"requestedSchema": PLAIN}) == problem


@pytest.mark.parametrize(
    "schema",
    [
        {**PLAIN, "additionalProperties": False},  # another keyword on the form
        {**PLAIN, "properties": {"name": {"type": "string", "minLength": 9}}},  # another keyword on a field
        {**PLAIN, "properties": {"name": {"type": ["string", "null"]}}},  # a type that is not one name
        {**PLAIN, "type": "array"},
    ],
)
def test_anything_beyond_plain_fields_goes_to_the_full_check(schema: dict[str, Any]) -> None:

    assert not plainly_valid(schema, {"name": "Ann"})


@given(st.dictionaries(st.sampled_from(["name", "age", "score", "ok", "x"]), PLAIN_VALUES))
def test_property_the_shortcut_never_passes_what_the_full_check_refuses(content: dict[str, Any]) -> None:

    if plainly_valid(PLAIN, content):
        assert schema_problem(PLAIN, content) is None
    full = schema_problem(PLAIN, content)
    assert elicitation_problem(accept(content), {"requestedSchema": PLAIN}) == full
