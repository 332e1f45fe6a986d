"""schema/ is generated from the models; both layers word a finding the same way."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kbtool.checks import schema as schema_check
from kbtool.model import MODELS
from kbtool.schema_io import drift, generate
from kbtool.store.reader import Document

GOOD: dict[str, Any] = {
    "id": "x-acc", "kind": "accelerator", "name": "X", "vendor": "nvidia", "architecture": "sm90",
    "sm_count": {"value": 132, "source": 0}, "sources": [{"type": "seed", "seed": "s.txt"}],
}


def test_committed_schema_matches_models() -> None:
    assert drift() == [], "run `kb schema export`"


def test_every_property_is_described() -> None:
    for kind in MODELS:
        schema = generate(kind)
        assert schema["$id"].endswith(f"{kind}.schema.json")
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{kind}.{name} has no description"


def _both_layers(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    doc = Document("f.yaml", data, {(): 1})
    via_schema = [f.text() for f in schema_check.validate_document(doc)[1]]
    from pydantic import ValidationError

    try:
        MODELS[data["kind"]].model_validate(data)
        via_model: list[str] = []
    except ValidationError as e:
        via_model = [schema_check._pydantic_finding(doc, err).text() for err in e.errors()]
    return via_schema, via_model


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("vendor"),
        lambda d: d.update(famliy="x"),
        lambda d: d.update(name=12),
        lambda d: d["sources"][0].update(type="rumour"),
        lambda d: d.update(id="Not_An_Id"),
        lambda d: d.update(sources=[]),
        lambda d: d["sm_count"].update(source=-1),
    ],
    ids=["missing", "unknown-key", "type", "enum", "pattern", "min-items", "minimum"],
)
def test_finding_text_does_not_depend_on_layer(mutate: Any) -> None:
    data = copy.deepcopy(GOOD)
    mutate(data)
    via_schema, via_model = _both_layers(data)
    assert via_schema and via_schema == via_model


def test_good_record_passes_both_layers() -> None:
    assert _both_layers(copy.deepcopy(GOOD)) == ([], [])
