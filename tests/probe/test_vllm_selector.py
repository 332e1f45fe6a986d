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
    assert vs_judge.unattributed("FP8 KV requires block size divisible by 64", "0.33.0")
    assert not vs_judge.unattributed("kv_cache_dtype not supported", "0.33.0")
    assert not vs_judge.unattributed("MLA not supported", "0.33.0")
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
    from tests.util import load_module

    g = load_module("_vllm_grid", ROOT / "probes" / "_vllm_grid.py")
    assert g._sink_mm_swa("dense", True, False, "bfloat16", 16) == [
        (False, False, False), (False, True, False), (True, False, False), (True, True, False)]
    assert g._sink_mm_swa("mla", True, False, "bfloat16", None) == [(False, False, False)]
    assert g._sink_mm_swa("sparse", True, False, "float16", 16) == [(False, False, False)]
    assert g._sink_mm_swa("dense", False, False, "bfloat16", None) == [(False, False, False), (True, False, False)]


def test_sliding_window_axis_only_where_the_release_has_it() -> None:
    """has_sliding_window (issue 46) is asked True as well at every dense point and at MLA points of bfloat16 without
    a block size, where the release's AttentionSelectorConfig has the field; elsewhere the grid is as before."""
    from tests.util import load_module

    g = load_module("_vllm_grid", ROOT / "probes" / "_vllm_grid.py")
    dense = g._sink_mm_swa("dense", True, True, "float16", 64)
    assert len(dense) == 8 and {w for _, _, w in dense} == {False, True}
    assert {(s, m) for s, m, w in dense if w} == {(s, m) for s, m, w in dense if not w}
    for layout in ("mla", "sparse"):
        assert g._sink_mm_swa(layout, False, True, "bfloat16", None) == [(False, False, False), (False, False, True)]
        assert g._sink_mm_swa(layout, False, True, "bfloat16", 64) == [(False, False, False)]
        assert g._sink_mm_swa(layout, False, True, "float16", None) == [(False, False, False)]


def test_judge_holds_claims_at_the_mm_prefix_false_points() -> None:
    """A grid with the axis: the judge's points are the use_mm_prefix False ones, as many as a grid without it has."""
    doc = vs.load(ROOT / "tests" / "data" / "vllm" / "0.33.0" / "cc9.0.json.gz")
    assert doc["columns"][-2] == "mm_prefix" and doc["grid"]["mm_prefix"] == "dense only"
    plain, mm, every = vs_judge.rows(doc), vs_judge.rows(doc, mm_prefix=True), vs_judge.rows(doc, mm_prefix=None)
    assert all(p["mm_prefix"] is False for p in plain) and all(p["layout"] == "dense" for p in mm)
    assert len(plain) + len(mm) == len(every) == len(doc["rows"])
    # without the sliding-window points, as many as a grid of the same axes without use_mm_prefix (0.25.1: v4)
    older = vs_judge.rows(vs.load(ROOT / "tests" / "data" / "vllm" / "0.25.1" / "cc9.0.json.gz"))
    assert len([p for p in plain if not p["sliding"]]) == len(older)


def test_judge_reads_the_sliding_window_axis() -> None:
    """A grid of probe version 5 (issue 46): each point says whether it was asked with a sliding window; the judge's
    environment gives sliding_window 1 there and 0 elsewhere; a grid without the axis leaves it unknown. vLLM's
    refusal words are the SLIDING_WINDOW kind, never unattributed."""
    doc = vs.load(CC90_034)
    assert doc["columns"][-1] == "sliding_window" and doc["grid"]["sliding_window"].startswith("dense: every point")
    pts = vs_judge.rows(doc, mm_prefix=None)
    on = [p for p in pts if p["sliding"]]
    assert len(on) == 3200 + 2 * 96 and {p["sliding"] for p in pts} == {False, True}
    assert {vs_judge.grid_env(p)["sliding_window"] for p in on} == {1}
    assert {vs_judge.grid_env(p)["sliding_window"] for p in pts if not p["sliding"]} == {0}
    old = vs_judge.rows(vs.load(ROOT / "tests" / "data" / "vllm" / "0.25.1" / "cc9.0.json.gz"))
    assert {p["sliding"] for p in old} == {None} and "sliding_window" not in vs_judge.grid_env(old[0])
    assert vs_judge.reason_kinds("sliding window not supported", "0.34.0") == frozenset({"SLIDING_WINDOW"})
    refused = {b for p in on for b, rs in p["reasons"].items() if "sliding window not supported" in rs}
    assert {"FLASHMLA", "CUTLASS_MLA", "TURBOQUANT"} <= refused
    assert not refused & {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TRITON_MLA",
                          "FLASH_ATTN_DIFFKV"}


