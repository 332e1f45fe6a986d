"""Mutation fuzzing of real records: drop, rename, retype fields and swap references.

No exception may escape loading, schema validation or any check, and every finding has a code and a location.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbtool.checks import all_checks
from kbtool.kb import KB
from kbtool.store.reader import parse_bytes
from kbtool.store.records import load_tree
from kbtool.store.schema import validate_document
from tests.util import RECORDS

KINDS = ("claims", "accelerators", "models", "kernels", "engine-backends", "architectures", "topics")


@pytest.fixture(scope="module")
def shipped() -> tuple[KB, list[dict[str, Any]]]:
    result = load_tree(RECORDS, [RECORDS / k for k in KINDS])
    kb = KB.from_load(result)
    datas = [copy.deepcopy(x.data) for x in result.loaded if x.record is not None]
    return kb, datas


JUNK: list[Any] = [None, 0, -7, 2**70, 1.5, "", "x" * 300, [], {}, ["a", 1], {"var": "ctx"}, True, "sm91"]


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(data: dict[str, Any], draw: st.DrawFn, ids: list[str]) -> dict[str, Any]:
    d = copy.deepcopy(data)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(d)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = d
        for p in path[:-1]:
            parent = parent[p]
        key = path[-1]
        op = draw(st.sampled_from(["drop", "rename", "retype", "swap-ref"]))
        if op == "drop":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[str(key) + draw(st.sampled_from(["_", "s", "X"]))] = parent.pop(key)
        elif op == "retype":
            parent[key] = copy.deepcopy(draw(st.sampled_from(JUNK)))  # later mutations must not edit JUNK
        elif isinstance(parent[key], str):
            parent[key] = draw(st.sampled_from(ids))
    return d


def mutated(datas: list[dict[str, Any]], ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Mutations of the shipped records. The strategy is drawn by index so that hypothesis never builds a repr of
    every record (that repr runs to hundreds of kB and hypothesis warns about it, flakily)."""

    @st.composite
    def _one(draw: st.DrawFn, n: int) -> dict[str, Any]:
        return _mutate(datas[draw(st.integers(0, n - 1))], draw, ids)

    return _one(len(datas))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(data=st.data())
def test_mutations_never_escape(shipped: tuple[KB, list[dict[str, Any]]], data: st.DataObject) -> None:
    kb, datas = shipped
    rec = data.draw(mutated(datas, list(kb.by_id)))
    raw = yaml.dump(rec, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True).encode()
    doc, findings = parse_bytes(raw, "records/fuzz.yaml")
    record = None
    if doc is not None:
        record, findings = validate_document(doc)
    if record is not None:
        trial = KB.from_records([r for r in kb if r.id != record.id] + [record])
        for chk in all_checks():
            if chk.fn is not None:
                findings += chk.fn(trial)
    for f in findings:
        assert f.code.startswith("KB") and f.message
        assert f.path.startswith("$")
        if f.file == "records/fuzz.yaml":
            assert f.line is not None and f.line >= 1
