"""The compiled schema check may only say "valid" where jsonschema finds no error (it lets validate skip
jsonschema); everything else must fall through to jsonschema's exact findings."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest

from kbtool.checks import fastschema
from kbtool.checks.schema import _validator
from kbtool.model import MODELS
from kbtool.store.reader import read_document
from tests.util import DATA, RECORDS

POOL: list[Any] = [None, 0, -1, 1.5, 2.0, True, False, "x", "", "sm90", [], {}, {"a": 1}, [1], ["x"],
                   {"var": "gpu", "eq": "h100"}, 10**20, "a" * 5000, "2026-01-01", {"status": "verified"}]


def _docs(*roots: Path) -> list[dict[str, Any]]:
    out = []
    for root in roots:
        for f in sorted(root.rglob("*.yaml")):
            doc, _ = read_document(f)
            kind = doc.data.get("kind") if doc is not None and isinstance(doc.data, dict) else None
            if isinstance(kind, str) and kind in MODELS:
                out.append(doc.data)  # type: ignore[union-attr]
    return out


def _paths(x: Any, p: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [p]
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        out += _paths(v, (*p, k))
    return out


def _mutate(d: dict[str, Any], rnd: random.Random) -> None:
    for _ in range(rnd.choice([1, 1, 2])):
        p = rnd.choice([q for q in _paths(d)[1:] if q != ("kind",)])
        parent = d
        for k in p[:-1]:
            parent = parent[k]
        r = rnd.random()
        if r < 0.15 and isinstance(parent, dict):
            del parent[p[-1]]
        elif r < 0.25 and isinstance(parent, dict):
            parent[f"{p[-1]}_x"] = 1
        else:
            parent[p[-1]] = copy.deepcopy(rnd.choice(POOL))


def test_every_kind_compiles() -> None:
    assert {k: fastschema.checker(k) is not None for k in MODELS} == dict.fromkeys(MODELS, True)


def test_shipped_records_take_the_fast_path() -> None:
    docs = _docs(RECORDS)
    assert docs
    for d in docs:
        if not list(_validator(d["kind"]).iter_errors(d)):
            assert fastschema.surely_valid(d["kind"], d), d["id"]


@pytest.mark.parametrize("seed", range(4))
def test_never_valid_where_jsonschema_finds_errors(seed: int) -> None:
    docs = _docs(RECORDS, DATA / "valid", DATA / "invalid")
    rnd = random.Random(seed)
    caught = 0
    for _ in range(600):
        d = copy.deepcopy(rnd.choice(docs))
        _mutate(d, rnd)
        errors = list(_validator(d["kind"]).iter_errors(d))
        if errors:
            assert not fastschema.surely_valid(d["kind"], d), (d.get("id"), errors[0].message)
            caught += 1
    assert caught > 300  # the mutations really produce invalid records


def test_unknown_keywords_are_not_compiled() -> None:
    with pytest.raises(fastschema.Unsupported):
        fastschema.compile_schema({"type": "object", "propertyNames": {"pattern": "^a"}})
    check = fastschema.compile_schema({"type": "integer", "minimum": 3})
    assert check(3) and not check(2) and not check(True) and not check(3.0)
