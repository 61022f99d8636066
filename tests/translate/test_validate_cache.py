"""The checked validators `translate/answers.py` keeps per requested schema: the same answers as checking
afresh, whatever the caller does with its schema afterwards, and never a broken schema's checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.translate import answers as validate  # where the cache lives since the full checks
from proxy.translate.validate import invalid_input_response
from proxy.wire import mcp

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}
CONTENTS: list[dict[str, Any]] = [
    {"name": "x", "age": 3, "tags": ["a"]},
    {"name": 1, "age": "old", "tags": [2]},  # several errors: the same one is reported
    {"age": "old"},
    {"tags": ["a", 3]},
]


def _answer(schema: dict[str, Any], content: dict[str, Any]) -> str | None:
    return invalid_input_response(
        mcp.ELICIT, {"action": "accept", "content": content}, {"requestedSchema": schema}
    )


def _afresh(schema: dict[str, Any], content: dict[str, Any]) -> str | None:
    checker = validate._compile(schema)
    if checker is None:
        return None
    error = validate.schema_errors.best_match(checker.iter_errors(content))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"content{where}: {error.message}"


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    validate._checker.cache_clear()


@pytest.mark.parametrize("content", CONTENTS)
def test_cached_answers_are_the_answers_checked_afresh(content: dict[str, Any]) -> None:
    first = _answer(SCHEMA, content)
    assert first == _afresh(SCHEMA, content)
    assert _answer(copy.deepcopy(SCHEMA), content) == first  # an equal schema: the kept validator
    assert validate._checker.cache_info().hits >= 1


def test_the_kept_validator_does_not_follow_the_callers_dict() -> None:
    schema = copy.deepcopy(SCHEMA)
    assert _answer(schema, {"name": 1}) == "content.name: 1 is not of type 'string'"
    schema["properties"]["name"] = {"type": "integer"}  # the caller reuses its dict for another schema
    assert _answer(schema, {"name": 1}) is None
    assert _answer(copy.deepcopy(SCHEMA), {"name": 1}) == "content.name: 1 is not of type 'string'"


def test_a_broken_schema_is_never_checked_against_cached_or_not() -> None:
    broken = {"type": "no-such-type"}
    assert _answer(broken, {}) is None
    assert _answer(broken, {}) is None


def test_a_large_schema_is_checked_afresh_with_the_same_answer() -> None:
    big = copy.deepcopy(SCHEMA)
    big["description"] = "x" * (validate.MAX_CACHED_SCHEMA + 1)
    assert _answer(big, {"age": "old"}) == "content.age: 'old' is not of type 'integer'"
    assert validate._checker.cache_info().currsize == 0
