"""Canonical form of one record file: schema line, key order, scalar style; comments kept.

`canonical(text, path)` returns the canonical text. It never changes what the record means: the result is
read back with kb's own safe reader and compared with the input, and any difference raises.
"""

from __future__ import annotations

import datetime
import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from kbtool.errors import InvalidRecordError
from kbtool.fmt import comments
from kbtool.fmt.order import child_models, pick, sort_keys
from kbtool.fmt.scalars import restyle
from kbtool.model import FOLDERS, MODELS
from kbtool.store import roundtrip
from kbtool.store.reader import parse_bytes

HEADER_PREFIX = "# yaml-language-server: $schema="
_FOLDERS = frozenset(FOLDERS.values())


def records_root_of(path: Path) -> Path:
    """The records tree a record file belongs to: the parent of its kind folder."""
    p = Path(os.path.abspath(path))
    for d in p.parents:
        if d.name in _FOLDERS:
            return d.parent
    return p.parent.parent


def schema_line(path: Path, kind: str) -> str:
    """`# yaml-language-server: $schema=../../schema/<kind>.schema.json`, relative to the record's folder.

    The schema folder is taken to sit beside the records tree, as in the kb checkout.
    """
    p = Path(os.path.abspath(path))
    target = records_root_of(p).parent / "schema" / f"{kind}.schema.json"
    return HEADER_PREFIX + Path(os.path.relpath(target, p.parent)).as_posix()


def strip_header(text: str) -> str:
    first, _, rest = text.partition("\n")
    return rest if first.startswith("# yaml-language-server:") else text


def canonical(text: str, path: Path, name: str | None = None) -> str:
    """The canonical text of the record file at `path` whose current content is `text`."""
    name = name or str(path)
    body = strip_header(text)
    doc, problems = parse_bytes(body.encode("utf-8"), name)
    if doc is None:
        first = problems[0].text() if problems else f"{name}: cannot read"
        raise InvalidRecordError(f"cannot format {first}", fix="fix the YAML first (`kb validate` locates it)")
    if not isinstance(doc.data, dict):
        raise InvalidRecordError(f"cannot format {name}: a record is a mapping", fix="see `kb new KIND ID`")
    kind = doc.data.get("kind")
    model = MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise InvalidRecordError(f"cannot format {name}: unknown kind {kind!r}",
                                 fix=f"use one of: {', '.join(MODELS)}")
    data = roundtrip.load(body, name)
    data.fa.set_block_style()  # the record itself is always a block mapping
    normalize(data, doc.data, model, flow=False)
    out = schema_line(path, str(kind)) + "\n" + roundtrip.dump(data)
    after, _ = parse_bytes(strip_header(out).encode("utf-8"), name)
    if after is None or not same(after.data, doc.data):
        raise InvalidRecordError(f"cannot format {name}: the canonical form would change its meaning",
                                 fix="please report this; the file was left as it is")
    return out


def normalize(node: Any, safe: Any, model: type[BaseModel] | None, flow: bool) -> Any:
    """Restyle scalars and reorder keys in place; return the (possibly replaced) node."""
    if isinstance(node, CommentedMap) and isinstance(safe, dict):
        inner = flow or bool(node.fa.flow_style())
        for k in list(node):
            val, cands = node[k], child_models(model, str(k)) if model is not None else ()
            if isinstance(val, CommentedSeq):
                node[k] = _seq(val, safe.get(str(k)), cands, inner)
            else:
                sub = pick(cands, [str(x) for x in val]) if isinstance(val, CommentedMap) else None
                node[k] = normalize(val, safe.get(str(k)), sub, inner)
        if model is not None:
            _reorder(node, model)
        return node
    if isinstance(node, CommentedSeq) and isinstance(safe, list):
        return _seq(node, safe, (), flow)
    return _scalar(node, safe, flow)


def _seq(node: Any, safe: Any, cands: tuple[type[BaseModel], ...], flow: bool) -> Any:
    if not isinstance(node, CommentedSeq) or not isinstance(safe, list):
        return _scalar(node, safe, flow)
    inner = flow or bool(node.fa.flow_style())
    for i, item in enumerate(node):
        sub = pick(cands, [str(x) for x in item]) if isinstance(item, CommentedMap) else None
        node[i] = normalize(item, safe[i] if i < len(safe) else None, sub, inner)
    return node


def _reorder(node: CommentedMap, model: type[BaseModel]) -> None:
    keys = list(node)
    new = sort_keys([str(k) for k in keys], model)
    if [str(k) for k in keys] == new or len(keys) < 2:
        return
    flow = bool(node.fa.flow_style())
    before = {} if flow else {keys[i + 1]: comments.take_following(node, k) for i, k in enumerate(keys[:-1])}
    end = "" if flow else comments.take_following(node, keys[-1])
    by_name = {str(k): k for k in keys}
    for name in new:
        node.move_to_end(by_name[name])
    for k, text in before.items():
        comments.put_before(node, k, text)
    comments.put_following(node, by_name[new[-1]], end)


def _scalar(value: Any, safe: Any, flow: bool) -> Any:
    """The canonical scalar for what kb reads (`safe`)."""
    if isinstance(safe, bool):
        return safe
    if isinstance(safe, int | float):
        return safe  # written in plain decimal
    if isinstance(safe, str):
        if isinstance(value, datetime.date):
            return value  # a plain date: kb reads it as text, other readers as a date; written as it was
        return restyle(safe, flow)
    if safe is None:
        return None
    return value


def same(a: Any, b: Any) -> bool:
    """Equality of plain data read by kb: key order ignored, NaN equal to NaN, types must match."""
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)
