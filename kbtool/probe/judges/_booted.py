"""What a boot judge matches a query on: the booted model's facts, read from the config.json a boot probe ships."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def model_facts(models: Path, model: str) -> dict[str, Any] | None:
    """The fields of kb's model record that the memory answer reads, from `models`/`model`/config.json (None where the
    folder is not there)."""
    from kbtool.store.hfconfig_file import read_config

    path = models / model / "config.json"
    if not path.is_file():
        return None
    # as `kb query --model ./config.json` reads it: a field the published file leaves to its transformers config
    # class (Gemma 3's heads, head dim, vocabulary) is filled from that class's defaults, as vLLM's loader does
    rec = read_config(str(path), model)
    return {"architecture": rec.get("architecture"), "parameters": rec.get("parameters"),
            "layers": sum(int(g.get("count") or 0) for g in rec.get("layers") or []),
            "hidden_size": rec.get("hidden_size"), "vocab_size": rec.get("vocab_size"),
            "weight_dtype": rec.get("weight_dtype")}
