"""`kb probe sweep` (kbtool/probe/sweep.py): which releases, which are skipped, and --new, without installing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbtool.errors import UsageError
from kbtool.probe import sweep
from tests.util import RECORDS

DOC = {"releases": {
    "0.19.0": [{"yanked": False}], "0.19.1": [{"yanked": False}], "0.20.0rc1": [{"yanked": False}],
    "0.20.0": [{"yanked": True}], "0.21.0": [{"yanked": False}], "0.22.0.dev3": [{"yanked": False}],
    "0.33.0": [{"yanked": False}], "0.34.0": [{"yanked": False}], "0.35.0": []}}


def test_registry_leaves_out_yanked_pre_and_empty_releases() -> None:
    got = sweep.registry_releases("vllm", fetch=lambda url: json.dumps(DOC).encode())
    assert got == ["0.19.0", "0.19.1", "0.21.0", "0.33.0", "0.34.0"]
    assert not sweep.is_pre("0.7.2.post1") and sweep.is_pre("0.8.0rc2")


def test_range_only_and_new() -> None:
    rel = sweep.parse_registry(DOC)
    assert sweep.choose(rel, "0.19.1", "0.33.0", None) == ["0.19.1", "0.21.0", "0.33.0"]
    assert sweep.choose(rel, None, None, ["0.33.0", "0.19.0"]) == ["0.33.0", "0.19.0"]  # the order given
    assert sweep.choose(rel, None, None, None, newer_than="0.33.0") == ["0.34.0"]
    with pytest.raises(UsageError, match=r"not a final release on the registry: 0\.20\.0"):
        sweep.choose(rel, None, None, ["0.20.0"])


def test_recorded_releases_are_skipped_unless_forced() -> None:
    have = sweep.recorded(RECORDS, "vllm")
    assert ("0.33.0", "vllm-selector") in have and ("0.19.1", "vllm-options") in have
    tasks, skipped = sweep.plan(RECORDS, "vllm", ["0.33.0", "0.34.0"], probes=["vllm-selector"])
    assert [t.release for t in tasks] == ["0.34.0"] and skipped == ["0.33.0"]
    forced, _ = sweep.plan(RECORDS, "vllm", ["0.33.0"], force=True, probes=["vllm-selector"])
    assert [(t.release, t.probes) for t in forced] == [("0.33.0", ["vllm-selector"])]
    assert sweep.newest_recorded(RECORDS, "vllm") == "0.33.0"


def test_a_failed_install_is_that_releases_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(lib: str, release: str, venv: Path, python: str, log: Path, **_: object) -> None:
        raise sweep.ProbeError(f"installing vllm=={release} failed (exit 1); see {log}")

    monkeypatch.setattr(sweep, "install", broken)
    res = sweep.sweep(RECORDS, "vllm", [sweep.Task("0.34.0", ["vllm-selector"])], workdir=tmp_path)
    assert [(r.release, r.status) for r in res] == [("0.34.0", "failed")]
    assert "installing vllm==0.34.0 failed" in str(res[0].why)
    state = json.loads((tmp_path / sweep.STATE).read_text())
    assert state["0.34.0"]["status"] == "failed"
