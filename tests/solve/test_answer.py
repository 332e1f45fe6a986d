"""The plain answer objects and their pydantic mirrors (which generate the JSON Schema) agree field for field."""

from __future__ import annotations

import json

import pytest

from kbtool import answer_schema as mirror
from kbtool.solve import answer
from kbtool.solve.query import build_query
from kbtool.solve.solver import solve
from tests.util import DATA, load_kb

PAIRS = [(getattr(answer, n), getattr(mirror, n)) for n in
         ("Reason", "KernelAnswer", "BackendAnswer", "Memory", "Answer", "MultiAnswer")]


@pytest.mark.parametrize(("plain", "model"), PAIRS, ids=[p.__name__ for p, _ in PAIRS])
def test_fields_match_the_schema_mirror(plain: type, model: type) -> None:
    assert tuple(model.model_fields) == plain.FIELDS  # names and serialization order
    required = {n for n, f in model.model_fields.items() if f.is_required()}
    built = plain(**{n: None for n in required}) if required else plain()
    assert set(built.to_dict()) == set(plain.FIELDS)


@pytest.mark.parametrize("kw", [
    {"gpu": "hop", "ctx": "128k", "kv": "fp8", "model": "fx-llama-70b", "engine": "vllm"},
    {"ctx": "1m", "model": "fx-small-mla"},
    {"gpu": "bw", "head_dim": 96, "lib": ["cuda=12.8"]},
])
def test_json_validates_against_the_mirror(kw: dict[str, object]) -> None:
    a = solve(load_kb(DATA / "kb_fixture"), build_query(**kw))  # type: ignore[arg-type]
    data = json.loads(answer.to_json(a))
    model = mirror.MultiAnswer if isinstance(a, answer.MultiAnswer) else mirror.Answer
    assert model.model_validate(data).model_dump(mode="json") == data


def test_equality_and_copy_without_phase() -> None:
    r = answer.Reason(claim="c", code="C", message="m", verification="unverified", phase="decode")
    same = answer.Reason(claim="c", code="C", message="m", verification="unverified", phase="decode")
    assert r == same and r != answer.Reason(claim="c", code="C", message="x", verification="unverified")
    bare = r.without_phase()
    assert bare.phase is None and r.phase == "decode" and bare.to_dict() == {**r.to_dict(), "phase": None}
