"""Each probe's judge on recorded observations (no GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from probes import fa2_fa3, fa4_arch, flashinfer_head_dim, flashmla, hardware, sdpa_gates

H200 = {"gpu": "NVIDIA H200", "compute_capability": "9.0", "architecture": "sm90", "torch": "2.11.0+cu130",
        "libraries": {"flashinfer": "0.6.18", "flash-attn-4": "4.0.0b36", "cudnn": "92300"}}
B200 = {**H200, "gpu": "NVIDIA B200", "compute_capability": "10.0", "architecture": "sm100"}


def obs(params: dict[str, Any], outcome: str, correct: bool = True, **metrics: Any) -> dict[str, Any]:
    return {"params": params, "outcome": outcome, "message": None if outcome == "OK" else "refused",
            "kernels": [], "metrics": {"correct": correct, **metrics}}


def verdicts(judge: Any, observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, str]:
    return {v["claim"]: v["verdict"] for v in judge(observations, env)}


# ---- SDPA ------------------------------------------------------------------------------------------


def sdpa_as_the_source_says(case: dict[str, Any], cudnn_limit: int = 256) -> str:
    b, d, t = case["backend"], case["head_dim"], case["dtype"]
    if b == "flash":
        return "OK" if d <= 256 and t != "fp32" else "UNSUPPORTED"
    if b == "cudnn":
        return "OK" if d <= cudnn_limit and t != "fp32" else "UNSUPPORTED"
    return "OK"


def test_sdpa_all_as_claimed_on_sm90() -> None:
    o = [obs(c, sdpa_as_the_source_says(c)) for c in sdpa_gates.cases()]
    got = verdicts(sdpa_gates.judge, o, H200)
    assert got == {c: "confirmed" for c in sdpa_gates.SPEC.claims}


def test_sdpa_flash_running_hd512_contradicts_part_of_the_head_dim_claim() -> None:
    o = [obs(c, "OK" if c["backend"] == "flash" and c["dtype"] != "fp32" else sdpa_as_the_source_says(c))
         for c in sdpa_gates.cases()]
    got = verdicts(sdpa_gates.judge, o, H200)
    assert got["torch-sdpa-flash-head-dim"] == "partial"
    assert got["torch-sdpa-flash-dtypes"] == "confirmed"


def test_sdpa_old_cudnn_caps_at_128() -> None:
    env = {**H200, "libraries": {"cudnn": "91000"}}
    o = [obs(c, sdpa_as_the_source_says(c, cudnn_limit=128)) for c in sdpa_gates.cases()]
    assert verdicts(sdpa_gates.judge, o, env)["torch-sdpa-cudnn-head-dim"] == "confirmed"
    o = [obs(c, sdpa_as_the_source_says(c, cudnn_limit=256)) for c in sdpa_gates.cases()]
    assert verdicts(sdpa_gates.judge, o, env)["torch-sdpa-cudnn-head-dim"] == "partial"


def test_sdpa_wrong_results_and_foreign_kernels_are_not_evidence() -> None:
    o = [obs(c, "OK", correct=False) for c in sdpa_gates.cases() if c["backend"] == "flash"]
    assert verdicts(sdpa_gates.judge, o, H200)["torch-sdpa-flash-head-dim"] == "inconclusive"
    o = [obs(c, "OK", dispatch_ok=False) for c in sdpa_gates.cases() if c["backend"] == "efficient"]
    assert verdicts(sdpa_gates.judge, o, H200)["torch-sdpa-efficient-head-dim"] == "inconclusive"


def test_sdpa_dispatch_names() -> None:
    assert sdpa_gates.dispatched(["void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>"]) == "flash"
    assert sdpa_gates.dispatched(["fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::Attn)"]) == (
        "efficient")
    assert sdpa_gates.dispatched(["cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16"]) == "cudnn"
    assert sdpa_gates.dispatched(["nvjet_tst_128x64", "softmax_warp_forward"]) == "math"
    assert sdpa_gates.dispatched([]) is None


# ---- FlashInfer ------------------------------------------------------------------------------------


def flashinfer_library_behaviour(c: dict[str, Any]) -> str:
    if c["path"] == "prefill-fa3":
        return "OK" if c["head_dim"] in (64, 128, 256) and c["kv_dtype"] == "bf16" else "UNSUPPORTED"
    return "OK"


def test_flashinfer_runs_256_and_512_refuting_the_seed() -> None:
    o = [obs(c, flashinfer_library_behaviour(c)) for c in flashinfer_head_dim.cases()]
    got = verdicts(flashinfer_head_dim.judge, o, H200)
    assert got == {"flashinfer-decode-head-dims": "confirmed", "flashinfer-prefill-fa2-head-dims": "confirmed",
                   "flashinfer-prefill-fa3-head-dims": "confirmed",
                   "flashinfer-head-dim-256-512-unsupported": "contradicted",
                   # hd 512 with fp8 KV running on sm90 goes against the SM100+ gate; the hd <= 256 controls agree
                   "flashinfer-fp8-kv-head-dim-512-needs-sm100": "partial"}


def test_flashinfer_refusing_512_is_partial_for_the_seed_and_the_dispatch_claim() -> None:
    o = [obs(c, "UNSUPPORTED" if c["head_dim"] == 512 else flashinfer_library_behaviour(c))
         for c in flashinfer_head_dim.cases()]
    got = verdicts(flashinfer_head_dim.judge, o, H200)
    assert got["flashinfer-head-dim-256-512-unsupported"] == "partial"
    assert got["flashinfer-decode-head-dims"] == "partial"


def test_flashinfer_verdict_scope_names_the_phase() -> None:
    o = [obs(c, flashinfer_library_behaviour(c)) for c in flashinfer_head_dim.cases()]
    scopes = {v["claim"]: v["scope"] for v in flashinfer_head_dim.judge(o, H200)}
    assert scopes["flashinfer-decode-head-dims"]["phase"] == "decode"
    assert scopes["flashinfer-prefill-fa2-head-dims"]["phase"] == "prefill"
    assert scopes["flashinfer-decode-head-dims"]["head_dims"] == [64, 128, 256, 512]
    assert "phase" not in scopes["flashinfer-head-dim-256-512-unsupported"]


def flashinfer_0_6_18(sm_major: int, c: dict[str, Any]) -> dict[str, Any]:
    """What FlashInfer 0.6.18's source says: fp8 KV with hd > 256 is built for cc majors 10-12 only."""
    if c["path"] != "prefill-fa3" and c["kv_dtype"] == "fp8_e4m3" and c["head_dim"] > 256 and sm_major < 10:
        return {**obs(c, "UNSUPPORTED"), "message": "RuntimeError: No supported CUDA architectures found for major "
                                                    "versions [10, 11, 12]."}
    return obs(c, flashinfer_library_behaviour(c))


