"""Each probe's judge on recorded observations (no GPU). Judges read each claim's prediction off the claim record
(env["claims"]), so these tests use the claims as they stand in records/claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kbtool.probe.commands import load_claims
from kbtool.probe.rejudge import claim_context
from probes import fa2_fa3, fa4_arch, flashinfer_head_dim, flashinfer_paths, flashmla, hardware, sdpa_gates, sdpa_mixed

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = load_claims(ROOT / "records")
H200 = {"gpu": "NVIDIA H200", "compute_capability": "9.0", "architecture": "sm90", "torch": "2.11.0+cu130",
        "cuda": "13.0", "libraries": {"flashinfer": "0.6.18", "flash-attn-4": "4.0.0b36", "cudnn": "92300"}}
B200 = {**H200, "gpu": "NVIDIA B200", "compute_capability": "10.0", "architecture": "sm100"}


def env_for(probe: Any, env: dict[str, Any]) -> dict[str, Any]:
    return {**env, "claims": claim_context(CLAIMS, probe.SPEC.claims)}


def obs(params: dict[str, Any], outcome: str, correct: bool = True, message: str | None = None,
        **metrics: Any) -> dict[str, Any]:
    return {"params": params, "outcome": outcome, "message": message or (None if outcome == "OK" else "refused"),
            "kernels": [], "metrics": {"correct": correct, **metrics}}


def verdicts(probe: Any, observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, str]:
    return {v["claim"]: v["verdict"] for v in probe.judge(observations, env_for(probe, env))}


# ---- SDPA ------------------------------------------------------------------------------------------


def sdpa_as_the_source_says(case: dict[str, Any], cudnn_limit: int = 256) -> dict[str, Any]:
    b, d, t = case["backend"], case["head_dim"], case["dtype"]
    if b in ("flash", "cudnn") and t == "fp32":
        return obs(case, "UNSUPPORTED", message=f"{b} attention only supports fp16 and bf16 data type")
    if b in ("flash", "cudnn") and d > (256 if b == "flash" else cudnn_limit):
        return obs(case, "UNSUPPORTED", message=f"{b} attention requires head_dim <= {cudnn_limit}")
    return obs(case, "OK")


def test_sdpa_as_the_sources_say_on_sm90() -> None:
    got = verdicts(sdpa_gates, [sdpa_as_the_source_says(c) for c in sdpa_gates.cases()], H200)
    assert set(got.values()) == {"confirmed"}, got


def test_sdpa_a_refusal_is_attributed_to_the_claim_that_names_its_reason() -> None:
    """fp32 refused by flash is the dtype claim's; it counts neither for nor against the head-dim claim."""
    got = sdpa_gates.judge([sdpa_as_the_source_says(c) for c in sdpa_gates.cases()], env_for(sdpa_gates, H200))
    detail = {v["claim"]: v["detail"] for v in got}["torch-sdpa-flash-sm-range"]
    assert "attributed to torch-sdpa-flash-dtypes" in detail and "attributed to torch-sdpa-flash-head-dim" in detail


def test_sdpa_flash_running_hd512_contradicts_the_head_dim_claim_only() -> None:
    o = [obs(c, "OK") if c["backend"] == "flash" and c["dtype"] != "fp32" else sdpa_as_the_source_says(c)
         for c in sdpa_gates.cases()]
    got = verdicts(sdpa_gates, o, H200)
    assert got["torch-sdpa-flash-head-dim"] == "contradicted"
    assert got["torch-sdpa-flash-dtypes"] == "confirmed"


def test_sdpa_old_cudnn_caps_at_128() -> None:
    env = {**H200, "libraries": {"cudnn": "91000"}}
    o = [sdpa_as_the_source_says(c, cudnn_limit=128) for c in sdpa_gates.cases()]
    assert verdicts(sdpa_gates, o, env)["torch-sdpa-cudnn-head-dim"] == "confirmed"
    o = [sdpa_as_the_source_says(c, cudnn_limit=256) for c in sdpa_gates.cases()]
    assert verdicts(sdpa_gates, o, env)["torch-sdpa-cudnn-head-dim"] == "contradicted"


