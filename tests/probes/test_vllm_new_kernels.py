"""Judges of the issue-45 probes on made-up observations (no GPU): vllm-fa4, vllm-fa3-mla, vllm-fa3-fp8-one-level."""

from __future__ import annotations

from typing import Any

from probes import vllm_fa3_fp8_one_level, vllm_fa3_mla, vllm_fa4
from tests.probe.test_judges import H200, obs, verdicts

SM90 = {**H200, "libraries": {"vllm-flash-attn-4": "0.33.0", "vllm-flash-attn-3": "0.24.0",
                              "vllm-flash-attn-3-one-level": "0.24.0"}}


def _fa4(case: dict[str, Any]) -> dict[str, Any]:
    """As the 0.33.0 build behaved on an H100: fp8 q/k/v asserted SM100-only; a head dim between 256 and 512 fails to
    compile (the SM90 tile table's 512 entry cannot tile it), reported as an ERROR by the worker."""
    if case["dtype"] == "fp8_e4m3":
        return obs(case, "UNSUPPORTED",
                   message="FP8 is only supported on SM100 (compute capability 10.x) for FA4 CuTe.")
    if 256 < case["head_dim"] < 512:
        d = case["head_dim"]
        return obs(case, "ERROR", message="MLIRError: Operation creation failed:\nerror: unknown: failed to "
                   f"partition `input` '!cute.shape<\"(64,{d})\">' with `tiled_mma`")
    return obs(case, "OK")


def test_vllm_fa4_as_its_source_says_on_sm90() -> None:
    got = verdicts(vllm_fa4, [_fa4(c) for c in vllm_fa4.cases()], SM90)
    assert got == {"vllm-fa4-sm90-head-dims": "confirmed", "vllm-fa4-fp8-qkv-sm100-only": "confirmed",
                   "vllm-fa4-sm90-fp8-kv-dequant": "confirmed"}


def test_vllm_fa4_untiled_head_dims_count_as_refusals() -> None:
    """Without the compile-time refusal reading, 320/384/448 would be errors and the head-dim claim inconclusive."""
    passing = [obs(c, "OK") if c["dtype"] == "bf16" else _fa4(c) for c in vllm_fa4.cases()]
    assert verdicts(vllm_fa4, passing, SM90)["vllm-fa4-sm90-head-dims"] == "contradicted"  # 384 ran: claim wrong


def test_vllm_fa4_refusing_hd512_bf16_contradicts_the_sm90_range() -> None:
    def o(c: dict[str, Any]) -> dict[str, Any]:
        if c["head_dim"] > 256 and c["dtype"] == "bf16" and not c.get("dequant"):
            return obs(c, "UNSUPPORTED", message=f"(head_dim, head_dim_v)=({c['head_dim']}, {c['head_dim']}) is "
                       "not supported on SM90.")
        return _fa4(c)
    assert verdicts(vllm_fa4, [o(c) for c in vllm_fa4.cases()], SM90)["vllm-fa4-sm90-head-dims"] == "contradicted"


def test_vllm_fa3_mla_call_shape_runs_and_the_concatenated_query_is_refused() -> None:
    def o(c: dict[str, Any]) -> dict[str, Any]:
        return obs(c, "OK") if c["q_v"] else obs(c, "UNSUPPORTED", message="FlashAttention forward only supports "
                                                 "head dimension at most 256")
    assert verdicts(vllm_fa3_mla, [o(c) for c in vllm_fa3_mla.cases()], SM90) == {"fa3-head-dims": "confirmed"}


def _curve(growth: float) -> list[dict[str, Any]]:
    out = []
    for c in vllm_fa3_fp8_one_level.cases():
        e = 2e-3 * (growth ** (c["ctx"].bit_length() - 13))
        out.append(obs(c, "OK", total={"rel_err": e, "bias": 0.0}, quant_only_p256={"rel_err": 2e-3}, retrieval=1.0,
                       ref64_retrieval=1.0))
    return out


def test_one_level_fa3_judged_by_the_growth_of_its_error() -> None:
    assert verdicts(vllm_fa3_fp8_one_level, _curve(1.6), SM90) == {
        "fa3-fp8-one-level-accumulation-loses-accuracy": "confirmed"}
    assert verdicts(vllm_fa3_fp8_one_level, _curve(1.0), SM90) == {
        "fa3-fp8-one-level-accumulation-loses-accuracy": "contradicted"}
