"""Corpus: every file in data/valid passes; every file in data/invalid fails with the code on its first line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.util import DATA, RECORDS, run_kb

VALID = sorted((DATA / "valid").glob("*.yaml"))
INVALID = sorted((DATA / "invalid").glob("*.yaml"))


def expected_code(path: Path) -> str:
    first = path.read_bytes().split(b"\n", 1)[0].decode("ascii")
    m = re.fullmatch(r"# (KB\d{3})", first)
    assert m, f"{path.name}: first line must be '# KBnnn'"
    return m.group(1)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_file_passes(path: Path) -> None:
    r = run_kb("validate", str(path), "--format", "json", "--kb", str(RECORDS))
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["findings"] == []


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_file_fails_with_its_code(path: Path) -> None:
    code = expected_code(path)
    r = run_kb("validate", str(path), "--format", "json", "--kb", str(RECORDS))
    assert r.code == 1, r.out + r.err
    findings = json.loads(r.out)["findings"]
    assert code in {f["code"] for f in findings}, findings
    for f in findings:
        assert f["file"].endswith(path.name)
        assert f["line"] is None or f["line"] >= 1
        assert f["path"].startswith("$")
    assert "Traceback" not in r.out + r.err


def test_corpus_is_not_trivial() -> None:
    assert len(VALID) >= 4 and len(INVALID) >= 25
    assert len({expected_code(p) for p in INVALID}) >= 10
