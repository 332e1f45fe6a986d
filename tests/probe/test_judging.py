"""The judging rule of design.md §5 on synthetic observations: prediction against outcome, per claim."""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import Gate, claim_expect, judge_gate, judge_gates, reason_from_text


def case(hd: int, outcome: str, message: str | None = None, correct: bool = True) -> dict[str, Any]:
    return {"params": {"head_dim": hd}, "outcome": outcome, "message": message, "metrics": {"correct": correct}}


def label(p: dict[str, Any]) -> str:
    return f"hd{p['head_dim']}"


HD_256 = Gate("max-256", lambda p: p["head_dim"] <= 256, "HEAD_DIM")
ONLY_BIG = Gate("big-refused", lambda p: False if p["head_dim"] > 256 else None, "HEAD_DIM")
ARCH = Gate("arch", lambda p: False if p["head_dim"] == 512 else None, "ARCH")


def verdict(gate: Gate, obs: list[dict[str, Any]], others: list[Gate] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return judge_gate(gate, obs, {}, label, others=list(others))


def test_confirmed_when_every_gated_case_comes_out_as_predicted() -> None:
    obs = [case(64, "OK"), case(256, "OK"), case(512, "UNSUPPORTED", "head_dim must be <= 256")]
    assert verdict(HD_256, obs)["verdict"] == "confirmed"


def test_a_predicted_refusal_that_runs_cleanly_contradicts() -> None:
    obs = [case(64, "OK"), case(512, "OK")]
    v = verdict(HD_256, obs)
    assert v["verdict"] == "contradicted" and "ran although the claim says refused: hd512" in v["detail"]


def test_a_predicted_run_refused_for_the_claims_own_reason_contradicts() -> None:
    v = verdict(HD_256, [case(128, "UNSUPPORTED", "Unsupported head_dim 128")])
    assert v["verdict"] == "contradicted" and "own reason (HEAD_DIM)" in v["detail"]


def test_a_predicted_run_refused_for_another_named_reason_is_attributed_not_counted() -> None:
    obs = [case(128, "OK"), case(512, "UNSUPPORTED", "No supported CUDA architectures found for major versions [10]")]
    hd_any = Gate("any-hd", lambda p: True, "HEAD_DIM")
    v = verdict(hd_any, obs, [hd_any, ARCH])
    assert v["verdict"] == "confirmed" and "refusals attributed to arch: hd512" in v["detail"]
    assert v["detail"].startswith("1 of 1 gated cases")
    alone = verdict(hd_any, obs)  # nobody explains the refusal: no confirmation, no contradiction
    assert alone["verdict"] == "inconclusive" and "no claim names (ARCH)" in alone["detail"]


def test_cases_a_claim_does_not_gate_count_for_nothing() -> None:
    obs = [case(64, "OK"), case(128, "OK"), case(512, "OK")]
    v = verdict(ONLY_BIG, obs)
    assert v["verdict"] == "contradicted" and v["detail"].startswith("0 of 1 gated cases")
    assert verdict(ONLY_BIG, [case(64, "OK")])["verdict"] == "inconclusive"


def test_a_predicted_refusal_for_another_reason_confirms_nothing() -> None:
    v = verdict(ONLY_BIG, [case(512, "UNSUPPORTED", "No supported CUDA architectures found")], [ONLY_BIG, ARCH])
    assert v["verdict"] == "inconclusive" and "attributed to arch" in v["detail"]


def test_errors_wrong_results_and_skips() -> None:
    assert verdict(HD_256, [case(64, "OK"), case(128, "ERROR", "worker crashed: SIGSEGV")])["verdict"] == (
        "inconclusive")
    assert verdict(HD_256, [case(64, "OK", correct=False)])["verdict"] == "inconclusive"
    assert verdict(HD_256, [case(64, "OK"), case(128, "SKIPPED")])["verdict"] == "confirmed"
    # an ERROR whose message names a gate is that gate's refusal (older runners recorded FlashInfer's arch gate so)
    arch_error = case(512, "ERROR", "RuntimeError: No supported CUDA architectures found for major versions [10]")
    assert verdict(ARCH, [arch_error])["verdict"] == "confirmed"


def test_judge_gates_judges_each_claim_against_the_others() -> None:
    obs = [case(64, "OK"), case(512, "UNSUPPORTED", "No supported CUDA architectures found")]
    got = {v["claim"]: v["verdict"] for v in judge_gates([HD_256, ARCH], obs, lambda g: {}, label)}
    assert got == {"max-256": "confirmed", "arch": "confirmed"}


def test_reason_codes_read_off_messages() -> None:
    assert reason_from_text("(head_dim, head_dim_v)=(512, 512) is not supported on SM90.") == "HEAD_DIM"
    assert reason_from_text("FP8 is only supported on SM100") == "DTYPE"
    assert reason_from_text("No supported CUDA architectures found for major versions [10, 11, 12].") == "ARCH"
    assert reason_from_text("Failed to get checksums.txt from x/fmha/trtllm-gen/") == "NETWORK"
    assert reason_from_text("something else went wrong") is None


def test_claim_expect_reads_when_requires_and_subject() -> None:
    from kbtool.model.common import Leaf

    claim = {"subject": "k", "effect": "reject", "when": Leaf(var="phase", eq="decode"),
             "requires": Leaf(var="head_dim", le=256), "reason": "HEAD_DIM"}
    expect = claim_expect(claim, lambda p: [p["subject"]], lambda p: p)
    assert expect({"subject": "k", "phase": "decode", "head_dim": 128}) is True
    assert expect({"subject": "k", "phase": "decode", "head_dim": 512}) is False
    assert expect({"subject": "k", "phase": "prefill", "head_dim": 512}) is None  # `when` false: not gated
    assert expect({"subject": "other", "phase": "decode", "head_dim": 512}) is None  # another kernel
    assert expect({"subject": "k", "phase": "decode"}) is None  # requires unknown
    supports = {"subject": "k", "effect": "supports", "when": None, "requires": None, "reason": "FALLBACK"}
    assert claim_expect(supports, lambda p: ["k"], lambda p: p)({}) is True
    caveat = {**supports, "effect": "caveat"}
    assert claim_expect(caveat, lambda p: ["k"], lambda p: p)({}) is None
