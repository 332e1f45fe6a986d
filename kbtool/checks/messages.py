"""One wording for schema problems, whichever layer (JSON Schema or pydantic) found them."""

from __future__ import annotations

import difflib
from typing import Any

_TYPE_NAMES = {
    "string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
    "array": "a list", "object": "a mapping", "null": "nothing",
}


def show(value: Any) -> str:
    s = repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


def missing(name: str) -> str:
    return f"missing required field '{name}'"


def unknown_key(name: str) -> str:
    return f"unknown key '{name}'"


def did_you_mean(name: str, allowed: list[str]) -> str | None:
    near = difflib.get_close_matches(name, allowed, n=1)
    return f"did you mean '{near[0]}'?" if near else f"allowed keys: {', '.join(allowed)}"


def wrong_type(expected: str | list[str], value: Any) -> str:
    names = [expected] if isinstance(expected, str) else expected
    want = " or ".join(_TYPE_NAMES.get(n, n) for n in names)
    return f"expected {want}, got {show(value)}"


def not_one_of(value: Any, allowed: list[Any]) -> str:
    return f"{show(value)} is not one of {allowed}"


def bad_pattern(value: Any) -> str:
    return f"{show(value)} is not a valid value here (ids are lowercase kebab-case)"


def too_small(value: Any, limit: Any) -> str:
    return f"{show(value)} is below the minimum {limit}"


def too_large(value: Any, limit: Any) -> str:
    return f"{show(value)} is above the maximum {limit}"


def too_few(limit: int) -> str:
    return f"needs at least {limit} item{'s' if limit != 1 else ''}"