def test_sdpa_wrong_results_and_foreign_kernels_are_not_evidence() -> None:
    o = [obs(c, "OK", correct=False) for c in sdpa_gates.cases() if c["backend"] == "flash"]
    assert verdicts(sdpa_gates, o, H200)["torch-sdpa-flash-head-dim"] == "inconclusive"
    o = [obs(c, "OK", dispatch_ok=False) for c in sdpa_gates.cases() if c["backend"] == "efficient"]
    assert verdicts(sdpa_gates, o, H200)["torch-sdpa-efficient-head-dim"] == "inconclusive"


def test_sdpa_a_kv_dtype_other_than_q_is_the_same_dtype_claims_refusal() -> None:
    """bf16 q with fp8 K/V refused ("to have the same dtype") confirms the same-dtype claim; the dtype claim, whose
    conditions read only `dtype`, gets the refusal attributed, not counted against it."""
    o = [obs(c, "UNSUPPORTED", message="Expected query, key, and value to have the same dtype")
         if c["kv_dtype"] != c["dtype"] else obs(c, "OK") for c in sdpa_mixed.cases() if c["kind"] == "mixed"]
    got = {v["claim"]: v for v in sdpa_mixed.judge(o, env_for(sdpa_mixed, H200))}
    assert got["torch-sdpa-flash-same-dtype-qkv"]["verdict"] == "confirmed"
    flash = got["torch-sdpa-flash-dtypes"]
    assert "refusals attributed to torch-sdpa-flash-same-dtype-qkv" in flash["detail"]


def test_sdpa_math_memory_cases_and_the_default_dispatch() -> None:
    o = [obs(c, "OK", dispatched="cudnn") for c in sdpa_mixed.cases() if c["kind"] in ("default", "memory")]
    env = {**H200, "libraries": {"cudnn": "91900"}}
    got = verdicts(sdpa_mixed, o, env)
    assert got["torch-sdpa-cudnn-preferred-on-sm9x-sm10x"] == "confirmed"
    assert got["torch-sdpa-math-any-shape"] == "inconclusive"  # the memory sweep is no gate case
    o = [obs(c, "OK", dispatched="flash") for c in sdpa_mixed.cases() if c["kind"] == "default"]
    assert verdicts(sdpa_mixed, o, env)["torch-sdpa-cudnn-preferred-on-sm9x-sm10x"] == "contradicted"


def test_sdpa_dispatch_names() -> None:
    assert sdpa_gates.dispatched(["void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>"]) == "flash"
    assert sdpa_gates.dispatched(["fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::Attn)"]) == (
        "efficient")
    assert sdpa_gates.dispatched(["cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16"]) == "cudnn"
    assert sdpa_gates.dispatched(["nvjet_tst_128x64", "softmax_warp_forward"]) == "math"
    assert sdpa_gates.dispatched([]) is None


# ---- FlashInfer ------------------------------------------------------------------------------------

ARCH_GATE = "RuntimeError: No supported CUDA architectures found for major versions [10, 11, 12]."
FP8_GATE = "flashinfer-fp8-kv-head-dim-512-needs-sm100"
SEED = "flashinfer-head-dim-256-512-unsupported"


def flashinfer_release(c: dict[str, Any], *, fp8_large_gate: bool, sm_major: int = 9) -> dict[str, Any]:
    """0.6.18 (fp8 KV above hd 256 built for majors 10-12 only) or 0.7.2.post1 (gate lifted); FA3 as in both."""
    if c["path"] == "prefill-fa3":
        if c["kv_dtype"] != "bf16":
            return obs(c, "UNSUPPORTED", message="flashinfer.utils.is_fa3_backend_supported(q=bf16, kv=fp8_e4m3) "
                                                 "is False")
        if c["head_dim"] == 512:
            return obs(c, "UNSUPPORTED", message="flashinfer.utils.is_fa3_prefill_head_dim_supported(512, 512) is "
                                                 "False")
        return obs(c, "OK")
    if fp8_large_gate and c["kv_dtype"] == "fp8_e4m3" and c["head_dim"] > 256 and sm_major < 10:
        return obs(c, "UNSUPPORTED", message=ARCH_GATE)
    return obs(c, "OK")


