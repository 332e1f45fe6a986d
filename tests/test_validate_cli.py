"""`kb validate` end to end: the shipped KB, JSON output, golden error text, hostile files, exit codes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.util import DATA, RECORDS, run_kb


@pytest.mark.usefixtures("shipped_verdicts")
def test_shipped_records_validate() -> None:
    r = run_kb("validate", "--kb", str(RECORDS))
    assert r.code == 0, r.out


def test_json_output_lists_every_field() -> None:
    r = run_kb("validate", str(DATA / "invalid"), "--format", "json", "--kb", str(RECORDS))
    payload = json.loads(r.out)
    assert payload["ok"] is False
    assert len(payload["findings"]) >= len(list((DATA / "invalid").glob("*.yaml")))
    for f in payload["findings"]:
        assert {"code", "file", "line", "path", "message", "severity", "fix"} <= set(f)


def test_golden_error_text() -> None:
    r = run_kb("validate", str(DATA / "invalid" / "unknown-arch-in-condition.yaml"), "--kb", str(RECORDS))
    assert "tests/data/invalid/unknown-arch-in-condition.yaml:11 $.requires.any[1].in[1]: " \
           "'sm91' is not a known architecture" in r.out
    r = run_kb("validate", str(DATA / "invalid" / "unknown-key.yaml"), "--kb", str(RECORDS))
    assert "tests/data/invalid/unknown-key.yaml:6 $.famliy: unknown key 'famliy'" in r.out
    assert "fix: did you mean 'family'?" in r.out


def test_findings_grouped_by_check_with_counts() -> None:
    r = run_kb("validate", str(DATA / "invalid"), "--kb", str(RECORDS))
    assert "KB100 yaml (" in r.out and "KB101 schema (" in r.out
    assert r.out.index("KB100 yaml") < r.out.index("KB101 schema")


def test_list_checks_names_every_code() -> None:
    r = run_kb("validate", "--list-checks")
    assert r.code == 0
    for code in ("KB100", "KB101", "KB201", "KB202", "KB203", "KB204", "KB301", "KB302", "KB303", "KB401"):
        assert code in r.out


def test_bad_usage_exits_2() -> None:
    assert run_kb("validate", "--format", "xml").code == 2
    assert run_kb("validate", "--kb", "/nonexistent/records").code == 2


def _hostile(tmp: Path) -> dict[str, Path]:
    files = {
        "bomb": DATA / "invalid" / "alias-bomb.yaml",
        "tag": DATA / "invalid" / "python-tag.yaml",
        "binary": tmp / "binary.yaml",
        "huge": tmp / "huge.yaml",
    }
    files["binary"].write_bytes(bytes(range(256)) * 64)
    with files["huge"].open("wb") as fh:
        fh.write(b"id: huge\nnotes: '")
        fh.write(b"x" * (50 * 1024 * 1024))
        fh.write(b"'\n")
    return files


@pytest.mark.parametrize("which", ["bomb", "tag", "binary", "huge"])
def test_hostile_files_rejected_fast_with_location(tmp_path: Path, which: str) -> None:
    path = _hostile(tmp_path)[which]
    t = time.monotonic()
    r = run_kb("validate", str(path), "--format", "json", "--kb", str(RECORDS))
    assert time.monotonic() - t < 5  # generous: the point is no hang; bench/ measures speed
    assert r.code == 1
    (f,) = json.loads(r.out)["findings"]
    assert f["code"] == "KB100" and f["file"].endswith(path.name)
    assert "Traceback" not in r.out + r.err
