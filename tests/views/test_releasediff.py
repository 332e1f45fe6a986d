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


def test_planning_and_accounting_lines_are_compared_from_the_records(d33_34: str) -> None:
    """The records' planning/accounting sections, field by field with B's source; kb's own `measured` mark is not
    an engine change."""
    assert "planning.hint: utilization -> extensible  vllm/v1/core/kv_cache_planning.py:64" in d33_34
    r = run_kb("diff", "--vllm", "0.24.0", "0.33.0")
    assert r.code == 0, r.err
    assert "planning.in_flight: batched -> batches" in r.out
    assert "accounting.graphs: V1 -> all" in r.out
    assert "accounting.measured" not in r.out


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
    assert "kb probe sweep --lib vllm --releases 9.9.9" in r.err  # the fix records it


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
    # 0.33.0's V2 runner profiles the full sampler (accounting.v2_sampler "full"), whose step over Gemma 3's 262k
    # vocabulary outweighs the forward's: the profile peak is V1's in both (issue 44: the larger step, not the sum).
    # The reserve still moves by the CUDA-graph term: 0.24.0's is its own boots' mean scaled to the A100's capture
    # sizes (accounting.graph_estimate_gib), 0.33.0's kb's flat 1 GiB (no boot of 0.33.0 logs its estimate)
    assert "reserve 1.75 GB -> 2.35 GB" in moved
    assert "gpu_memory_utilization" not in moved  # 0.92 at both: not a cause
    # Gemma 3 is a multimodal prefix-LM (use_mm_prefix, issue 44): both releases' grids ask that axis (0.24.0's
    # since it was recorded again with it), and both pick TRITON_ATTN there, so the backend is not a cause
    assert "backend:" not in moved