def test_flashinfer_0_6_18_the_seed_is_refuted_and_its_failures_are_the_fp8_gate() -> None:
    """Issue 20, second case: the three refusals belong to the fp8 gate, not to the seed's head-dim claim."""
    o = [flashinfer_release(c, fp8_large_gate=True) for c in flashinfer_head_dim.cases()]
    got = {v["claim"]: v for v in flashinfer_head_dim.judge(o, env_for(flashinfer_head_dim, H200))}
    seed = got[SEED]
    assert seed["verdict"] == "contradicted"
    assert f"refusals attributed to {FP8_GATE}" in seed["detail"]
    assert got[FP8_GATE]["verdict"] == "confirmed" and got[FP8_GATE]["detail"].startswith("3 of 3")
    for claim in ("flashinfer-decode-head-dims", "flashinfer-prefill-fa2-head-dims",
                  "flashinfer-prefill-fa3-head-dims", "flashinfer-arch-range", "flashinfer-fa2-q-kv-dtypes"):
        assert got[claim]["verdict"] == "confirmed", (claim, got[claim]["detail"])


def test_flashinfer_0_7_2_the_fp8_gate_is_contradicted_and_ungated_cases_count_for_nothing() -> None:
    """Issue 20, first case: the three gated cases ran; the other 29 say nothing about this claim."""
    env = {**H200, "libraries": {"flashinfer": "0.7.2.post1"}}
    o = [flashinfer_release(c, fp8_large_gate=False) for c in flashinfer_head_dim.cases()]
    got = {v["claim"]: v for v in flashinfer_head_dim.judge(o, env_for(flashinfer_head_dim, env))}
    assert got[FP8_GATE]["verdict"] == "contradicted"
    assert got[FP8_GATE]["detail"].startswith("0 of 3 gated cases")
    assert got[FP8_GATE]["scope"]["flashinfer"] == "0.7.2.post1"


def test_flashinfer_fp8_gate_on_blackwell() -> None:
    o = [flashinfer_release(c, fp8_large_gate=True, sm_major=10) for c in flashinfer_head_dim.cases()]
    assert verdicts(flashinfer_head_dim, o, B200)[FP8_GATE] == "confirmed"
    o = [flashinfer_release(c, fp8_large_gate=True, sm_major=9) for c in flashinfer_head_dim.cases()]
    assert verdicts(flashinfer_head_dim, o, B200)[FP8_GATE] == "contradicted"  # majors 10-12 do build them


def test_flashinfer_a_refusal_for_another_reason_is_not_the_gate() -> None:
    o = [{**x, "message": "Unsupported head_dim: 512"} if x["outcome"] == "UNSUPPORTED" and "architectures" in str(
        x["message"]) else x for x in (flashinfer_release(c, fp8_large_gate=True) for c in flashinfer_head_dim.cases())]
    got = {v["claim"]: v for v in flashinfer_head_dim.judge(o, env_for(flashinfer_head_dim, H200))}
    assert got[FP8_GATE]["verdict"] == "inconclusive"
    assert f"refusals attributed to {SEED}" in got[FP8_GATE]["detail"]  # the head-dim claim that predicts it


def test_flashinfer_errors_are_inconclusive() -> None:
    o = [obs(c, "ERROR", message="worker crashed: SIGSEGV") for c in flashinfer_head_dim.cases()]
    assert set(verdicts(flashinfer_head_dim, o, H200).values()) == {"inconclusive"}


def test_flashinfer_scope_names_the_phase() -> None:
    o = [flashinfer_release(c, fp8_large_gate=True) for c in flashinfer_head_dim.cases()]
    scopes = {v["claim"]: v["scope"] for v in flashinfer_head_dim.judge(o, env_for(flashinfer_head_dim, H200))}
    assert scopes["flashinfer-decode-head-dims"]["phase"] == "decode"
    assert scopes["flashinfer-prefill-fa2-head-dims"]["phase"] == "prefill"
    assert "phase" not in scopes[SEED]


def test_flashinfer_paths_trtllm_gen_download_is_its_own_gate() -> None:
    o = [obs(c, "UNSUPPORTED", message="AssertionError: Failed to get checksums.txt from x/fmha/trtllm-gen/")
         if c["path"] == "trtllm-gen" else obs(c, "OK", rel_err=0.01) for c in flashinfer_paths.cases()]
    got = {v["claim"]: v for v in flashinfer_paths.judge(o, env_for(flashinfer_paths, H200))}
    sm100 = got["flashinfer-trtllm-gen-requires-sm100"]
    assert sm100["verdict"] == "inconclusive" and "attributed to flashinfer-trtllm-gen-cubins" in sm100["detail"]
    assert got["flashinfer-trtllm-gen-cubins"]["verdict"] == "confirmed"  # no network and no cubin package here
    assert got["flashinfer-xqa-requires-sm90"]["verdict"] == "confirmed"
    o = [obs(c, "UNSUPPORTED", message=ARCH_GATE) if c["path"] == "trtllm-gen" else obs(c, "OK", rel_err=0.01)
         for c in flashinfer_paths.cases()]
    assert verdicts(flashinfer_paths, o, H200)["flashinfer-trtllm-gen-requires-sm100"] == "confirmed"


