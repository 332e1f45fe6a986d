"""A scope event is written with the verification block, and nothing else in the claim file changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from kbtool.store.writer import SCOPE_KEY, update_verification

CLAIM = Path(__file__).resolve().parents[2] / "records" / "claims" / "flashinfer-fa3-fp8-long-context-accuracy.yaml"


def test_scope_rides_along_with_the_verification_block(tmp_path: Path) -> None:
    path = tmp_path / CLAIM.name
    shutil.copy(CLAIM, path)
    before = yaml.safe_load(path.read_text())
    scope = [{"library": "flashinfer", "fixed": "0.7.2.post1", "evidence": ["e1"]}]
    block = {"status": "verified", "evidence": ["e1"], "checked": "2026-12-01"}
    assert update_verification(path, {**block, SCOPE_KEY: scope})
    after = yaml.safe_load(path.read_text())
    assert after["scope"] == scope and after["verification"] == block
    for key in set(before) - {"scope", "verification"}:
        assert after[key] == before[key], key


def test_without_a_scope_the_scope_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / CLAIM.name
    shutil.copy(CLAIM, path)
    before = yaml.safe_load(path.read_text())
    assert update_verification(path, {"status": "unverified"})
    assert yaml.safe_load(path.read_text())["scope"] == before["scope"]
