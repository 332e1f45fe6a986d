"""The vllm-selector probe's pure parts on its recorded grid (no vLLM, no GPU)."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool.probe import engine as engine_probe
from kbtool.probe.judges import vllm_selector as vs_judge
from probes import vllm_selector as vs
from tests.util import ROOT

CC90 = ROOT / "tests" / "data" / "vllm" / "0.33.0" / "cc9.0.json.gz"
pytestmark = pytest.mark.skipif(not CC90.exists(), reason="no recorded vLLM 0.33.0 grid")


def points() -> list[dict[str, Any]]:
    return vs_judge.rows(vs.load(CC90))


def claim(cid: str, requires: dict[str, Any], code: str = "HEAD_DIM", subject: str = "vllm-flashinfer",
          scope: str = "0.33.0") -> dict[str, Any]:
    return {"id": cid, "subject": subject, "effect": "reject", "when": {"var": "engine", "eq": "vllm"},
            "requires": requires, "reason": {"code": code, "message": "m"},
            "scope": [{"library": "vllm", "introduced": scope, "last_affected": scope}]}


def by_claim(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["claim"]: r for r in results}


def flashinfer_claims() -> list[dict[str, Any]]:
    """FLASHINFER's claims first recorded for 0.33.0 (named for it then, renamed since: issue 46)."""
    return [c for c in vs_judge.engine_claims() if c["subject"] == "vllm-flashinfer"
            and any(n.endswith("-0.33.0") for n in [c["id"], *c.get("formerly", [])])]


def test_the_recorded_claim_is_confirmed_and_the_seed_one_is_not() -> None:
    seed = claim("seed", {"var": "head_dim", "in": [64, 128, 256]})
    got = by_claim(vs_judge.judge_grid([*flashinfer_claims(), seed], points(), "0.33.0"))
    right = got["vllm-flashinfer-head-size-64-128-256-512"]
    assert right["agree"] > 0 and not right["ran"] and not right["refused"]
    assert got["seed"]["ran"], "vLLM 0.33.0 accepts FLASHINFER head size 512, which the seed's claim refuses"
    assert {p["head_size"] for p in got["seed"]["ran"]} == {512}


def test_a_refusal_another_claim_explains_is_not_held_against_this_one() -> None:
    kv = claim("kv", {"var": "kv_dtype", "in": ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "nvfp4"]},
               code="KV_DTYPE")
    nvfp4 = claim("nvfp4-fa2", {"all": [{"var": "head_dim", "ne": 64}, {"var": "sinks", "eq": False}]},
                  code="KV_DTYPE")
    nvfp4["when"] = {"all": [{"var": "engine", "eq": "vllm"}, {"var": "kv_dtype", "eq": "nvfp4"}]}
    alone = by_claim(vs_judge.judge_grid([kv], points(), "0.33.0"))["kv"]
    both = by_claim(vs_judge.judge_grid([kv, nvfp4], points(), "0.33.0"))["kv"]
    assert alone["refused"] and not both["refused"]
    assert all(p["kv"] == "nvfp4" and (p["head_size"] == 64 or p["sink"]) for p, _ in alone["refused"])


def test_claims_outside_the_release_are_not_judged() -> None:
    old = claim("old", {"var": "head_dim", "in": [64, 128, 256]}, scope="0.19.1")
    assert vs_judge.judge_grid([old], points(), "0.33.0") == []


def test_judge_gives_verdicts_in_the_evidence_shape() -> None:
    obs = [{"outcome": "OK", "metrics": {"raw": str(CC90)}}]
    verdicts = vs.judge(obs, {})
    ids = {v["claim"] for v in verdicts}
    assert "vllm-flashinfer-head-size-64-128-256-512" in ids and "vllm-flashinfer-head-size" not in ids
    v = next(v for v in verdicts if v["claim"] == "vllm-flashinfer-head-size-64-128-256-512")
    assert v["verdict"] == "confirmed" and v["scope"]["vllm"] == "0.33.0" and v["scope"]["cc"] == ["9.0"]


def test_engine_probes_need_no_gpu() -> None:
    assert not engine_probe.needs_gpu(vs.SPEC)
    env = engine_probe.environment({"gpu": None, "reason": "no GPU"}, python="/nonexistent/python")
    assert env["gpu"] == "no GPU (vllm not installed)" and env["libraries"] == {}


def test_a_kernel_claim_is_judged_as_the_one_backend_that_runs_it() -> None:
    kernel = claim("kernel", {"var": "kv_dtype", "in": ["bf16", "fp16", "fp8_e4m3"]}, code="KV_DTYPE",
                   subject="cutlass-mla-decode")
    assert vs_judge.backend_record(kernel) == "vllm-cutlass-mla"
    cc100 = vs_judge.rows(vs.load(CC90.with_name("cc10.0.json.gz")))
    got = by_claim(vs_judge.judge_grid([kernel], cc100, "0.33.0"))["kernel"]
    assert got["backend"] == "CUTLASS_MLA" and got["agree"] > 0 and not got["ran"] and not got["refused"]
    wrong = claim("wrong", {"var": "kv_dtype", "in": ["bf16"]}, code="KV_DTYPE", subject="cutlass-mla-decode")
    assert by_claim(vs_judge.judge_grid([wrong], cc100, "0.33.0"))["wrong"]["ran"], "vLLM takes fp16 KV for CUTLASS_MLA"