FP8_GATE = "flashinfer-fp8-kv-head-dim-512-needs-sm100"


def test_flashinfer_fp8_large_head_gate_confirmed_below_and_above_sm100() -> None:
    for env, major in ((H200, 9), (B200, 10)):
        o = [flashinfer_0_6_18(major, c) for c in flashinfer_head_dim.cases()]
        assert verdicts(flashinfer_head_dim.judge, o, env)[FP8_GATE] == "confirmed"
    # The same refusals on a B200 go against the claim (it says majors 10-12 build these modules).
    o = [flashinfer_0_6_18(9, c) for c in flashinfer_head_dim.cases()]
    assert verdicts(flashinfer_head_dim.judge, o, B200)[FP8_GATE] == "partial"


def test_flashinfer_fp8_gate_needs_the_arch_message_and_a_running_control() -> None:
    other = [{**o, "message": "Unsupported head_dim: 512"} if o["outcome"] == "UNSUPPORTED" else o
             for o in (flashinfer_0_6_18(9, c) for c in flashinfer_head_dim.cases())]
    got = flashinfer_head_dim.judge(other, H200)[-1]
    assert got["verdict"] == "inconclusive" and "no clear answer" in got["detail"]  # the controls alone show nothing
    refused = [obs(c, "UNSUPPORTED") if c["kv_dtype"] == "fp8_e4m3" else obs(c, "OK")
               for c in flashinfer_head_dim.cases() if c["path"] != "prefill-fa3"]
    assert verdicts(flashinfer_head_dim.judge, refused, H200)[FP8_GATE] == "contradicted"
    assert verdicts(flashinfer_head_dim.judge, refused, {**H200, "compute_capability": None})[FP8_GATE] == (
        "inconclusive")


def test_flashinfer_errors_are_inconclusive() -> None:
    o = [obs(c, "ERROR") for c in flashinfer_head_dim.cases()]
    assert set(verdicts(flashinfer_head_dim.judge, o, H200).values()) == {"inconclusive"}


