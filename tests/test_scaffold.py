"""`kb new model` scaffolds a record that validates once its placeholders are filled (issue 19)."""

from __future__ import annotations

import re
from pathlib import Path

from kbtool.model.model_card import Model
from kbtool.scaffold import scaffold
from kbtool.store.reader import read_document


def test_a_filled_model_scaffold_validates(tmp_path: Path) -> None:
    path = tmp_path / "models" / "my-model.yaml"
    text = scaffold("model", "my-model", path)
    assert "kv_heads: 0" in text and "head_dim: 0" in text and "max_context: 0" in text
    filled = text.replace("url: TODO", "url: https://huggingface.co/acme/my-model/blob/main/config.json")
    filled = filled.replace("TODO", "My model")
    filled = re.sub(r": 0(\s)", r": 8\1", filled)  # every count / size placeholder
    path.parent.mkdir()
    path.write_text(filled)
    doc, errs = read_document(path, str(path))
    assert doc is not None and not errs
    m = Model.model_validate(doc.data)
    assert m.layers[0].kv_heads == 8 and m.layers[0].head_dim == 8


def test_an_unfilled_model_scaffold_does_not_validate_as_is(tmp_path: Path) -> None:
    import pytest
    from pydantic import ValidationError

    path = tmp_path / "models" / "m.yaml"
    path.parent.mkdir()
    path.write_text(scaffold("model", "m", path))
    doc, _ = read_document(path, str(path))
    assert doc is not None
    with pytest.raises(ValidationError):
        Model.model_validate(doc.data)
