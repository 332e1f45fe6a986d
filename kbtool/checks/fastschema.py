"""A fast yes/no check against the JSON Schema subset that kb's generated schemas use.

`kb validate` spends most of its time in jsonschema, walking valid records to find no errors. This module
compiles a schema once into plain Python predicates. A "yes" is only given when jsonschema would also accept
the record (every test here is at least as strict as the Draft 2020-12 keyword it stands for), so the caller
may skip jsonschema then. A "no" proves nothing: the caller asks jsonschema for the exact errors. A schema
with any keyword this module does not know is never compiled (every record of that kind goes to jsonschema).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from kbtool.schema_io import load

Check = Callable[[Any], bool]
_IGNORED = frozenset({"title", "description", "default", "$schema", "$id", "$defs", "examples", "$comment",
                      "deprecated", "readOnly", "writeOnly"})


class Unsupported(Exception):
    """The schema uses something this module does not check; use jsonschema for this kind."""


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_TYPES: dict[str, Check] = {
    "string": lambda x: isinstance(x, str),
    "integer": lambda x: type(x) is int,  # jsonschema also takes 5.0; rejecting it only defers to jsonschema
    "number": _is_number,
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "array": lambda x: isinstance(x, list),
    "object": lambda x: isinstance(x, dict),
}


def _same(x: Any, want: Any) -> bool:
    """Equal and of the same type, scalars only (a container in enum/const defers to jsonschema)."""
    if isinstance(want, (list, dict)):
        return False
    return type(x) is type(want) and x == want


def compile_schema(schema: dict[str, Any]) -> Check:
    """A predicate that is True only for instances the schema accepts. Raises Unsupported."""
    defs = schema.get("$defs", {})
    compiled: dict[str, Check] = {}

    def build(node: Any) -> Check:
        if node is True:
            return lambda x: True
        if node is False:
            return lambda x: False
        if not isinstance(node, dict):
            raise Unsupported(repr(node)[:60])
        if "patternProperties" in node or "unevaluatedProperties" in node:
            raise Unsupported("patternProperties")
        checks = [_keyword(k, v, node, build) for k, v in node.items() if k not in _IGNORED]
        if not checks:
            return lambda x: True
        if len(checks) == 1:
            return checks[0]
        return lambda x: all(c(x) for c in checks)

    def _ref(name: str) -> Check:
        return lambda x: compiled[name](x)

    def _keyword(k: str, v: Any, node: dict[str, Any], build: Callable[[Any], Check]) -> Check:
        if k == "$ref":
            if not (isinstance(v, str) and v.startswith("#/$defs/") and v[8:] in defs):
                raise Unsupported(v)
            return _ref(v[8:])
        if k == "type":
            names = v if isinstance(v, list) else [v]
            if any(n not in _TYPES for n in names):
                raise Unsupported(str(v))
            tests = [_TYPES[n] for n in names]
            return tests[0] if len(tests) == 1 else (lambda x: any(t(x) for t in tests))
        if k == "properties":
            props = {p: build(s) for p, s in v.items()}
            return lambda x: not isinstance(x, dict) or all(props[p](x[p]) for p in props if p in x)
        if k == "required":
            req = tuple(v)
            return lambda x: not isinstance(x, dict) or all(r in x for r in req)
        if k == "additionalProperties":
            known = frozenset(node.get("properties", {}))
            extra = build(v)
            return lambda x: not isinstance(x, dict) or all(extra(val) for key, val in x.items() if key not in known)
        if k == "items":
            if isinstance(v, list) or "prefixItems" in node:
                raise Unsupported("tuple items")
            item = build(v)
            return lambda x: not isinstance(x, list) or all(item(i) for i in x)
        if k in ("anyOf", "oneOf", "allOf"):
            subs = [build(s) for s in v]
            if k == "anyOf":
                return lambda x: any(s(x) for s in subs)
            if k == "allOf":
                return lambda x: all(s(x) for s in subs)
            return lambda x: sum(1 for s in subs if s(x)) == 1
        if k == "enum":
            options = list(v)
            return lambda x: any(_same(x, o) for o in options)
        if k == "const":
            return lambda x: _same(x, v)
        if k == "pattern":
            rx = re.compile(v)
            return lambda x: not isinstance(x, str) or rx.search(x) is not None
        if k in ("minLength", "maxLength"):
            n = int(v)
            if k == "minLength":
                return lambda x: not isinstance(x, str) or len(x) >= n
            return lambda x: not isinstance(x, str) or len(x) <= n
        if k in ("minItems", "maxItems"):
            n = int(v)
            if k == "minItems":
                return lambda x: not isinstance(x, list) or len(x) >= n
            return lambda x: not isinstance(x, list) or len(x) <= n
        if k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if not _is_number(v):
                raise Unsupported(k)
            lim = v
            if k == "minimum":
                return lambda x: not _is_number(x) or x >= lim
            if k == "maximum":
                return lambda x: not _is_number(x) or x <= lim
            if k == "exclusiveMinimum":
                return lambda x: not _is_number(x) or x > lim
            return lambda x: not _is_number(x) or x < lim
        raise Unsupported(k)

    for name, d in defs.items():
        compiled[name] = build(d)
    return build({k: v for k, v in schema.items() if k != "$defs"})


@cache
def checker(kind: str) -> Check | None:
    """The compiled check for a kind's schema file, or None when the schema is outside the subset."""
    try:
        return compile_schema(load(kind))
    except (Unsupported, re.error, TypeError, ValueError):
        return None


def surely_valid(kind: str, data: Any) -> bool:
    """True only when the kind's JSON Schema accepts `data`; False means: ask jsonschema."""
    check = checker(kind)
    if check is None:
        return False
    try:
        return check(data)
    except RecursionError:
        return False