# ---- FA-4 ------------------------------------------------------------------------------------------


def fa4_on(sm: str, c: dict[str, Any]) -> str:
    if c["dtype"] == "fp8_e4m3" and sm != "sm100":
        return "UNSUPPORTED"
    return "OK" if fa4_arch.head_dims_allowed(sm, c["head_dim"]) else "UNSUPPORTED"


def test_fa4_running_on_hopper_refutes_requires_blackwell() -> None:
    o = [obs(c, fa4_on("sm90", c)) for c in fa4_arch.cases()]
    got = verdicts(fa4_arch.judge, o, H200)
    assert got == {"fa4-requires-blackwell": "contradicted", "fa4-head-dims": "confirmed",
                   "fa4-fp8-sm100-only": "confirmed"}


def test_fa4_on_blackwell_confirms_requires_blackwell() -> None:
    o = [obs(c, fa4_on("sm100", c)) for c in fa4_arch.cases()]
    got = verdicts(fa4_arch.judge, o, B200)
    assert got == {"fa4-requires-blackwell": "confirmed", "fa4-head-dims": "confirmed",
                   "fa4-fp8-sm100-only": "confirmed"}


def test_fa4_fp8_running_on_hopper_contradicts_sm100_only() -> None:
    o = [obs(c, "OK" if c["head_dim"] <= 256 else "UNSUPPORTED") for c in fa4_arch.cases()]
    assert verdicts(fa4_arch.judge, o, H200)["fa4-fp8-sm100-only"] == "contradicted"


# ---- source-build probes -----------------------------------------------------------------------------


def test_fa2_fa3_judge_only_what_ran() -> None:
    fa2 = [obs({"lib": "fa2", "head_dim": d, "dtype": t}, "OK" if d <= 256 and t != "fp8_e4m3" else "UNSUPPORTED")
           for d in fa2_fa3.HEAD_DIMS["fa2"] for t in fa2_fa3.DTYPES["fa2"]]
    got = verdicts(fa2_fa3.judge, fa2, H200)
    assert got == {"fa2-requires-sm80": "confirmed", "fa2-head-dim-max-256": "confirmed"}
    fa3 = [obs({"lib": "fa3", "head_dim": d, "dtype": t},
               "OK" if d <= 256 and t != "fp8_e5m2" else "UNSUPPORTED")
           for d in fa2_fa3.HEAD_DIMS["fa3"] for t in fa2_fa3.DTYPES["fa3"]]
    got = verdicts(fa2_fa3.judge, fa3, H200)
    assert got == {"fa3-requires-sm90": "confirmed", "fa3-head-dims": "confirmed",
                   "fa3-fp8-e4m3-forward-only": "confirmed"}
    assert verdicts(fa2_fa3.judge, [], H200) == {}


def test_flashmla_dense_decode_on_hopper() -> None:
    o = [obs({"path": "dense-decode", "kv_dtype": "bf16"}, "OK"),
         obs({"path": "dense-decode", "kv_dtype": "fp8_e4m3"}, "UNSUPPORTED")]
    got = verdicts(flashmla.judge, o, H200)
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

EVIDENCE = Path(__file__).resolve().parents[2] / "records" / "evidence"
H200_RUNS = ["2026-11-30-nvidia-h200-sxm-flashinfer-head-dim", "2026-11-30-nvidia-h200-sxm-flashinfer-head-dim-2"]


@pytest.mark.parametrize("run", H200_RUNS)
def test_flashinfer_judge_on_the_recorded_h200_runs(run: str) -> None:
    record = yaml.safe_load((EVIDENCE / f"{run}.yaml").read_text(encoding="utf-8"))
    got = {v["claim"]: v for v in flashinfer_head_dim.judge(record["cases"], record["environment"])}
    # The claims the v1 judge answered keep the verdicts it recorded.
    for old in record["verdicts"]:
        assert got[old["claim"]]["verdict"] == old["verdict"], old["claim"]
    # The first run labelled the arch-gate refusal ERROR, the second UNSUPPORTED; the message decides either way.
    new = got[FP8_GATE]
    assert new["verdict"] == "confirmed", new["detail"]
    assert new["detail"].startswith("12 of 12")
    assert new["scope"]["sm"] == "sm90" and new["scope"]["flashinfer"] == "0.6.18"
    assert new["scope"]["kv_dtypes"] == ["fp8_e4m3"] and new["scope"]["head_dims"] == [64, 128, 256, 512]