def test_the_runner_change_is_named_where_it_moves_the_reserve() -> None:
    """Mixtral-8x7B: V1 in 0.24.0 (MoE, not listed for V2), V2 in 0.33.0. Every Mixtral layer is MoE, so the
    forward's MLP intermediates are the fused-MoE workspace (pool.forward_bytes) and the sampler step sets the peak
    under both runners: V1's 256 x 32,000 x 15 B, V2's full sampler plus the hidden states. (kb once counted a dense
    MLP beside the workspace and named 1.79 -> 2.12 GB here; 0.24.0's Mixtral boots were -2.8% with that.)"""
    r = run_kb("diff", "--vllm", "0.24.0", "0.33.0", "--gpu", "a100", "--model", "mixtral-8x7b")
    assert r.code == 0, r.err
    moved = r.out.split("what moved", 1)[1]
    # 0.24.0's CUDA-graph term is its boots' mean scaled to the capture sizes, 0.33.0's kb's flat 1 GiB: the
    # reserve was 1.79 GB at 0.24.0 while both took 1 GiB
    assert "reserve 1.20 GB -> 1.77 GB" in moved and "model_runner V1 -> V2" in moved


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
    doc = {"vllm": version, "commit": "abc", "backends": backends, "rows": rows,
           "priorities": [backends, list(reversed(backends))]}
    with gzip.open(d / "cc9.0.json.gz", "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)


def _row(head_dim: int, selected: str, prio: int = 0) -> list[Any]:
    return ["9.0", False, "dense", head_dim, "bfloat16", "auto", None, False, selected, prio, []]


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
    assert got["priorities"].examples == ["+NEW; -OLD at 3 point(s)"]  # the lists name the new backend
    missing = releasediff.grid_changes("1.0.0", "2.0.0")
    assert [(c.group, c.note) for c in missing] == [("missing", "no recorded selector grid for 2.0.0")]


def test_grid_rows_with_a_window_are_not_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grid of probe version 5 asks has_sliding_window as well (a 13th column): the release comparison reads the
    rows without a window, which an older grid has too; a pick that differs only with a window is no change."""
    _grid(tmp_path, "1.0.0", ["A", "B"], [_row(64, "A")])
    _grid(tmp_path, "1.1.0", ["A", "B"], [[*_row(64, "A"), False, False], [*_row(64, "B"), False, True]])
    monkeypatch.setattr(grid, "folders", lambda: [tmp_path])
    got = {c.group: c for c in releasediff.grid_changes("1.0.0", "1.1.0")}
    assert "selection" not in got or got["selection"].count == 0


@pytest.mark.parametrize(("ranges", "want"), [
    ([VersionRange(library="vllm", introduced="0.30.0")], "introduced"),
    ([VersionRange(library="vllm", fixed="0.30.0")], "fixed"),
    ([VersionRange(library="vllm", last_affected="0.29.0")], "unconfirmed"),
])
def test_why_a_claim_changed(ranges: list[VersionRange], want: str) -> None:
    assert _why(ranges, "0.24.0", "0.33.0") == want


def test_priority_lists_that_changed_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _grid(tmp_path, "1.0.0", ["A", "B"], [_row(64, "A"), _row(128, "A")])
    _grid(tmp_path, "1.1.0", ["A", "B"], [_row(64, "A"), _row(128, "B", prio=1)])
    monkeypatch.setattr(grid, "folders", lambda: [tmp_path])
    got = [c for c in releasediff.grid_changes("1.0.0", "1.1.0") if c.group == "priorities"]
    want = [("9.0", 1, 2, ["reordered: B > A at 1 point(s)"])]
    assert [(c.key, c.count, c.of_total, c.examples) for c in got] == want


def _plan(folder: Path, version: str, tokens: int, block: int = 16) -> None:
    point = {"async": True, "available": 2**30, "batched_tokens": 8192, "max_model_len": 4096, "num_blocks": 10,
             "tokens": tokens, "concurrency": tokens / 4096, "starts": True}
    doc = {"vllm": version, "cases": [{"model": "m", "kv": "bf16", "tp": 1, "block": block, "points": [point]},
                                      {"model": "n", "kv": "bf16", "tp": 2, "block": block, "points": [point]}]}
    (folder / version).mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / version / "kv-planning.json.gz", "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)


def test_kv_accounting_changes_per_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plan(tmp_path, "1.0.0", 4096)
    _plan(tmp_path, "1.1.0", 4096)
    monkeypatch.setattr(grid, "folders", lambda: [tmp_path])
    assert releasediff.planning_changes("1.0.0", "1.1.0") == []
    _plan(tmp_path, "1.2.0", 8192, block=64)
    got = releasediff.planning_changes("1.0.0", "1.2.0")
    assert [c.key for c in got] == ["m kv bf16", "n kv bf16 tp 2"]
    assert got[0].examples == ["1 GiB, max_model_len 4,096: block 16 -> 64, tokens 4,096 -> 8,192, "
                               "concurrency 1.00 -> 2.00"]
    assert [(c.group, c.note) for c in releasediff.planning_changes("1.0.0", "9.9.9")] == [
        ("missing", "no recorded KV planning for 9.9.9")]


def test_recorded_planning_33_34_unchanged_24_28_changed() -> None:
    assert releasediff.planning_changes("0.33.0", "0.34.0") == []
    moved = {c.key for c in releasediff.planning_changes("0.24.0", "0.28.0")}
    assert "gemma-3-27b kv bf16" in moved  # 0.28.0 counts the KV a request needs in whole blocks per group


def test_gates_name_the_claims_whose_outcome_changed(d33_34: str) -> None:
    if not GRID_034.is_file():
        pytest.skip("no 0.34.0 selector evidence in this tree")
    gates = d33_34.split("\ngates ", 1)[1].split("\nclaims ", 1)[0]
    # a real 0.34.0 change kb records (issue 46: FLASH_ATTN_DIFFKV with fp8 KV on cc 10.0)
    assert "vllm-flash-attn-diffkv-fp8-kv-fa-version: holds -> fails" in gates
    # 0.34.0's reworded refusals are read by the judge since its second run: nothing is unattributed any more, where
    # the first runs' summaries (kept, never edited) counted FLASH_ATTN's gates as refused in words no claim reads
    assert "unattributed" not in gates and "refused in words no claim reads" not in gates
    from kbtool.solve.engines.vllm import timeline as tl
    from tests.util import load_kb

    kb = load_kb(ROOT / "records")
    assert tl.release_evidence(kb)["0.34.0"][0].id == "2026-12-07-no-gpu-vllm-0-34-0-vllm-selector-2"  # v5, issue 46
    first = kb.get("2026-12-06-no-gpu-vllm-0-34-0-vllm-selector").data["outcomes"]
    assert first["vllm-flash-attn-block-size"]["outcome"] == "unattributed"


def test_sweep_report_compares_each_release_with_the_one_before() -> None:
    from kbtool.query_cli import image
    from kbtool.views.releasediff import sweep_report
    from tests.util import load_kb

    kb = load_kb(ROOT / "records")
    r = sweep_report(kb, image(None, use_cache=True), "vllm", ["0.34.0", "0.19.1", "9.9.9"])
    assert [(d.a, d.b) for d in r.diffs] == [("0.33.0", "0.34.0")]
    assert r.notes == ["0.19.1: no release recorded before it to compare with",
                       "9.9.9: nothing recorded (the sweep did not complete it)"]
    fields = {f.field: (f.old, f.new) for f in r.diffs[0].defaults}
    assert fields["block_size"] == (16, 64)
    assert r.to_dict()["diffs"][0]["b"] == "0.34.0"


def test_sglang_diff_from_its_recordings() -> None:
    r = run_kb("diff", "--sglang", "0.5.17", "0.5.23", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    groups = {c["group"] for c in d["changes"]}
    assert "selection" in groups and "missing" not in groups
    sel = {c["key"]: c for c in d["changes"] if c["group"] == "selection"}
    assert set(sel) >= {"sm80", "sm90", "sm100", "mi300x"}
    assert all(0 < c["count"] <= c["of_total"] for c in sel.values())
    # SGLang keeps its defaults in its recorded resolution, compared as launch defaults: the note says so, and does
    # not claim they go uncompared
    assert d["notes"] == ["SGLang keeps no engine-release records: its defaults are compared under launch "
                          "defaults, from its own recorded resolution"]
    assert "defaults" in groups  # the launch defaults of its own resolution, per accelerator and model

def test_0_20_to_0_21_names_what_moved_the_reported_pool() -> None:
    """Issue 46's done-when: with both releases recorded (engine-release records and planning lines of their own),
    gemma-3-27b on an A100 keeps its defaults and blocks per request, and the reported pool moves because 0.21.0 logs
    "GPU KV cache size" as concurrency x max_model_len (kv_cache_utils.py:1708) where 0.20.0 logged
    num_blocks // groups x block: the diff names that, not a default. 0.21.0 also turns the CUDA-graph estimate on
    (envs.py:1768, taken off the budget in v1/worker/gpu_worker.py:401-446; 0.19.1's line only logs it), so the
    reserve grows by kb's graph estimate, named as the accounting, not a default (a boot-log review found 0.21.0 sized
    with 0.19.1's line)."""
    r = run_kb("diff", "--vllm", "0.20.0", "0.21.0", "--model", "gemma-3-27b", "--gpu", "a100")
    assert r.code == 0, r.err
    assert "no engine-release record" not in r.out
    changed = r.out.split("\ndefaults", 1)[1].split("\n\n", 1)[0]  # planning and accounting lines, cited, no default
    assert "planning.tokens: blocks per group -> concurrency  vllm/v1/core/kv_cache_utils.py:1708" in changed
    assert "accounting.graphs: none -> V1  vllm/v1/worker/gpu_worker.py:401" in changed
    lines = [ln for ln in changed.splitlines()[1:] if ln.startswith("  ") and not ln.startswith("    ")]
    assert lines and all(ln.startswith(("  planning.", "  accounting.")) for ln in lines), changed  # no default moved
    moved = r.out.split("what moved", 1)[1]
    assert "tokens reported per block" in moved and "(planning 0.20.0 -> 0.21.0" in moved
    assert "reserve 1.27 GB -> 2.35 GB (+1,073,741,824 B): no changed default behind it (the accounting)" in moved
    assert "gpu_memory_utilization" not in moved


def test_sglang_pool_messages_do_not_change_with_the_workers_temporary_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recordings made before issue 46 name the sglang-pool worker's temporary model folder in SGLang's messages
    (a new name each run); `kb diff --sglang` reads it as `<models>`, which the worker now writes, so only a real
    change of the message is reported."""
    from kbtool.solve.engines.sglang import releasediff as sgl

    def recording(version: str, message: str) -> None:
        (tmp_path / version).mkdir()
        doc = {"sglang": version, "rows": [["nvidia-h100-sxm", "nemotron-super", 0,
                                            {"error": "ValueError", "message": message}, []]]}
        with gzip.open(tmp_path / version / "pool-models.json.gz", "wt", encoding="utf-8") as fh:
            json.dump(doc, fh)

    text = "The repository {} contains custom code. You can inspect it at https://hf.co/{}."
    recording("1.0.0", text.format(*["/tmp/kb-sglang-pool-9rjc9gay/nemotron-super"] * 2))
    recording("1.1.0", text.format(*["/var/tmp/kb-sglang-pool-ftg9_y69/nemotron-super"] * 2))
    recording("1.2.0", text.format(*["<models>/nemotron-super"] * 2))
    recording("1.3.0", "The repository <models>/nemotron-super needs trust_remote_code")
    monkeypatch.setattr(sgl, "folders", lambda: [tmp_path])
    assert sgl.pool_changes("1.0.0", "1.1.0") == [] and sgl.pool_changes("1.1.0", "1.2.0") == []
    [change] = sgl.pool_changes("1.2.0", "1.3.0")
    assert change.key == "message" and "needs trust_remote_code" in change.examples[0]


def test_a_release_that_borrows_its_accounting_is_compared_with_the_line_it_takes() -> None:
    """vLLM 0.25.1 records no accounting (a patch release: it sizes the reserve as 0.25.0, records/engine-releases/
    vllm-0.25.1.yaml). Before, `kb diff --vllm 0.24.0 0.25.1` left out 0.25.0's MXFP4 change that 0.25.1 carries, and
    0.25.1 -> 0.26.0 left out 0.26.0's sampler change; the borrowed line is compared, its source naming 0.25.0."""
    r = run_kb("diff", "--vllm", "0.24.0", "0.25.1")
    assert r.code == 0, r.err
    assert "accounting.mxfp4_scales_kept: true -> false  0.25.0: vllm/model_executor/layers/fused_moe/oracle/" in r.out
    r = run_kb("diff", "--vllm", "0.25.1", "0.26.0")
    assert r.code == 0, r.err
    assert "accounting.v2_sampler: logits -> in-place" in r.out
    r = run_kb("diff", "--vllm", "0.25.0", "0.25.1")  # the same line on both sides: nothing to list
    assert r.code == 0, r.err
    assert "accounting." not in r.out and "no recorded default changed" in r.out
