"""flashinfer-paths v3 cases (sinks, sliding window, FA3 KV-dtype gate) and their judge, on recorded and synthetic
observations (no GPU). Predictions come from the claims as they stand in records/claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kbtool.probe.commands import load_claims
from kbtool.probe.judges import flashinfer_paths as PJ
from kbtool.probe.rejudge import claim_context
from probes import flashinfer_paths as P

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = load_claims(ROOT / "records")
RECORDED = ROOT / "records/evidence/2026-12-01-nvidia-h200-sxm-flashinfer-paths-2.yaml"
ENV = {"gpu": "NVIDIA H200", "compute_capability": "9.0", "architecture": "sm90", "cuda": "13.0",
       "libraries": {"flashinfer": "0.7.2.post1"}}
CHECKSUMS = "AssertionError: Failed to get checksums.txt from 2d6a5a02/fmha/trtllm-gen//checksums.txt"
SINKS_IGNORED = "decode-fa2 ran but ignored the sinks argument: its output equals attention without sinks"


def judged(observations: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    env = {**ENV, "claims": claim_context(CLAIMS, P.SPEC.claims)}
    return {v["claim"]: v for v in P.judge(observations, env)}


def ok(case: dict[str, Any], max_abs_err: float = 1e-3, rel_err: float = 5e-3) -> dict[str, Any]:
    return {"params": case, "outcome": "OK", "max_abs_err": max_abs_err,
            "metrics": {"rel_err": rel_err, "correct": rel_err <= P.TOLERANCE}}


def refused(case: dict[str, Any], message: str, gate: str | None = None) -> dict[str, Any]:
    return {"params": case, "outcome": "UNSUPPORTED", "message": message, "metrics": {"gate": gate} if gate else {}}


def recorded_v2() -> list[dict[str, Any]]:
    return list(yaml.safe_load(RECORDED.read_text())["cases"])


def feature(**match: Any) -> dict[str, Any]:
    found = [c for c in P.feature_cases() if all(c.get(k) == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def as_the_source_reads() -> list[dict[str, Any]]:
    """What FlashInfer 0.7.2.post1's source says each v3 case does on sm90 without network."""
    return [
        ok(feature(path="prefill-fa3", sinks=None)),
        refused(feature(path="prefill-fa3", sinks=True), SINKS_IGNORED.replace("decode-fa2", "prefill-fa3"), "SINKS"),
        ok(feature(path="xqa", sinks=True)),
        refused(feature(path="decode-fa2", sinks=True), SINKS_IGNORED, "SINKS"),
        ok(feature(path="decode-fa2", sliding_window=P.WINDOW)),
        refused(feature(path="trtllm-gen", sinks=True), f"{P.NOT_ATTEMPTED}: trtllm-gen runs on sm100/sm103 only",
                "PROBE"),
        refused(feature(path="fa3-gate", kv_dtype="fp8_e4m3"),
                "flashinfer.utils.is_fa3_backend_supported(q=bf16, kv=fp8_e4m3) is False", "Q_DTYPE"),
        refused(feature(path="fa3-gate", kv_dtype="nvfp4"),
                "flashinfer.utils.is_fa3_backend_supported(q=bf16, kv=nvfp4) is False", "KV_DTYPE"),
    ]


def test_v3_keeps_the_v2_cases_and_their_parameters() -> None:
    """rejudges=(2,) is only honest if every recorded v2 case is still a case with the same parameters."""
    assert P.SPEC.version == 3 and 2 in P.SPEC.rejudges
    now = P.cases()
    for o in recorded_v2():
        assert o["params"] in now, o["params"]
    assert len(now) == len(recorded_v2()) + len(P.feature_cases())