def test_a_kernel_several_backends_run_needs_the_statement_to_name_one() -> None:
    both = claim("k", {"var": "block_size", "multiple_of": 16}, code="BLOCK_SIZE",
                 subject="vllm-triton-unified-attention")
    assert vs_judge.backend_record(both) is None
    assert vs_judge.backend_record({**both, "statement": "vLLM's TRITON_ATTN takes it"}) == "vllm-triton-attn"
    assert vs_judge.backend_record({**both, "statement": "TRITON_ATTN_DIFFKV takes it"}) == "vllm-triton-attn-diffkv"


def test_a_supports_claim_is_contradicted_where_vllm_refuses_for_its_reason() -> None:
    sinks = {"id": "s", "subject": "vllm-flash-attn", "effect": "supports", "statement": "FLASH_ATTN takes sinks",
             "when": {"var": "sinks", "eq": True}, "reason": {"code": "SINKS", "message": "m"},
             "scope": [{"library": "vllm"}]}
    cc80 = vs_judge.rows(vs.load(CC90.with_name("cc8.0.json.gz")))
    got = by_claim(vs_judge.judge_grid([sinks], cc80, "0.33.0"))["s"]
    assert got["refused"] and all(p["sink"] for p, _ in got["refused"])


def test_one_point_against_a_claim_contradicts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seed = claim("seed", {"var": "head_dim", "in": [64, 128, 256]})
    obs = [{"outcome": "OK", "metrics": {"raw": str(CC90)}}]
    mine = [*flashinfer_claims(), seed]
    monkeypatch.setattr(vs_judge, "engine_claims", lambda: mine)
    got = {v["claim"]: v for v in vs.judge(obs, {})}
    assert got["seed"]["verdict"] == "contradicted" and "512" in got["seed"]["detail"]
    assert got["vllm-flashinfer-head-size-64-128-256-512"]["verdict"] == "confirmed"


def test_a_refusal_in_new_words_is_unattributed_not_agreement() -> None:
    """Issue 46: vLLM 0.34.0 reworded its refusals ("FP8 KV requires ..."); the probe counted FLASH_ATTN's points
    refused in the new words as agreeing with the 0.33.0 claims, and `kb probe events` extended them."""
    assert vs_judge.unattributed("FP8 KV requires block size divisible by 64")
    assert not vs_judge.unattributed("kv_cache_dtype not supported") and not vs_judge.unattributed("MLA not supported")
    pts = points()
    cid = "vllm-flashinfer-head-size-64-128-256-512"
    target = [i for i, p in enumerate(pts) if p["layout"] == "dense" and p["head_size"] == 128
              and not p["reasons"]["FLASHINFER"]][:5]
    assert target, "the recorded grid has FLASHINFER points at head 128 that vLLM accepts"
    for i in target:  # the same grid, but vLLM refusing these points in words no claim kind reads
        pts[i] = {**pts[i], "reasons": {**pts[i]["reasons"], "FLASHINFER": ("FP8 KV requires something new",)}}
    got = by_claim(vs_judge.judge_grid([c for c in flashinfer_claims() if c["id"] == cid], pts, "0.33.0"))[cid]
    assert [p["head_size"] for p, _ in got["unattributed"]] == [128] * len(target)
    outcome = vs_judge.release_outcomes(pts, "0.33.0")[cid]
    assert outcome["outcome"] == "unattributed" and outcome["unattributed"] == len(target)
    assert outcome["unattributed_example"].endswith("FP8 KV requires something new")
    assert vs_judge.release_outcomes(points(), "0.33.0")[cid]["outcome"] == "holds"  # the grid as recorded


def test_mm_prefix_axis_is_dense_only_and_only_where_the_release_has_it() -> None:
    """use_mm_prefix (issue 44) is asked True as well at dense points only, and never where the release's
    AttentionSelectorConfig lacks the field."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_vllm_grid", ROOT / "probes" / "_vllm_grid.py")
    assert spec and spec.loader
    g = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(g)
    assert g._sink_mm("dense", True) == [(False, False), (False, True), (True, False), (True, True)]
    assert g._sink_mm("mla", True) == [(False, False)] == g._sink_mm("sparse", True)
    assert g._sink_mm("dense", False) == [(False, False), (True, False)]


def test_judge_holds_claims_at_the_mm_prefix_false_points() -> None:
    """A grid with the axis: the judge's points are the use_mm_prefix False ones, as many as a grid without it has."""
    doc = vs.load(ROOT / "tests" / "data" / "vllm" / "0.33.0" / "cc9.0.json.gz")
    assert doc["columns"][-1] == "mm_prefix" and doc["grid"]["mm_prefix"] == "dense only"
    plain, mm, every = vs_judge.rows(doc), vs_judge.rows(doc, mm_prefix=True), vs_judge.rows(doc, mm_prefix=None)
    assert all(p["mm_prefix"] is False for p in plain) and all(p["layout"] == "dense" for p in mm)
    assert len(plain) + len(mm) == len(every) == len(doc["rows"])
    assert len(plain) == len(vs_judge.rows(vs.load(ROOT / "tests" / "data" / "vllm" / "0.32.0" / "cc9.0.json.gz")))
