"""KB101: a record checked against its JSON Schema, then loaded into its pydantic model."""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

import jsonschema
from pydantic import ValidationError

from kbtool.checks import messages as msg
from kbtool.checks.fastschema import surely_valid
from kbtool.findings import Finding, render_path
from kbtool.model import MODELS, Record
from kbtool.schema_io import load
from kbtool.store.reader import Document

CODE = "KB101"


@cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load(kind))


def validate_document(doc: Document) -> tuple[Record | None, list[Finding]]:
    data = doc.data
    if not isinstance(data, dict):
        return None, [_at(doc, (), f"a record is a mapping of fields, got {msg.show(data)}")]
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in MODELS:
        path = ("kind",) if "kind" in data else ()
        text = msg.not_one_of(kind, list(MODELS)) if "kind" in data else msg.missing("kind")
        return None, [_at(doc, path, text)]
    nan = _find_nan(data, ())
    if nan is not None:
        return None, [Finding("KB401", "NaN or infinity is not a value", doc.file, doc.line_of(nan),
                              render_path(nan), check="values")]
    errors = [] if surely_valid(kind, data) else sorted(_validator(kind).iter_errors(data),
                                                          key=lambda e: list(e.absolute_path))
    if errors:
        return None, [_schema_finding(doc, e) for e in errors]
    try:
        return MODELS[kind].model_validate(data), []
    except ValidationError as e:
        return None, [_pydantic_finding(doc, err) for err in e.errors()]


def _at(doc: Document, path: tuple[Any, ...], text: str) -> Finding:
    return Finding(CODE, text, doc.file, doc.line_of(path), render_path(path), check="schema")


def _find_nan(data: Any, path: tuple[Any, ...]) -> tuple[Any, ...] | None:
    if isinstance(data, float) and not math.isfinite(data):
        return path
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        hit = _find_nan(v, (*path, k))
        if hit is not None:
            return hit
    return None


def _deepest(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For anyOf/oneOf failures, the branch error that got furthest into the data."""
    if err.validator in ("anyOf", "oneOf") and err.context:
        real = [e for e in err.context if not (e.validator == "type" and e.validator_value == "null")]
        best = max(real or err.context, key=lambda e: len(e.absolute_path), default=None)
        return _deepest(best) if best is not None else err
    return err


def _schema_finding(doc: Document, err: jsonschema.ValidationError) -> Finding:
    err = _deepest(err)
    path = tuple(err.absolute_path)
    v, arg = err.validator, err.validator_value
    inst = err.instance
    if v == "required":
        name = next((r for r in arg if not (isinstance(inst, dict) and r in inst)), str(arg))
        path, text = (*path, name), msg.missing(name)
    elif v == "additionalProperties":
        props = list(err.schema.get("properties", {}))
        extra = [k for k in inst if k not in props] if isinstance(inst, dict) else []
        name = extra[0] if extra else "?"
        path, text = (*path, name), msg.unknown_key(name)
        return Finding(CODE, text, doc.file, doc.line_of(path), render_path(path), fix=msg.did_you_mean(name, props),
                       check="schema")
    elif v == "type":
        text = msg.wrong_type(arg, inst)
    elif v in ("enum", "const"):
        text = msg.not_one_of(inst, arg if v == "enum" else [arg])
    elif v == "pattern":
        text = msg.bad_pattern(inst)
    elif v in ("minimum", "exclusiveMinimum"):
        text = msg.too_small(inst, arg)
    elif v in ("maximum", "exclusiveMaximum"):
        text = msg.too_large(inst, arg)
    elif v == "minItems":
        text = msg.too_few(arg)
    elif v in ("maxLength", "minLength"):
        text = f"{msg.show(inst)} has the wrong length (limit {arg})"
    else:
        text = err.message
    return _at(doc, path, text)


_PYD_TYPES = {"string_type": "string", "int_type": "integer", "float_type": "number", "bool_type": "boolean",
              "list_type": "array", "dict_type": "object", "model_type": "object", "int_from_float": "integer"}


def _pydantic_finding(doc: Document, err: Any) -> Finding:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and (p[:1].isupper() or "[" in p)))
    t, ctx, inp = err["type"], err.get("ctx") or {}, err.get("input")
    if t == "missing":
        text = msg.missing(str(loc[-1]))
    elif t == "extra_forbidden":
        text = msg.unknown_key(str(loc[-1]))
    elif t in _PYD_TYPES:
        text = msg.wrong_type(_PYD_TYPES[t], inp)
    elif t in ("literal_error", "enum"):
        text = msg.not_one_of(inp, re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
    elif t == "string_pattern_mismatch":
        text = msg.bad_pattern(inp)
    elif t in ("greater_than_equal", "greater_than"):
        text = msg.too_small(inp, ctx.get("ge", ctx.get("gt")))
    elif t in ("less_than_equal", "less_than"):
        text = msg.too_large(inp, ctx.get("le", ctx.get("lt")))
    elif t == "too_short":
        text = msg.too_few(int(ctx.get("min_length", 1)))
    elif t == "value_error":
        text = str(ctx.get("error", err["msg"]))
    else:
        text = err["msg"]
    return _at(doc, loc, text)
