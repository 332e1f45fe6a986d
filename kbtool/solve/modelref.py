"""`--model NAME`: a record id or alias, a config.json path, or a Hugging Face id (its config.json from the Hub).

(A model record that does not validate never reaches here: kbtool/query_cli.py refuses to answer from a
records tree with errors and names the record's file, line and field.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

TUNED = ("-instruct-2507", "-thinking-2507", "-instruct", "-thinking", "-chat", "-it", "-base", "-hf")
"""Name endings of a release tuned from (or the base of) a model with the same config shapes: Qwen/Qwen3-Next-80B-
A3B-Instruct is qwen3-next-80b-a3b. Quantized releases (-FP8, -AWQ) are not here: their weights differ."""


class Models(Protocol):
    """What this module needs of the query image (kbtool/solve/image.py): its names and a way to add a model."""

    def names(self, kind: str) -> dict[str, str]: ...

    def add_model(self, row: dict[str, Any]) -> str: ...


def resolve_model(img: Models, name: str, row_of: Callable[[Any], dict[str, Any]]) -> str | None:
    """The id `name` names, after loading a config.json into `img` (as the row `row_of` makes of its model
    record) where it is one; None to fall back to the plain name lookup (which reports an unknown name with the
    nearest ids)."""
    key = name.strip()
    if key.lower() in img.names("model"):
        return None
    from kbtool.model.model_card import Model
    from kbtool.store.hfconfig_file import HF_ID, default_id, looks_like_path, read_config

    if looks_like_path(key):
        return img.add_model(row_of(Model.model_validate(read_config(key))))
    if HF_ID.match(key):  # a Hugging Face id: a record named by its model part, else its config.json from the Hub
        last = key.rsplit("/", 1)[-1].lower()
        if last in img.names("model"):
            return img.names("model")[last]
        for tail in TUNED:  # an instruction-tuned or base release has its base model's shapes
            if last.endswith(tail) and last[:-len(tail)] in img.names("model"):
                return img.names("model")[last[:-len(tail)]]
        from kbtool.store.hub import fetch_config

        folder = fetch_config(key)
        rid = default_id(folder / key.partition("/")[2] / "config.json")
        return img.add_model(row_of(Model.model_validate(read_config(str(folder), rid=rid))))
    return None

