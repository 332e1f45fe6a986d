"""The plain answer objects and their pydantic mirrors (which generate the JSON Schema) agree field for field."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from kbtool.solve import answer, parts
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.util import DATA, load_kb

CLASSES = [parts.Reason, parts.KernelAnswer, parts.BackendAnswer, parts.Memory, answer.Answer,
           answer.MultiAnswer]
SCHEMA = answer.json_schema()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_field_is_declared_once_and_serialized(cls: type) -> None:
    # TYPED: the typed form of a serialized field kept beside it (Memory.pool is engine_report's), never serialized
    typed = getattr(cls, "TYPED", ())
    assert tuple(cls.SPEC) == cls.FIELDS and cls.__slots__ == (*cls.FIELDS, *typed)  # type: ignore[attr-defined]
    assert all(desc for _, desc in cls.SPEC.values())  # type: ignore[attr-defined]
    assert set(SCHEMA["$defs"][cls.__name__]["properties"]) == set(cls.FIELDS)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kw", [
    {"gpu": "hop", "ctx": "128k", "kv": "fp8", "model": "fx-llama-70b", "engine": "vllm"},
    {"ctx": "1m", "model": "fx-small-mla"},
    {"gpu": "bw", "head_dim": 96, "lib": ["cuda=12.8"]},
])
def test_json_validates_against_the_generated_schema(kw: dict[str, object]) -> None:
    a = solve(load_kb(DATA / "kb_fixture"), build_query(**kw))  # type: ignore[arg-type]
    data = json.loads(answer.to_json(a))
    jsonschema.Draft202012Validator(SCHEMA).validate(data)
    bad = copy.deepcopy(data)
    (bad["rows"][0] if "rows" in bad else bad)["kernels"][0]["status"] = "fine"
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(bad)  # the schema can fail


def test_equality_and_copy_without_phase() -> None:
    r = parts.Reason(claim="c", code="C", message="m", verification="unverified", phase="decode")
    same = parts.Reason(claim="c", code="C", message="m", verification="unverified", phase="decode")
    assert r == same and r != parts.Reason(claim="c", code="C", message="x", verification="unverified")
    bare = r.without_phase()
    assert bare.phase is None and r.phase == "decode" and bare.to_dict() == {**r.to_dict(), "phase": None}
