"""KB101: a record loaded into its pydantic model, in one pass; each problem a located finding.

The models are the authority; schema/*.schema.json is generated from them for editors and other languages, and
tests/test_schema_files.py proves the published schemas accept and reject the same corpus as the models.
Wording is shared with nothing else: one problem, one message, with the fix where there is one.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from kbtool.findings import Finding, render_path
from kbtool.model import MODELS, Record
from kbtool.store.document import Document

CODE = "KB101"
_TYPE_NAMES = {"string_type": "a string", "int_type": "an integer", "int_parsing": "an integer",
               "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
               "bool_parsing": "true or false", "list_type": "a list", "dict_type": "a mapping",
               "model_type": "a mapping", "model_attributes_type": "a mapping", "int_from_float": "an integer",
               "string_sub_type": "a string"}


def show(value: Any) -> str:
    s = repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


def validate_document(doc: Document) -> tuple[Record | None, list[Finding]]:
    """The record in `doc` and no findings, or None and every schema problem in it."""
    data = doc.data
    if not isinstance(data, dict):
        return None, [_at(doc, (), f"a record is a mapping of fields, got {show(data)}")]
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in MODELS:
        if "kind" not in data:
            return None, [_at(doc, (), "missing required field 'kind'")]
        return None, [_at(doc, ("kind",), f"{show(kind)} is not one of {list(MODELS)}")]
    nan = None if doc.clean else _find_nan(data, ())
    if nan is not None:
        return None, [Finding("KB401", "NaN or infinity is not a value", doc.file, doc.line_of(nan),
                              render_path(nan), check="values")]
    try:
        return MODELS[kind].model_validate(data), []
    except ValidationError as e:
        seen: set[tuple[str, str]] = set()
        out = []
        for err in e.errors():
            f = _finding(doc, MODELS[kind], err)
            if (f.path, f.message) not in seen:  # a union reports one problem once per branch
                seen.add((f.path, f.message))
                out.append(f)
        return None, out


def _at(doc: Document, path: tuple[Any, ...], text: str, fix: str | None = None) -> Finding:
    return Finding(CODE, text, doc.file, doc.line_of(path), render_path(path), fix=fix, check="schema")


def _find_nan(data: Any, path: tuple[Any, ...]) -> tuple[Any, ...] | None:
    if isinstance(data, float) and not math.isfinite(data):
        return path
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        hit = _find_nan(v, (*path, k))
        if hit is not None:
            return hit
    return None


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model of the mapping at `loc` of a `model` record, as far as it can be told."""
    cur: Any = model
    for part in loc:
        if isinstance(part, int) or cur is None:
            continue
        field = cur.model_fields.get(part) or next((f for f in cur.model_fields.values() if f.alias == part), None)
        cur = _model_of(field.annotation) if field is not None else None
    return cur  # type: ignore[no-any-return]


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed in the mapping at `loc` of a `model` record (by alias), as far as they can be told."""
    cur = _model_at(model, loc)
    if cur is None:
        return []
    return [f.alias or name for name, f in cur.model_fields.items()]


def _missing_fix(model: type[BaseModel], loc: tuple[Any, ...]) -> str | None:
    """The fix for a missing field: add it, with what the model says it holds."""
    cur = _model_at(model, loc[:-1])
    field = cur.model_fields.get(str(loc[-1])) if cur is not None else None
    if field is None or not field.description:
        return None
    return f"add '{loc[-1]}' ({field.description[0].lower()}{field.description[1:]})"


def _model_of(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in getattr(tp, "__args__", ()):
        got = _model_of(arg)
        if got is not None:
            return got
    return None


def _finding(doc: Document, model: type[BaseModel], err: Any) -> Finding:
    # pydantic names union branches and tagged variants in the location; the record path has neither
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and (p[:1].isupper() or "[" in p)))
    t, ctx, inp = err["type"], err.get("ctx") or {}, err.get("input")
    if t == "missing":
        return _at(doc, loc, f"missing required field '{loc[-1]}'", _missing_fix(model, loc))
    if t == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        near = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        fix = f"did you mean '{near[0]}'?" if near else f"allowed keys: {', '.join(allowed)}" if allowed else None
        return _at(doc, loc, f"unknown key '{loc[-1]}'", fix)
    if t in _TYPE_NAMES:
        text = f"expected {_TYPE_NAMES[t]}, got {show(inp)}"
    elif t in ("literal_error", "enum"):
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        text = f"{show(inp)} is not one of {allowed}"
    elif t == "string_pattern_mismatch":
        text = f"{show(inp)} is not a valid value here (ids are lowercase kebab-case)"
    elif t in ("greater_than_equal", "greater_than"):
        text = f"{show(inp)} is below the minimum {ctx.get('ge', ctx.get('gt'))}"
    elif t in ("less_than_equal", "less_than"):
        text = f"{show(inp)} is above the maximum {ctx.get('le', ctx.get('lt'))}"
    elif t == "too_short":
        n = int(ctx.get("min_length", 1))
        text = f"needs at least {n} item{'s' if n != 1 else ''}"
    elif t == "value_error":
        text = str(ctx.get("error", err["msg"]))
    else:
        text = err["msg"]
    return _at(doc, loc, text)