def test_flashinfer_paths_fp8_xqa_is_read_with_an_fp8_error_budget() -> None:
    o = [{**obs(c, "OK", correct=False, rel_err=0.035), "max_abs_err": 0.008} if c["kv_dtype"] == "fp8_e4m3"
         else obs(c, "OK", rel_err=0.005)
         for c in flashinfer_paths.cases() if c["path"] == "xqa"]
    assert verdicts(flashinfer_paths, o, H200)["flashinfer-xqa-requires-sm90"] == "confirmed"
    o = [obs(c, "OK", correct=False, rel_err=0.2) for c in flashinfer_paths.cases() if c["path"] == "xqa"]
    assert verdicts(flashinfer_paths, [*o], H200)["flashinfer-xqa-requires-sm90"] == "inconclusive"


# ---- FA-4 ------------------------------------------------------------------------------------------


def fa4_on(sm: str, c: dict[str, Any]) -> dict[str, Any]:
    if c["dtype"] == "fp32" or c.get("kv_dtype") == "nvfp4":
        return obs(c, "UNSUPPORTED", message="AssertionError: inputs must be float16, bfloat16, fp8 e4m3fn, or fp8")
    if c["dtype"] == "fp8_e4m3" and sm != "sm100":
        return obs(c, "UNSUPPORTED", message="AssertionError: FP8 is only supported on SM100 (compute capability 10.x)")
    if not fa4_arch.head_dims_allowed(sm, c["head_dim"]):
        return obs(c, "UNSUPPORTED", message=f"AssertionError: (head_dim, head_dim_v)=({c['head_dim']}, "
                                             f"{c['head_dim']}) is not supported on {sm.upper()}.")
    return obs(c, "OK")


def test_fa4_running_on_hopper_refutes_requires_blackwell() -> None:
    got = verdicts(fa4_arch, [fa4_on("sm90", c) for c in fa4_arch.cases()], H200)
    assert got == {"fa4-requires-blackwell": "contradicted", "fa4-head-dims": "confirmed",
                   "fa4-fp8-sm100-only": "confirmed", "fa4-arch-range": "confirmed", "fa4-requires-nvidia": "confirmed",
                   "fa4-sinks": "confirmed", "flash-attention-4-sliding-window": "confirmed",
                   "fa4-dtypes": "confirmed", "fa4-fp8-kv-needs-fp8-query": "inconclusive"}


def test_fa4_on_blackwell_confirms_requires_blackwell() -> None:
    got = verdicts(fa4_arch, [fa4_on("sm100", c) for c in fa4_arch.cases()], B200)
    assert got["fa4-requires-blackwell"] == "confirmed" and got["fa4-fp8-sm100-only"] == "confirmed"


def test_fa4_fp8_running_on_hopper_contradicts_sm100_only() -> None:
    o = [obs(c, "OK") if c["head_dim"] <= 256 else fa4_on("sm90", c) for c in fa4_arch.cases()]
    assert verdicts(fa4_arch, o, H200)["fa4-fp8-sm100-only"] == "contradicted"


# ---- source-build probes -----------------------------------------------------------------------------


def test_fa2_fa3_judge_only_what_ran() -> None:
    fa2 = [obs({"lib": "fa2", "head_dim": d, "dtype": t}, "OK" if d <= 256 and t != "fp8_e4m3" else "UNSUPPORTED")
           for d in fa2_fa3.HEAD_DIMS["fa2"] for t in fa2_fa3.DTYPES["fa2"]]
    got = verdicts(fa2_fa3, fa2, H200)
    assert got == {"fa2-requires-sm80": "confirmed", "fa2-head-dim-max-256": "confirmed"}
    fa3 = [obs({"lib": "fa3", "head_dim": d, "dtype": t},
               "OK" if d <= 256 and t != "fp8_e5m2" else "UNSUPPORTED")
           for d in fa2_fa3.HEAD_DIMS["fa3"] for t in fa2_fa3.DTYPES["fa3"]]
    got = verdicts(fa2_fa3, fa3, H200)
    assert got == {"fa3-requires-sm90": "confirmed", "fa3-head-dims": "confirmed",
                   "fa3-fp8-e4m3-forward-only": "confirmed"}
    assert verdicts(fa2_fa3, [], H200) == {}