def test_feature_cases_carry_the_variables_their_claims_read() -> None:
    bind = PJ.variables(ENV)
    got = {(c["path"], bind(c)["sinks"], bind(c)["sliding_window"], bind(c)["dtype"], c["kv_dtype"])
           for c in P.feature_cases()}
    assert ("xqa", True, 0, "bf16", "bf16") in got
    assert ("decode-fa2", True, 0, "bf16", "bf16") in got
    assert ("decode-fa2", False, P.WINDOW, "bf16", "bf16") in got
    assert ("trtllm-gen", True, 0, "bf16", "bf16") in got
    assert ("fa3-gate", False, 0, "bf16", "nvfp4") in got
    assert ("prefill-fa3", True, P.WINDOW, "bf16", "bf16") in got
    assert ("prefill-fa3", False, P.WINDOW, "bf16", "bf16") in got
    assert bind({"path": "xqa", "kv_dtype": "bf16"})["sinks"] is False  # a v2 case has no sinks


def test_sink_and_window_claims_as_the_source_reads_on_sm90() -> None:
    got = judged(recorded_v2() + as_the_source_reads())
    assert got["flashinfer-xqa-sinks"]["verdict"] == "confirmed"
    assert got["flashinfer-fa2-no-sinks"]["verdict"] == "confirmed"
    assert got["flashinfer-fa2-no-sinks"]["scope"]["phase"] == "decode"
    assert got["flashinfer-fa2-no-sinks"]["scope"]["paths"] == ["decode-fa2"]
    assert got["flashinfer-fa2-sliding-window"]["verdict"] == "confirmed"
    assert got["flashinfer-fa3-no-sinks"]["verdict"] == "confirmed"
    assert got["flashinfer-fa3-no-sinks"]["scope"]["phase"] == "prefill"
    # the window-and-sinks case refused for sinks is the sink claim's; the window-only case confirms the window
    fa3_window = got["flashinfer-fa3-sliding-window"]
    assert fa3_window["verdict"] == "confirmed" and "attributed to flashinfer-fa3-no-sinks" in fa3_window["detail"]
    assert got["flashinfer-fa3-fp8-kv-needs-fp8-query"]["verdict"] == "confirmed"
    assert got["flashinfer-fa3-no-nvfp4-kv"]["verdict"] == "confirmed"
    # the fa2 sink refusal is the sink claim's, not a dtype or arch claim's
    assert got["flashinfer-fa2-requires-nvidia"]["verdict"] == "confirmed"


def test_fa2_applying_the_sinks_contradicts_the_no_sinks_claim() -> None:
    obs = [ok(feature(path="decode-fa2", sinks=True))]
    assert judged(obs)["flashinfer-fa2-no-sinks"]["verdict"] == "contradicted"
    wrong = [ok(feature(path="xqa", sinks=True), rel_err=0.4)]  # ran, matched neither reference
    assert judged(wrong)["flashinfer-xqa-sinks"]["verdict"] == "inconclusive"


def test_fa3_gate_letting_bf16_q_with_fp8_kv_through_contradicts() -> None:
    obs = [{"params": feature(path="fa3-gate", kv_dtype="fp8_e4m3"), "outcome": "OK",
            "metrics": {"gate_only": True, "is_fa3_backend_supported": True}}]
    assert judged(obs)["flashinfer-fa3-fp8-kv-needs-fp8-query"]["verdict"] == "contradicted"


