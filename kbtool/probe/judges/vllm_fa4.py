"""Probe: the FlashAttention-4 that vLLM bundles (vllm/vllm_flash_attn/cute, CuTe DSL), by head dim and dtype.

vLLM routes an SM90 head size above 256 from FA-3 to this FA-4 (vllm/v1/attention/backends/fa_utils.py,
get_flash_attn_version: "FA3 does not support head_size=... on SM90: upgrading FlashAttention 3 -> 4"). Its
interface is not pip's flash-attn-4: in vLLM 0.33.0 `_validate_head_dims` accepts 8..512 on compute capability 9
(only its assertion message still says 256), FP8 q/k/v is asserted SM100-only, and an SM90-only in-kernel dequant
takes a bf16 query with an fp8 e4m3 paged KV cache (`fp8_kv_dequant`, page size equal to the kernel's tile_n).

Cases (GQA 8:2, causal, two sequences of 300 and 211 tokens): bf16 at head dims 128..512 through the public
`flash_attn_varlen_func`; fp8 e4m3 q/k/v at 256 and 512; and a bf16 query on an fp8 e4m3 paged cache through
`_flash_attn_fwd(fp8_kv_dequant=True)` at 256 and 512. Outputs are compared with an fp32 reference on the same
(dequantized) inputs. The release is the vLLM wheel the cute tree came from (vllm/KB_RELEASE_FA4, written when it
was packed); the CuTe DSL that compiles it is the host's (its version is in the evidence's libraries).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec
from kbtool.probe.verdicts import untestable_here

LIB = "vllm-flash-attn-4"


SPEC = ProbeSpec(
    id="vllm-fa4",
    version=2,
    rejudges=(1,),  # v2 reads v1's cases: only the judging of compile-time tiling failures changed
    order=44,
    title="FA-4 as vLLM bundles it (vllm_flash_attn/cute): SM90 head dims and fp8",
    claims=["vllm-fa4-sm90-head-dims", "vllm-fa4-fp8-qkv-sm100-only", "vllm-fa4-sm90-fp8-kv-dequant"],
    requires={"archs": None, "packages": ["torch", LIB]},
    timeout_s=300,
    workers=2,
    untestable=("vLLM's FA-4 is the CuTe DSL tree inside the vllm wheel (vllm/vllm_flash_attn/cute), carried without "
                "vLLM with the CuTe DSL, quack and tvm-ffi."),
)


SM90_ONLY = ("vllm-fa4-sm90-fp8-kv-dequant",)


def _label(p: dict[str, Any]) -> str:
    kv = f" kv {p['kv_dtype']} (in-kernel dequant)" if p.get("dequant") else ""
    return f"hd{p.get('head_dim')} {p.get('dtype')}{kv}"


UNTILED = "failed to partition"
"""The CuTe DSL's words where the SM90 tile configuration cannot tile a head dim (interface.py _tile_size_fwd_sm90
has configurations up to 256 and one for 512; a head dim between takes the 512 one, whose MMA cannot partition it):
the kernel is refused for that shape at compile time, before any launch, on every run (judged as a refusal)."""


def as_refusal(obs: dict[str, Any]) -> dict[str, Any]:
    """A compile-time tiling failure is the build refusing the shape: UNSUPPORTED for the gates (the recorded
    outcome stays ERROR in the evidence)."""
    text = str(obs.get("message") or "")
    if obs.get("outcome") == "ERROR" and UNTILED in text and "tiled_mma" in text:
        return {**obs, "outcome": "UNSUPPORTED"}
    return obs


def reason_of(obs: dict[str, Any]) -> str | None:
    text = str(obs.get("message") or "").lower()
    if UNTILED in text and "tiled_mma" in text:
        return "HEAD_DIM"
    if "fp8 is only supported on sm100" in text or "fp8_kv_dequant is an sm90-only" in text:
        return "DTYPE"
    if "is not supported on sm90" in text or "is not supported on sm100" in text:
        return "HEAD_DIM"
    return default_reason(obs)


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Predictions from the claims' own conditions; the build's assertions name the gate they state."""
    claims = env.get("claims") or {}
    version = (env.get("libraries") or {}).get(LIB)

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        kv = p.get("kv_dtype", p.get("dtype"))
        out = {"dtype": p.get("dtype"), "kv_dtype": kv, "kv_dtype_differs": kv != p.get("dtype"),
               "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim"), "phase": "prefill"}
        out.update(env_vars(env))
        return out

    gates = claim_gates(claims, SPEC.claims, lambda p: ["flash-attention-4"], bind)
    scope = {"sm": env.get("architecture"), LIB: version, "phase": "prefill",
             "dtypes": values(observations, "dtype", lambda p: True),
             "head_dims": values(observations, "head_dim", lambda p: True)}
    out = judge_gates(gates, [as_refusal(o) for o in observations], lambda g: scope, _label, reason_of=reason_of)
    if env.get("architecture") != "sm90":
        untestable_here(out, SM90_ONLY, f"the in-kernel fp8 KV dequant is SM90's alone; a run on "
                        f"{env.get('architecture')} cannot show it")
    return out