def test_flashmla_dense_decode_on_hopper() -> None:
    o = [obs({"path": "dense-decode", "kv_dtype": "bf16"}, "OK"),
         obs({"path": "dense-decode", "kv_dtype": "fp8_e4m3"}, "UNSUPPORTED")]
    got = verdicts(flashmla, o, H200)
    assert got == {"flashmla-dense-decode-requires-sm90a": "confirmed", "flashmla-dense-decode-kv-dtype": "confirmed"}


# ---- hardware --------------------------------------------------------------------------------------


def test_hardware_summary_compares_with_the_kb() -> None:
    o = [obs({"measure": "properties"}, "OK", compute_capability="9.0", sm_count=132, memory_bytes=150_754_820_096,
             l2_bytes=62_914_560, smem_per_sm_bytes=233_472, smem_per_block_optin_bytes=232_448),
         obs({"measure": "fp8-scaled-mm"}, "OK"),
         obs({"measure": "copy-bandwidth"}, "OK", tb_per_s=4.31)]
    env = {**H200, "kb": {"accelerator": {"sm_count": {"value": 132}, "memory_gb": {"value": 141},
                                          "l2_mb": {"value": 50}, "memory_bandwidth_tbs": {"value": 4.8}},
                          "architecture": {"compute_capability": "9.0", "smem_per_sm_kib": {"value": 228},
                                           "smem_per_block_kib": {"value": 227}, "fp8_tensor_cores": {"value": True}}}}
    m = hardware.summarize(o, env)["measured"]
    assert m["sm_count"] == {"value": 132, "unit": "SMs", "basis": "measured", "kb_value": 132, "agrees": True}
    assert m["l2"]["agrees"] is False  # 60 MiB read, 50 MB recorded
    assert m["smem_per_sm"]["agrees"] is True and m["smem_per_block_optin"]["agrees"] is True
    assert m["memory"]["agrees"] is True
    assert m["fp8_tensor_core_matmul"]["value"] is True
    assert m["d2d_copy_bandwidth"]["value"] == 4.31
    assert hardware.judge(o, env) == []


# ---- recorded runs (committed evidence as fixture data; read, never written) ------------------------

EVIDENCE = ROOT / "records" / "evidence"


@pytest.mark.parametrize("run", ["2026-11-30-nvidia-h200-sxm-flashinfer-head-dim",
                                 "2026-11-30-nvidia-h200-sxm-flashinfer-head-dim-2",
                                 "2026-11-30-nvidia-h200-sxm-flashinfer-head-dim-3"])
def test_flashinfer_judge_on_the_recorded_0_6_18_runs(run: str) -> None:
    """The first run labelled the arch-gate refusal ERROR, the later ones UNSUPPORTED; the message decides."""
    record = yaml.safe_load((EVIDENCE / f"{run}.yaml").read_text(encoding="utf-8"))
    got = {v["claim"]: v for v in flashinfer_head_dim.judge(record["cases"], env_for(flashinfer_head_dim,
                                                                                       record["environment"]))}
    assert got[FP8_GATE]["verdict"] == "confirmed" and got[FP8_GATE]["detail"].startswith("3 of 3")
    assert got[SEED]["verdict"] == "contradicted" and FP8_GATE in got[SEED]["detail"]
    assert got[FP8_GATE]["scope"]["sm"] == "sm90" and got[FP8_GATE]["scope"]["flashinfer"] == "0.6.18"


def test_flashinfer_judge_on_the_recorded_0_7_2_run() -> None:
    record = yaml.safe_load((EVIDENCE / "2026-12-01-nvidia-h200-sxm-flashinfer-head-dim.yaml").read_text("utf-8"))
    assert record["environment"]["libraries"]["flashinfer"] == "0.7.2.post1"
    got = {v["claim"]: v for v in flashinfer_head_dim.judge(record["cases"], env_for(flashinfer_head_dim,
                                                                                       record["environment"]))}
    assert got[FP8_GATE]["verdict"] == "contradicted" and got[FP8_GATE]["detail"].startswith("0 of 3")
    assert got[SEED]["verdict"] == "contradicted"