def test_sliding_window_claims_are_held_at_the_sliding_points() -> None:
    """A sliding-window claim is confirmed by the points asked with a window, and contradicted where vLLM accepts a
    window it says is refused (TRITON_MLA of 0.34.0 is the release that began to serve one)."""
    claims = [c for c in vs_judge.engine_claims() if c["id"] in ("vllm-flashmla-no-sliding-window",
                                                                 "vllm-triton-mla-no-sliding-window")]
    assert len(claims) == 2
    pts = vs_judge.rows(vs.load(CC90_034))
    got = by_claim(vs_judge.judge_grid(claims, pts, "0.34.0", any_scope=True))
    assert got["vllm-flashmla-no-sliding-window"]["seen"] > 0
    assert not got["vllm-flashmla-no-sliding-window"]["ran"] and not got["vllm-flashmla-no-sliding-window"]["refused"]
    ran = got["vllm-triton-mla-no-sliding-window"]["ran"]
    assert ran and all(p["sliding"] and p["layout"] == "mla" for p in ran)
    outcomes = vs_judge.release_outcomes(pts, "0.34.0")
    assert outcomes["vllm-triton-mla-no-sliding-window"]["outcome"] == "fails"
    assert outcomes["vllm-flashmla-no-sliding-window"]["outcome"] == "holds"


CC90_034 = ROOT / "tests" / "data" / "vllm" / "0.34.0" / "cc9.0.json.gz"
needs_034 = pytest.mark.skipif(not CC90_034.exists(), reason="no recorded vLLM 0.34.0 grid")
FP8_KV_034 = "FP8 KV requires FA3 (SM90), equal-d512 FA4 (SM90), or FA4 (SM100)."
BLOCK_64_034 = "SM90 d512 FP8 KV requires a block size divisible by 64"


def test_vllm_0_34_0_wordings_are_read_as_their_kind_from_0_34_0_on_only() -> None:
    """Issue 46: vLLM 0.34.0 reworded FLASH_ATTN's refusals (flash_attn.py:481, :505 at 62d4bc3c7). In 0.34.0 the
    judge reads them as the gates they state; before it, where vLLM never used them, they stay unattributed, so an
    older release's evidence classifies as it did."""
    assert vs_judge.reason_kinds(FP8_KV_034, "0.34.0") == {"KV_DTYPE"}
    assert vs_judge.reason_kinds("FLASH_ATTN: " + FP8_KV_034, "0.34.0") == {"KV_DTYPE"}  # the composite's prefix
    assert vs_judge.reason_kinds(BLOCK_64_034, "0.34.0") == {"BLOCK_SIZE"}
    assert vs_judge.reason_kinds("SM90 d512 FP8 KV does not support block sparsity", "0.34.0") == {vs_judge.OTHER}
    assert vs_judge.of_kind("KV_DTYPE", [FP8_KV_034, BLOCK_64_034], "0.34.0") == [FP8_KV_034]
    for old in ("0.33.0", "0.19.1"):
        assert vs_judge.unattributed(FP8_KV_034, old) and vs_judge.unattributed(BLOCK_64_034, old)
        assert vs_judge.of_kind("KV_DTYPE", [FP8_KV_034], old) == []
    # the words vLLM used before keep their kind at every release
    assert vs_judge.reason_kinds("FP8 KV cache requires FA3 on SM90", "0.34.0") == {"KV_DTYPE"}
    assert vs_judge.reason_kinds("sink not supported on compute capability < 9.0", "0.34.0") == {"SINKS"}


