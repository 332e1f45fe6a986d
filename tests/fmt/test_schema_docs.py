"""Schema files carry $id, a title and a description for every property; the .md docs are current."""

from __future__ import annotations

import json

import pytest

from kbtool.model import MODELS
from kbtool.paths import schema_dir
from kbtool.schema_io import drift, generated_files, untitled_properties


@pytest.mark.parametrize("name", sorted(n for n in generated_files() if n.endswith(".json")))
def test_every_property_has_a_title_and_a_description(name: str) -> None:
    schema = json.loads(generated_files()[name])
    assert schema["$id"].endswith(name)
    assert untitled_properties(schema) == []


def test_untitled_properties_finds_a_missing_description() -> None:
    assert untitled_properties({"properties": {"a": {"title": "A"}}}) == ["#/properties/a"]


def test_each_kind_has_a_generated_doc_listing_its_fields() -> None:
    files = generated_files()
    for kind, model in MODELS.items():
        doc = files[f"{kind}.md"]
        for name, f in model.model_fields.items():
            assert f"| `{f.alias or name}` |" in doc, (kind, name)


def test_committed_schema_files_and_docs_match_the_models() -> None:
    assert drift(schema_dir()) == [], "run `kb schema export`"
