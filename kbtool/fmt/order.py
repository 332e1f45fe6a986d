"""Canonical key order, derived from the models' field order.

A record starts with `id, kind, name, aliases`, then the kind's own fields in the order its model declares
them, and ends with `sources, notes`. Nested mappings (facts, sources, reasons, conditions, ...) follow their
model's declaration order. Keys no model knows keep their relative order, after the known ones.
"""

from __future__ import annotations

import types
from functools import cache
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from kbtool.model import MODELS, Record

HEAD = ("id", "kind", "name", "aliases")
TAIL = ("sources", "notes")


def _key(name: str, model: type[BaseModel]) -> str:
    f = model.model_fields[name]
    return f.alias or name


@cache
def key_order(model: type[BaseModel]) -> tuple[str, ...]:
    """The canonical order of a model's keys (aliases, as written in YAML)."""
    keys = [_key(n, model) for n in model.model_fields]
    if issubclass(model, Record):
        middle = [k for k in keys if k not in HEAD and k not in TAIL]
        return (*HEAD, *middle, *TAIL)
    return tuple(keys)


def record_order(kind: str) -> tuple[str, ...]:
    return key_order(MODELS[kind])


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """Every pydantic model an annotation can hold directly, through Optional, Union, list and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = get_origin(annotation)
    if origin is None:
        return []
    if origin in (Union, types.UnionType, list, tuple, set, frozenset, Annotated):
        return [m for a in get_args(annotation) for m in _models_in(a)]
    return []  # dict[...] and other containers: free-form, order kept


@cache
def child_models(model: type[BaseModel], key: str) -> tuple[type[BaseModel], ...]:
    """Models the value at `key` of a `model` mapping may be (several for unions such as conditions)."""
    for name, f in model.model_fields.items():
        if (f.alias or name) == key:
            return tuple(_models_in(f.annotation))
    return ()


def pick(candidates: tuple[type[BaseModel], ...], keys: list[str]) -> type[BaseModel] | None:
    """The candidate model that knows the most of `keys` (ties: the first declared)."""
    best, score = None, 0
    for m in candidates:
        known = set(key_order(m))
        s = sum(1 for k in keys if k in known)
        if s > score:
            best, score = m, s
    return best


def sort_keys(keys: list[str], model: type[BaseModel]) -> list[str]:
    order = {k: i for i, k in enumerate(key_order(model))}
    known = sorted((k for k in keys if k in order), key=order.__getitem__)
    return known + [k for k in keys if k not in order]