def test_trtllm_gen_claims_without_cubins_name_the_missing_download() -> None:
    """On the probe host trtllm-gen cannot fetch its cubins: the sink and head-dim claims are inconclusive with the
    refusal attributed to flashinfer-trtllm-gen-cubins, which kb probe apply turns into `untestable`."""
    from kbtool.probe.verdicts import _MISSING

    got = judged(recorded_v2() + as_the_source_reads())
    for cid in ("flashinfer-trtllm-gen-sinks", "flashinfer-trtllm-gen-tested-head-dims"):
        assert got[cid]["verdict"] == "inconclusive", got[cid]
        assert _MISSING.search(got[cid]["detail"]), got[cid]["detail"]
    assert got["flashinfer-trtllm-gen-sinks"]["scope"]["paths"] == ["trtllm-gen"]
    # the sink case not attempted off sm100 is no refusal of anything
    assert "trtllm-gen decode hd128 kv bf16 sinks" in got["flashinfer-trtllm-gen-sinks"]["detail"]
    assert "0 of 0" in got["flashinfer-trtllm-gen-sinks"]["detail"]
    assert PJ.reason_of(refused(feature(path="trtllm-gen", sinks=True), f"{P.NOT_ATTEMPTED}: x", "PROBE")) == "PROBE"
    assert PJ.reason_of(refused(feature(path="trtllm-gen", sinks=True), CHECKSUMS)) == "CUBINS"


def test_recorded_fp8_xqa_errors_are_within_flashinfers_own_fp8_tolerance() -> None:
    """The v2 run's fp8-KV xqa cases (rel_err 0.031-0.038 > 3e-2, max_abs_err <= 0.0084) pass FlashInfer's test_xqa
    atol of 0.05; a larger absolute error still fails."""
    got = judged(recorded_v2())
    assert got["flashinfer-xqa-requires-sm90"]["verdict"] == "confirmed", got["flashinfer-xqa-requires-sm90"]
    bad = [({**o, "max_abs_err": 0.08} if o["params"]["path"] == "xqa" and o["params"]["kv_dtype"] == "fp8_e4m3"
            else o) for o in recorded_v2()]
    assert judged(bad)["flashinfer-xqa-requires-sm90"]["verdict"] == "inconclusive"


def test_labels_tell_the_feature_cases_apart() -> None:
    labels = [PJ._label(c) for c in P.cases()]
    assert len(set(labels)) == len(labels)


def test_trtllm_gen_feature_claims_are_untestable_off_sm100_only() -> None:
    from kbtool.probe.verdicts import UNTESTABLE_HERE

    got = judged(recorded_v2() + as_the_source_reads())
    for cid in PJ.OFF_ARCH_UNTESTABLE:
        assert UNTESTABLE_HERE in got[cid]["detail"], got[cid]
    assert UNTESTABLE_HERE not in got["flashinfer-trtllm-gen-requires-sm100"]["detail"]
    env = {**ENV, "architecture": "sm100", "compute_capability": "10.0",
           "claims": claim_context(CLAIMS, P.SPEC.claims)}
    on_b200 = {v["claim"]: v for v in P.judge(recorded_v2() + as_the_source_reads(), env)}
    assert UNTESTABLE_HERE not in on_b200["flashinfer-trtllm-gen-sinks"]["detail"]


def test_nvfp4_cases_judge_the_prefill_only_claim_by_phase() -> None:
    claim = "flashinfer-fa2-nvfp4-kv-prefill-only"
    prefill = feature(path="nvfp4-prefill-fa2")
    tc, cuda_core = feature(path="nvfp4-decode-fa2-tc"), feature(path="nvfp4-decode-fa2")
    # as the claim says: prefill runs, decode refused for the KV dtype
    held = judged([ok(prefill), refused(tc, "NVFP4 KV cache is not supported for decode", "KV_DTYPE"),
                   refused(cuda_core, "NVFP4 KV cache is not supported for decode", "KV_DTYPE")])
    assert held[claim]["verdict"] == "confirmed"
    # a decode that runs correctly on NVFP4 pages contradicts it
    ran = judged([ok(prefill), ok(tc), refused(cuda_core, "NVFP4 KV cache is not supported for decode", "KV_DTYPE")])
    assert ran[claim]["verdict"] == "contradicted"
    # a decode that runs but computes something else says nothing
    wrong = judged([ok(prefill), ok(tc, max_abs_err=1.0, rel_err=0.5),
                    refused(cuda_core, "NVFP4 KV cache is not supported for decode", "KV_DTYPE")])
    assert wrong[claim]["verdict"] != "contradicted"

