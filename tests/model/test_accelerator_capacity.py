"""Shipped accelerators: every card carries the driver's capacity with a source, and the figure is plausible."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.util import RECORDS

CARDS = sorted((RECORDS / "accelerators").glob("*.yaml"))


def load(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def test_there_are_at_least_28_cards() -> None:
    assert len(CARDS) >= 28


@pytest.mark.parametrize("path", CARDS, ids=lambda p: p.stem)
def test_capacity_is_sourced_and_plausible(path: Path) -> None:
    rec = load(path)
    mb, gb = rec.get("memory_bytes"), rec.get("memory_gb")
    assert mb is not None, f"{path.name}: no memory_bytes"
    assert gb is not None, f"{path.name}: no memory_gb (the marketed figure)"
    assert isinstance(mb["value"], int) and mb["value"] > 0
    assert mb["basis"] in {"measured", "recorded", "derived"}, f"{path.name}: basis {mb['basis']}"
    assert 0 <= mb["source"] < len(rec["sources"]), f"{path.name}: source index out of range"
    assert mb.get("note"), f"{path.name}: memory_bytes needs a note saying how it was read or derived"
    # The driver's figure sits near the marketed one: within 10% of GB x 1e9 on every shipped card.
    ratio = mb["value"] / (gb["value"] * 1e9)
    assert 0.9 <= ratio <= 1.1, f"{path.name}: {mb['value']} B is {ratio:.3f} x the marketed {gb['value']} GB"


@pytest.mark.parametrize("path", CARDS, ids=lambda p: p.stem)
def test_derived_capacity_is_whole_gib(path: Path) -> None:
    mb = load(path)["memory_bytes"]
    if mb["basis"] == "derived":
        assert mb["value"] % 2**30 == 0, f"{path.name}: a derived capacity is a datasheet GiB count x 2^30"