@needs_034
def test_a_0_34_0_refusal_is_attributed_to_its_claim() -> None:
    """On the recorded 0.34.0 grid: FLASH_ATTN refuses cc 9.0, head 512, fp8 KV at blocks 16 and 32 in 0.34.0's
    words; the refusal is vllm-flash-attn-sm90-d512-fp8-kv-block-64's (BLOCK_SIZE), so the claim is confirmed there
    and the claims of other gates that let those points run hold at 0.34.0 instead of being unattributed."""
    pts = vs_judge.rows(vs.load(CC90_034))
    refused = [p for p in pts if p["layout"] == "dense" and p["head_size"] == 512 and p["kv"] in ("fp8", "fp8_e4m3")
               and p["block"] in (16, 32) and not p["sink"]]
    assert refused and all(any(BLOCK_64_034 in r for r in p["reasons"]["FLASH_ATTN"]) for p in refused)
    mine = [c for c in vs_judge.engine_claims() if c["subject"] == "vllm-flash-attn"
            and vs_judge._scope_has(c, "0.34.0")]
    got = by_claim(vs_judge.judge_grid(mine, pts, "0.34.0"))
    gate = got["vllm-flash-attn-sm90-d512-fp8-kv-block-64"]
    assert gate["agree"] >= len(refused) and not gate["ran"] and not gate["refused"] and not gate["unattributed"]
    outcomes = vs_judge.release_outcomes(pts, "0.34.0")
    for cid in ("vllm-flash-attn-block-size", "vllm-flash-attn-kv-dtype-fa3-fa4",
                "vllm-flash-attn-head-size-up-to-512-with-fa4", "vllm-flash-attn-sm90-d512-fp8-kv-block-64"):
        assert outcomes[cid]["outcome"] == "holds" and "unattributed" not in outcomes[cid], cid


@needs_034
def test_an_unknown_wording_in_0_34_0_is_still_unattributed_and_stops_the_range() -> None:
    """A refusal no claim kind reads, even in a release whose other wordings are taught, stays unattributed: the
    release is no agreement, and `kb probe events` does not extend a range across it."""
    from kbtool.model import Claim
    from kbtool.probe import events
    from kbtool.solve.engines.vllm import timeline as tl

    pts = vs_judge.rows(vs.load(CC90_034))
    cid = "vllm-flash-attn-block-size"
    target = [i for i, p in enumerate(pts) if p["layout"] == "dense" and p["head_size"] == 128
              and p["kv"] == "auto" and p["block"] == 16 and not p["reasons"]["FLASH_ATTN"]][:4]
    assert target, "the recorded 0.34.0 grid has FLASH_ATTN points at head 128 that vLLM accepts"
    for i in target:
        pts[i] = {**pts[i], "reasons": {**pts[i]["reasons"], "FLASH_ATTN": ("FA5 wants a warp-specialised tile",)}}
    outcome = vs_judge.release_outcomes(pts, "0.34.0")[cid]
    assert outcome["outcome"] == "unattributed" and outcome["unattributed"] == len(target)
    assert outcome["unattributed_example"].endswith("FA5 wants a warp-specialised tile")
    rec = Claim.model_validate({
        "id": cid, "kind": "claim", "name": "c", "subject": "vllm-flash-attn", "statement": "s", "effect": "reject",
        "reason": {"code": "BLOCK_SIZE", "message": "m"},
        "scope": [{"library": "vllm", "introduced": "0.33.0", "last_affected": "0.33.0"}],
        "sources": [{"type": "seed", "seed": "001_cecac612a9e92bba.txt"}]})
    line = [tl.Point("0.32.0", "holds", "ev-0.32.0"), tl.Point("0.33.0", "holds", "ev-0.33.0"),
            tl.Point("0.34.0", outcome["outcome"], "ev-0.34.0")]
    got = events.proposed(rec, line)
    assert got is not None and [r.get("last_affected") for r in got] == ["0.33.0"]
    assert not any("ev-0.34.0" in r.get("evidence", []) for r in got)


