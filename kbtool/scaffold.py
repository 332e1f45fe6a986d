"""`kb new KIND ID`: a new record with its kind's required fields, each explained by a comment."""

from __future__ import annotations

import enum
import re
import textwrap
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from kbtool.errors import UsageError, WriteError
from kbtool.fmt.core import canonical
from kbtool.fmt.order import key_order
from kbtool.model import FOLDERS, MODELS
from kbtool.model.common import ID_MAX_LENGTH, ID_PATTERN, Source
from kbtool.store import roundtrip
from kbtool.store.writer import atomic_write, file_lock, make_folder

TODO = "TODO"
COLUMN = 32  # where the explaining comments start


def record_path(root: Path, kind: str, rid: str) -> Path:
    _check(kind, rid)
    return root / FOLDERS[kind] / f"{rid}.yaml"


def _check(kind: str, rid: str) -> None:
    if kind not in MODELS:
        raise UsageError(f"unknown kind '{kind}'", fix=f"use one of: {', '.join(MODELS)}")
    if kind == "evidence":
        raise UsageError("evidence records are written only by `kb probe run`", fix="run `kb probe run --write`")
    if len(rid) > ID_MAX_LENGTH:
        raise UsageError(f"'{rid[:40]}...' is {len(rid)} characters; an id has at most {ID_MAX_LENGTH}",
                         fix="use a shorter id (it is also the file name)")
    if not re.fullmatch(ID_PATTERN, rid):
        raise UsageError(f"'{rid}' is not a valid id", fix="use lowercase letters, digits, '.', '+' and '-'")


def scaffold(kind: str, rid: str, path: Path) -> str:
    """The text of a new record of `kind` with id `rid`, as it would be written at `path`."""
    _check(kind, rid)
    model = MODELS[kind]
    data = _mapping(model, {"id": rid, "kind": kind})
    optional = [k for k in key_order(model) if k not in data]
    if optional:
        data.yaml_set_start_comment("\n".join(textwrap.wrap(f"Optional fields: {', '.join(optional)}.", 100)))
    return canonical(roundtrip.dump(data), path)


def create(root: Path, kind: str, rid: str) -> Path:
    """Write the scaffold into the records tree; refuses to overwrite."""
    path = record_path(root, kind, rid)
    text = scaffold(kind, rid, path)
    if path.exists():
        raise WriteError(f"{path} already exists", fix="pick another id, or edit the file")
    make_folder(path.parent)
    with file_lock(path):
        atomic_write(path, text, exclusive=True)
    return path


def _fields(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    by_key = {(f.alias or n): f for n, f in model.model_fields.items()}
    return [(k, by_key[k]) for k in key_order(model)]


# Optional fields a scaffold still lists, because the record does not validate without them for the
# placeholder's choice (a `full` layer group needs its KV heads and head dim).
ALSO = {"LayerGroup": ("kv_heads", "head_dim"), "Model": ("max_context",)}


def _mapping(model: type[BaseModel], given: dict[str, Any]) -> CommentedMap:
    m = CommentedMap()
    also = ALSO.get(model.__name__, ())
    for key, f in _fields(model):
        if key in given:
            m[key] = given[key]
        elif f.is_required() or key == "sources" or key in also:
            m[key] = _placeholder(f.annotation, key)
        else:
            continue
        if f.description and key not in given:
            m.yaml_add_eol_comment(_comment(f), key, column=COLUMN)
    return m


def _comment(f: FieldInfo) -> str:
    choices = _choices(f.annotation)
    text = f.description or ""
    return f"{text} (one of: {' | '.join(choices)})" if choices else text


def _choices(ann: Any) -> list[str]:
    if get_origin(ann) is Literal:
        return [str(a) for a in get_args(ann)]
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return [str(e.value) for e in ann]
    if get_origin(ann) in (Union, types.UnionType):
        return [c for a in get_args(ann) if a is not type(None) for c in _choices(a)]
    return []


def _placeholder(ann: Any, key: str) -> Any:
    """A value of the right shape that the editor replaces."""
    if key == "sources":
        src = CommentedMap(type="doc", url=TODO)
        src.yaml_add_eol_comment(" | ".join(_choices(Source.model_fields["type"].annotation)), "type", column=COLUMN)
        src.yaml_add_eol_comment("or repo + path + commit (+ line), or seed", "url", column=COLUMN)
        return CommentedSeq([src])
    origin = get_origin(ann)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(ann) if a is not type(None)]
        return _placeholder(args[-1] if len(args) > 1 and _is_model(args[-1]) else args[0], key)
    if origin is list:
        return CommentedSeq([_placeholder(get_args(ann)[0], key)])
    if origin is dict:
        return CommentedMap()
    choices = _choices(ann)
    if choices:
        return choices[0]
    if _is_model(ann):
        return _mapping(ann, {})
    if ann is int or ann is float:
        return 0
    if ann is bool:
        return False
    return TODO.lower() if key in ("subject", "architecture") else TODO


def _is_model(ann: Any) -> bool:
    return isinstance(ann, type) and issubclass(ann, BaseModel)
