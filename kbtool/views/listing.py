"""`kb list [--kind K] [--where FIELD=VALUE]`: records filtered by kind and by dotted fields."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kbtool.errors import UsageError
from kbtool.kb import KB
from kbtool.model import FOLDERS, MODELS

_WHERE = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(!=|=)\s*(.*?)\s*$")
_MISSING = object()


@dataclass(frozen=True)
class Where:
    field: str
    op: str  # "=" or "!="
    value: str


def parse_where(text: str) -> Where:
    m = _WHERE.match(text)
    if not m:
        raise UsageError(f"--where: '{text}' is not FIELD=VALUE",
                         fix="e.g. --where verification.status=refuted or --where subject!=flash-attention-4")
    return Where(m.group(1), m.group(2), m.group(3))


def lookup(data: Any, dotted: str) -> Any:
    """Follow a dotted path through dicts (and list indexes); a Fact yields its value. Missing -> _MISSING."""
    cur = data
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        elif isinstance(cur, list):  # a field of the list's items: collect
            vals = [lookup(x, part) for x in cur]
            cur = [v for v in vals if v is not _MISSING]
            if not cur:
                return _MISSING
        else:
            return _MISSING
    if isinstance(cur, dict) and "value" in cur and set(cur) <= {"value", "basis", "source", "note"}:
        return cur["value"]
    return cur


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if v is None:
        return "null"
    return str(v)


def matches(value: Any, want: str) -> bool:
    if value is _MISSING:
        return False
    if isinstance(value, list):
        return any(matches(v, want) for v in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(want) == float(value)
        except ValueError:
            return False
    return _text(value).lower() == want.lower()


def list_records(kb: KB, kind: str | None = None, where: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of {id, kind, name, file, <each where field>} sorted by kind then id."""
    if kind is not None:
        kind = kind.strip().lower()
        plural = {folder: k for k, folder in FOLDERS.items()}
        kind = plural.get(kind, kind)
        if kind not in MODELS:
            raise UsageError(f"--kind: unknown kind '{kind}'", fix=f"use one of {', '.join(MODELS)}")
    conds = [parse_where(w) for w in where or []]
    rows = []
    for r in sorted(kb, key=lambda r: (r.kind, r.id)):
        if kind and r.kind != kind:
            continue
        data = r.model_dump(by_alias=True, mode="json")
        vals = {c.field: lookup(data, c.field) for c in conds}
        if all(matches(vals[c.field], c.value) == (c.op == "=") for c in conds):
            row: dict[str, Any] = {"id": r.id, "kind": r.kind, "name": r.name, "file": kb.location(r.id)[0]}
            for f, v in vals.items():
                row[f] = None if v is _MISSING else v
            rows.append(row)
    return rows