def test_a_claim_no_point_tests_has_no_outcome_at_the_release() -> None:
    """A release where every point a claim gates was refused for other reasons says nothing about it: vLLM 0.34.0's
    FLASH_ATTN head-512 block rule at 0.19.1, which refuses head 512 outright, was recorded as holding there and
    `kb probe events` proposed a 0.19.1 range for a 0.34.0 rule."""
    rule = claim("d512-block", {"var": "block_size", "multiple_of": 64}, code="BLOCK_SIZE", subject="vllm-flash-attn",
                 scope="0.34.0")
    rule["when"] = {"all": [{"var": "engine", "eq": "vllm"}, {"var": "head_dim", "eq": 512}]}
    pts = [p for p in points() if p["head_size"] == 512 and p["layout"] == "dense"]
    assert pts
    refused = [{**p, "reasons": {**p["reasons"], "FLASH_ATTN": ("head_size not supported",)}} for p in pts]
    mine = [*[c for c in vs_judge.engine_claims() if c["subject"] == "vllm-flash-attn"], rule]
    r = by_claim(vs_judge.judge_grid(mine, refused, "0.33.0", any_scope=True))["d512-block"]
    assert r["agree"] > 0 and r["seen"] == 0 and not r["ran"] and not r["refused"]
    ran = [{**p, "reasons": {**p["reasons"], "FLASH_ATTN": ()}} for p in pts if p["block"] in (64, 128)]
    assert by_claim(vs_judge.judge_grid(mine, ran, "0.33.0", any_scope=True))["d512-block"]["seen"] == len(ran) > 0


def test_a_release_outcome_replayed_from_shards_keeps_each_shards_word(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """tests/data/vllm/X/outcomes.json shards merge to one release outcome: any shard against the claim fails it,
    an unattributed one comes next, a shard that tests nothing adds nothing (timeline.replayed)."""
    import json
    from types import SimpleNamespace

    from kbtool.solve.engines.vllm import grid, timeline

    doc = {"outcomes_version": timeline.OUTCOMES_VERSION, "release": "9.9.9", "shards": {
        "cc9.0": {"sha256": "a", "outcomes": {"c": {"outcome": "none", "agree": 64, "against": 0},
                                                "d": {"outcome": "holds", "agree": 5, "against": 0},
                                                "e": {"outcome": "unattributed", "agree": 1, "against": 0,
                                                      "unattributed": 2, "unattributed_example": "x: y"}}},
        "cc10.0": {"sha256": "b", "outcomes": {"c": {"outcome": "none", "agree": 3, "against": 0},
                                                 "d": {"outcome": "fails", "agree": 1, "against": 1},
                                                 "e": {"outcome": "holds", "agree": 4, "against": 0}}}}}
    (tmp_path / "9.9.9").mkdir()
    (tmp_path / "9.9.9" / "outcomes.json").write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.setattr(grid, "folders", lambda: [tmp_path])
    cases = [SimpleNamespace(params={"cc": cc}, metrics={"sha256": sha}, outcome="OK")
             for cc, sha in (("9.0", "a"), ("10.0", "b"))]
    got = timeline.replayed(SimpleNamespace(cases=cases), "9.9.9")
    assert got is not None
    assert {k: v["outcome"] for k, v in got.items()} == {"c": "none", "d": "fails", "e": "unattributed"}
    assert got["e"]["unattributed"] == 2 and got["c"]["agree"] == 67
