"""Whether a client's answer is a valid result for the input request it answers, checked in full.

An accepted form elicitation's `content` is checked against the whole `requestedSchema` (types, `required`,
enums and titled enums, string lengths, number bounds, multi-select item counts, and the formats the
elicitation spec names: email, uri, date, date-time); a declined or cancelled one carries no content. A
sampling result needs `role`, `content` and `model`; a roots result, `roots` of `file://` URIs. Every
problem names the failing field's path (`content.tags`, `roots[0].uri`, ...). Pure: no I/O.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime
from typing import Any
from urllib.parse import urlsplit

from jsonschema import FormatChecker, validators
from jsonschema import exceptions as schema_errors

ACTIONS = frozenset({"accept", "decline", "cancel"})
ROLES = frozenset({"user", "assistant"})

_FORMATS = FormatChecker(formats=())
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


@_FORMATS.checks("email")
def _is_email(value: object) -> bool:
    return not isinstance(value, str) or _EMAIL.fullmatch(value) is not None


@_FORMATS.checks("uri")
def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", parts.scheme) is not None and not any(
        c.isspace() for c in value
    )


@_FORMATS.checks("date", raises=ValueError)
def _is_date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) is None:
        return False
    date.fromisoformat(value)
    return True


@_FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if _DATE_TIME.fullmatch(value) is None:
        return False
    datetime.fromisoformat(value.replace("z", "Z").replace("t", "T").replace("Z", "+00:00"))
    return True


def elicitation_problem(response: Mapping[str, Any], params: Mapping[str, Any] | None) -> str | None:
    """Why `response` cannot answer an elicitation/create asked with `params` (None: not known), or None."""
    action = response.get("action")
    if action not in ACTIONS:
        return "an elicitation response needs 'action' of accept, decline or cancel"
    content = response.get("content")
    if "content" in response and not isinstance(content, dict):
        return "an elicitation response's 'content' must be an object"
    if action != "accept":
        if content:
            return f"content: a {action} carries no content (only an accept does)"
        return None
    schema = (params or {}).get("requestedSchema")
    if (params or {}).get("mode", "form") != "form" or not isinstance(schema, dict):
        return None
    if plainly_valid(schema, content or {}):
        return None
    return schema_problem(schema, content or {})


# A form of plain fields: what most tools ask (FastMCP's pydantic models, a name or a yes/no), checked here
# without the JSON Schema machinery (~1 µs instead of ~20: the key's JSON text, the validator's descent).
_PLAIN_FORM = frozenset({"type", "properties", "required", "title", "description"})
_PLAIN_FIELD = frozenset({"type", "title", "description", "default"})


def _string(value: object) -> bool:
    return type(value) is str


def _boolean(value: object) -> bool:
    return type(value) is bool


def _integer(value: object) -> bool:  # Draft 2020-12: 3.0 is an integer; True is not
    return (type(value) is int) or (type(value) is float and value.is_integer())


def _number(value: object) -> bool:
    return type(value) is int or type(value) is float


_PLAIN_TYPES: dict[str, Callable[[object], bool]] = {
    "string": _string,
    "boolean": _boolean,
    "integer": _integer,
    "number": _number,
}


def plainly_valid(schema: dict[str, Any], content: Mapping[str, Any]) -> bool:
    """True when `schema` is a form of plain fields (an object whose properties each have only a type
    among string, boolean, integer, number, and a title, description or default) and `content` fills it:
    every required field there, every field of its type. Then the full check finds nothing either. False
    says nothing: anything else (another keyword, a field of the wrong type) is for `schema_problem`,
    which names the problem (or finds the schema is not valid JSON Schema and checks nothing)."""
    properties, required = schema.get("properties", {}), schema.get("required", ())
    if (
        schema.get("type") != "object"
        or not schema.keys() <= _PLAIN_FORM
        or type(properties) is not dict
        or type(required) not in (list, tuple)
        or type(content) is not dict
    ):
        return False
    for name in required:
        if type(name) is not str or name not in content:
            return False
    for name, field in properties.items():
        if type(field) is not dict or not field.keys() <= _PLAIN_FIELD:
            return False
        kind = field.get("type")
        is_type = _PLAIN_TYPES.get(kind) if type(kind) is str else None
        if is_type is None or (name in content and not is_type(content[name])):
            return False
    return True


def schema_problem(schema: dict[str, Any], content: Any) -> str | None:
    """The first way `content` breaks `schema` (`content.<path>: <reason>`), or None. A schema that is not
    valid JSON Schema is the upstream's problem, not the client's: nothing is checked against it. Nor is
    one nested too deep for jsonschema's recursion (about 100 levels; a message may nest 254): checking
    it was a RecursionError, and an HTTP 500 to the client that answered."""
    try:
        key = json.dumps(schema)
        checker = _checker(key) if len(key) <= MAX_CACHED_SCHEMA else _compile(schema)
        if checker is None:
            return None
        errors = list(checker.iter_errors(content))
    except (TypeError, ValueError, RecursionError):
        return None
    if not errors:
        return None
    error = schema_errors.best_match(errors)
    path = list(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):  # name the missing field
        missing = [k for k in error.validator_value if k not in error.instance]
        path.append(missing[0] if missing else "")
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    return f"content{where}: {error.message}"


# Checking a schema against the JSON Schema meta-schema costs ~0.4 ms, paid for every answered elicitation,
# while a tool asks with the same schema every time: the checked validators of recent schemas are kept, by
# their JSON text (key order kept: it decides which of several errors is reported first).
MAX_CACHED_SCHEMA = 16 * 1024  # bytes of JSON; a larger schema is checked afresh every time
Checker = Any  # a jsonschema Draft 2020-12 validator with the elicitation formats


def _compile(schema: dict[str, Any]) -> Checker | None:
    """The full validator of a valid schema, or None (a schema that is not valid JSON Schema)."""
    try:
        validators.Draft202012Validator.check_schema(schema)
    except schema_errors.SchemaError:
        return None
    return validators.Draft202012Validator(schema, format_checker=_FORMATS)


@functools.lru_cache(maxsize=256)
def _checker(key: str) -> Checker | None:
    """`_compile` of the schema `key` is the JSON text of, from its own copy (never the caller's dict)."""
    return _compile(json.loads(key))


def sampling_problem(response: Mapping[str, Any]) -> str | None:
    """Why `response` is not a sampling/createMessage result, or None."""
    if not isinstance(response.get("role"), str) or "content" not in response:
        return "a sampling response needs 'role' and 'content'"
    if response["role"] not in ROLES:
        return f"role: {response['role']!r} is not 'user' or 'assistant'"
    content = response["content"]
    blocks = content if isinstance(content, list) else [content]
    for i, block in enumerate(blocks):
        where = f"content[{i}]" if isinstance(content, list) else "content"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"{where}: must be a content block (an object with a string 'type')"
    if not isinstance(response.get("model"), str):
        return "model: a sampling response needs a string 'model'"
    stop = response.get("stopReason")
    if stop is not None and not isinstance(stop, str):
        return "stopReason: must be a string"
    return None


def roots_problem(response: Mapping[str, Any]) -> str | None:
    """Why `response` is not a roots/list result, or None."""
    roots = response.get("roots")
    if not isinstance(roots, list):
        return "a roots response needs a 'roots' array"
    for i, root in enumerate(roots):
        if not isinstance(root, dict):
            return f"roots[{i}]: must be an object"
        uri = root.get("uri")
        if not isinstance(uri, str) or not uri.startswith("file://"):
            return f"roots[{i}].uri: must be a file:// URI"
        if "name" in root and not isinstance(root["name"], str):
            return f"roots[{i}].name: must be a string"
    return None
