"""`kb diff --vllm A B` (kbtool/views/releasediff.py, kbtool/solve/engines/vllm/releasediff.py): issue 46 deliver 3."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from kbtool.model.common import VersionRange
from kbtool.solve.engines.vllm import grid, releasediff
from kbtool.views.releasediff import _why
from tests.util import ROOT, run_kb

GRID_034 = ROOT / "tests" / "data" / "vllm" / "0.34.0" / "cc9.0.json.gz"


@pytest.fixture(scope="module")
def d33_34() -> Any:
    r = run_kb("diff", "--vllm", "0.33.0", "0.34.0")
    assert r.code == 0, r.err
    return r.out


def test_defaults_name_block_size_and_utilization_with_sources(d33_34: str) -> None:
    assert "block_size: 16 -> 64  vllm/config/cache.py:185 (62d4bc3c7)" in d33_34
    assert "gpu_memory_utilization: 0.92 -> 1.0  vllm/config/cache.py:495" in d33_34
    assert "extensible_kv_cache: false -> true" in d33_34
    assert "extensible_margins.fraction: (none) -> 0.75" in d33_34
    assert "async_scheduling" not in d33_34  # unchanged (true at both): not listed


def test_v1_runner_removal(d33_34: str) -> None:
    assert "V1 model runner module (vllm/v1/worker/gpu_model_runner.py): present -> removed" in d33_34


def test_backends_from_the_grids_or_said_missing(d33_34: str) -> None:
    section = d33_34.split("backends", 1)[1].split("claims", 1)[0]
    if GRID_034.is_file():  # a tree that holds 0.34.0's selector grids (branch issue-46-with-0.34.0)
        assert "new " in section
        assert "no recorded selector grid" not in section
    else:
        assert "no recorded selector grid for 0.34.0" in section
        assert "new " not in section and "selected backend changed" not in section


def test_claims_past_last_affected_are_unconfirmed_not_refuted(d33_34: str) -> None:
    assert "unconfirmed (" in d33_34
    assert "fixed (" not in d33_34  # no claim records a fix at 0.34.0


def test_json() -> None:
    r = run_kb("diff", "--vllm", "0.33.0", "0.34.0", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    by = {f["field"]: f for f in d["defaults"]}
    assert (by["block_size"]["old"], by["block_size"]["new"]) == (16, 64)
    assert (by["gpu_memory_utilization"]["old"], by["gpu_memory_utilization"]["new"]) == (0.92, 1.0)
    facts = {c["key"]: c for c in d["changes"] if c["group"] == "release"}
    assert (facts["v1_model_runner_module"]["old"], facts["v1_model_runner_module"]["new"]) == ("present", "removed")
    assert d["records"] == {"0.33.0": True, "0.34.0": True}
    assert d["question"] is None


def test_unknown_release_exits_2_naming_the_recorded() -> None:
    r = run_kb("diff", "--vllm", "0.33.0", "9.9.9")
    assert r.code == 2
    assert "9.9.9" in r.err and "0.33.0" in r.err and "0.24.0" in r.err


def test_usage_errors_exit_2() -> None:
    assert run_kb("diff").code == 2
    assert run_kb("diff", "--vllm", "0.33.0").code == 2
    assert run_kb("diff", "--vllm", "0.33.0", "0.34.0", "--model", "gemma-3-27b").code == 2  # --model needs --gpu


def test_help_has_an_example() -> None:
    r = run_kb("diff", "--help")
    assert r.code == 0
    assert "kb diff --vllm 0.33.0 0.34.0" in r.out


def test_release_without_record_says_so() -> None:
    r = run_kb("diff", "--vllm", "0.20.2", "0.24.0")  # 0.20.2: selector grids recorded, no engine-release record
    assert r.code == 0, r.err
    assert "0.20.2: no engine-release record" in r.out
    assert "block_size:" not in r.out  # nothing compared against a record that is not there


def test_gpu_question_names_what_moved_the_pool() -> None:
    r = run_kb("diff", "--vllm", "0.24.0", "0.33.0", "--gpu", "a100", "--model", "gemma-3-27b")
    assert r.code == 0, r.err
    moved = r.out.split("what moved", 1)[1]
    assert "reserve 2.32 GB -> 2.50 GB" in moved
    assert "model_runner V1 -> V2" in moved
    assert "gpu_memory_utilization" not in moved  # 0.92 at both: not a cause
    assert "backend:" not in moved  # FLASH_ATTN at both


def test_gpu_question_33_34_budget_and_block() -> None:
    r = run_kb("diff", "--vllm", "0.33.0", "0.34.0", "--gpu", "h100", "--model", "gemma-3-27b", "--json")
    assert r.code == 0, r.err
    q = json.loads(r.out)["question"]
    assert (q["a"]["block_size"], q["b"]["block_size"]) == (16, 64)
    joined = "\n".join(q["moved"])
    assert "gpu_memory_utilization 0.92 -> 1.0" in joined
    assert "block size 16 -> 64" in joined
    if not GRID_034.is_file():
        assert "no selection for 0.34.0" in joined


def _grid(folder: Path, version: str, backends: list[str], rows: list[list[Any]]) -> None:
    d = folder / version
    d.mkdir(parents=True)
    doc = {"vllm": version, "commit": "abc", "backends": backends, "rows": rows}
    with gzip.open(d / "cc9.0.json.gz", "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)


def _row(head_dim: int, selected: str) -> list[Any]:
    return ["9.0", False, "dense", head_dim, "bfloat16", "auto", None, False, selected, 0, []]


def test_grid_changes_count_new_removed_and_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _grid(tmp_path, "1.0.0", ["FLASH_ATTN", "OLD"], [_row(64, "FLASH_ATTN"), _row(128, "FLASH_ATTN"),
                                                     _row(256, "OLD")])
    _grid(tmp_path, "1.1.0", ["FLASH_ATTN", "NEW"], [_row(64, "FLASH_ATTN"), _row(128, "NEW"), _row(256, "NEW"),
                                                     _row(512, "NEW")])
    monkeypatch.setattr(grid, "folders", lambda: [tmp_path])
    got = {c.group: c for c in releasediff.grid_changes("1.0.0", "1.1.0")}
    assert (got["backends"].new, got["backends"].old) == (["NEW"], ["OLD"])
    sel = got["selection"]
    assert (sel.count, sel.of_total) == (2, 3)
    assert sel.examples == ["FLASH_ATTN -> NEW at 1 point(s), e.g. dense hd128 bfloat16 kv auto",
                            "OLD -> NEW at 1 point(s), e.g. dense hd256 bfloat16 kv auto"]
    assert sel.note == "1 point(s) on one grid only (the grids' axes differ)"
    missing = releasediff.grid_changes("1.0.0", "2.0.0")
    assert [(c.group, c.note) for c in missing] == [("missing", "no recorded selector grid for 2.0.0")]


@pytest.mark.parametrize(("ranges", "want"), [
    ([VersionRange(library="vllm", introduced="0.30.0")], "introduced"),
    ([VersionRange(library="vllm", fixed="0.30.0")], "fixed"),
    ([VersionRange(library="vllm", last_affected="0.29.0")], "unconfirmed"),
])
def test_why_a_claim_changed(ranges: list[VersionRange], want: str) -> None:
    assert _why(ranges, "0.24.0", "0.33.0") == want


def test_0_20_to_0_21_names_what_moved_the_reported_pool() -> None:
    """Issue 46's done-when: with both releases recorded (engine-release records and planning lines of their own),
    gemma-3-27b on an A100 keeps its defaults, reserve and blocks, and the reported pool moves because 0.21.0 logs
    "GPU KV cache size" as concurrency x max_model_len (kv_cache_utils.py:1708) where 0.20.0 logged
    num_blocks // groups x block: the diff names that, not a default."""
    r = run_kb("diff", "--vllm", "0.20.0", "0.21.0", "--model", "gemma-3-27b", "--gpu", "a100")
    assert r.code == 0, r.err
    assert "no recorded default changed" in r.out and "no engine-release record" not in r.out
    moved = r.out.split("what moved", 1)[1]
    assert "tokens reported per block" in moved and "(planning 0.20.0 -> 0.21.0" in moved
    assert "reserve" not in moved and "gpu_memory_utilization" not in moved
