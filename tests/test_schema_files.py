"""schema/ is generated from the models, and the published schemas accept and reject exactly what the models do."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from kbtool.model import MODELS
from kbtool.schema_io import drift, generate
from kbtool.store.reader import Document, read_document
from kbtool.store.schema import validate_document
from tests.util import DATA, RECORDS, ROOT

GOOD: dict[str, Any] = {
    "id": "x-acc", "kind": "accelerator", "name": "X", "vendor": "nvidia", "architecture": "sm90",
    "sm_count": {"value": 132, "source": 0}, "sources": [{"type": "seed", "seed": "s.txt"}],
}
MUTATIONS = {
    "missing": lambda d: d.pop("vendor"),
    "unknown-key": lambda d: d.update(famliy="x"),
    "type": lambda d: d.update(name=12),
    "enum": lambda d: d["sources"][0].update(type="rumour"),
    "pattern": lambda d: d.update(id="Not_An_Id"),
    "min-items": lambda d: d.update(sources=[]),
    "minimum": lambda d: d["sm_count"].update(source=-1),
}


def test_committed_schema_matches_models() -> None:
    assert drift() == [], "run `kb schema export`"


def test_every_property_is_described() -> None:
    for kind in MODELS:
        schema = generate(kind)
        assert schema["$id"].endswith(f"{kind}.schema.json")
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{kind}.{name} has no description"


def _published(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((ROOT / "schema" / f"{kind}.schema.json").read_text()))


def _verdicts(data: dict[str, Any]) -> tuple[bool, bool]:
    """(the published schema accepts it, the model accepts it)."""
    by_schema = _published(data["kind"]).is_valid(data)
    try:
        MODELS[data["kind"]].model_validate(data)
        by_model = True
    except ValidationError:
        by_model = False
    return by_schema, by_model


def _corpus() -> list[Path]:
    return sorted([*(DATA / "valid").glob("*.yaml"), *(DATA / "invalid").glob("*.yaml"), *RECORDS.rglob("*.yaml")])


def test_schema_and_model_agree_on_the_corpus() -> None:
    checked = rejected = 0
    disagree = []
    for path in _corpus():
        doc, _ = read_document(path)
        data = doc.data if doc is not None else None
        if not (isinstance(data, dict) and isinstance(data.get("kind"), str) and data["kind"] in MODELS):
            continue  # not a record of a kind: neither layer is asked
        if validate_document(doc)[1] and validate_document(doc)[1][0].code == "KB401":  # type: ignore[arg-type]
            continue  # NaN: refused before either layer (JSON has no NaN)
        by_schema, by_model = _verdicts(data)
        checked += 1
        rejected += not by_model
        if by_schema != by_model:
            disagree.append(f"{path.name}: schema {'accepts' if by_schema else 'rejects'}, model "
                            f"{'accepts' if by_model else 'rejects'}")
    assert disagree == []
    assert checked > 100 and rejected >= 5  # both sides of the contract were exercised


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_schema_and_model_reject_the_same_mutations(name: str) -> None:
    data = copy.deepcopy(GOOD)
    MUTATIONS[name](data)
    assert _verdicts(data) == (False, False)
    assert validate_document(Document("f.yaml", data, {(): 1}))[1]


def test_good_record_passes_both() -> None:
    assert _verdicts(copy.deepcopy(GOOD)) == (True, True)
    assert validate_document(Document("f.yaml", copy.deepcopy(GOOD), {(): 1}))[1] == []
