"""Probe: FlashMLA as vLLM ships it (vllm/_flashmla_C and _flashmla_extension_C in the vllm wheel), on sm90.

Paths, each called once through the wheel's own wrappers (vllm/third_party/flashmla/flash_mla_interface.py; the
dense fp8 path through the two ops vLLM's vllm/v1/attention/ops/flashmla.py calls) and compared with an fp32
reference on the very (dequantized) cache the kernel read:
  dense        flash_mla_with_kvcache: bf16 (or fp16) q and cache, MQA (one latent head), d_qk 576 / d_v 512;
               page sizes 32/64/128; q heads 16/64/128; 1 or 2 query tokens; an fp8 cache through this path too
  dense-fp8    _flashmla_extension_C.fwd_kvcache_mla_fp8 with get_mla_decoding_metadata_dense_fp8: fp8 e4m3 q and
               cache with per-tensor descales (what vLLM's FLASHMLA runs for kv_cache_dtype fp8); a bf16 q too
  sparse       flash_mla_with_kvcache with indices: the fp8_ds_mla cache, 656 bytes per token (512 e4m3 + 4 fp32
               scales, one per 128 values, + 64 bf16 RoPE values), top-k indices; with and without attn_sink
  prefill      flash_mla_sparse_fwd: bf16 q and kv, top-k indices, d_qk 576 and 512
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import Gate, default_reason, judge_gates, outcome_rows, values
from kbtool.probe.spec import ProbeSpec
from kbtool.probe.verdicts import untestable_here

LIB = "vllm-flashmla"


SPEC = ProbeSpec(
    id="vllm-flashmla",
    version=1,
    order=41,
    title="FlashMLA (vLLM's build) decode and sparse paths",
    claims=[
        "flashmla-dense-decode-requires-sm90a", "flashmla-dense-decode-kv-dtype", "flashmla-dense-decode-shape",
        "flashmla-sparse-decode-arch", "flashmla-sparse-decode-shape", "flashmla-fp8-kv-bytes-per-token",
        "vllm-flashmla-dense-fp8-extension",
        "flashmla-dense-decode-d-qk-576-only-sm90",
    ],
    requires={"archs": ["sm90"], "packages": ["torch", LIB]},
    timeout_s=240,
    untestable=("FlashMLA here is vLLM's build inside the vllm wheel (vllm/_flashmla_C.abi3.so, "
                "_flashmla_extension_C.abi3.so), unpacked without vLLM by ../shared/gpu/fetch-wheels.sh "
                "--vllm-kernels 0.24.0; it loads only against the torch build that release pins (2.11, CUDA 13)."),
)


D_QK, D_V, ROPE = 576, 512, 64


DS_MLA_BYTES = 656


def _label(p: dict[str, Any]) -> str:
    extra = " sink" if p.get("sink") else ""
    return (f"{p.get('path')} q {p.get('dtype')} kv {p.get('kv_dtype')} h{p.get('heads')} page {p.get('page')} "
            f"s_q {p.get('s_q')} d {p.get('d_qk')} topk {p.get('topk')}{extra}")


def gates(sm: str | None) -> list[Gate]:
    hopper = sm == "sm90"

    def dense_arch(p: dict[str, Any]) -> bool | None:
        plain = p["path"] == "dense" and p["kv_dtype"] == "bf16" and p["page"] == 64 and p["d_qk"] == D_QK
        return hopper if plain and p["heads"] == 64 and p["s_q"] == 1 else None

    def dense_kv(p: dict[str, Any]) -> bool | None:  # FlashMLA's own dense decode (not vLLM's fp8 extension)
        if p["path"] != "dense" or p["page"] != 64 or p["d_qk"] != D_QK or p["heads"] != 64:
            return None
        return p["kv_dtype"] in ("bf16", "fp16") and p["dtype"] == p["kv_dtype"]

    def fp8_extension(p: dict[str, Any]) -> bool | None:
        if p["path"] != "dense-fp8" or p["kv_dtype"] != "fp8_e4m3":
            return None
        return hopper and p["dtype"] == "fp8_e4m3" and p["page"] == 64

    def d_qk_576(p: dict[str, Any]) -> bool | None:
        if p["path"] != "dense" or p["kv_dtype"] != "bf16" or p["page"] != 64:
            return None
        return bool(p["d_qk"] == D_QK)

    def dense_shape(p: dict[str, Any]) -> bool | None:
        if p["path"] != "dense" or p["kv_dtype"] != "bf16" or p["d_qk"] != D_QK:
            return None  # d_qk 512: flashmla-dense-decode-d-qk-576-only-sm90 (the API takes it, the sm90 kernel aborts)
        return bool(p["page"] == 64)

    def sparse_arch(p: dict[str, Any]) -> bool | None:
        if p["path"] != "sparse" or p["kv_dtype"] != "fp8_ds_mla" or p["topk"] % 64:
            return None
        return hopper

    def sparse_shape(p: dict[str, Any]) -> bool | None:
        if p["path"] != "sparse" or p["topk"] % 64:  # top-k must also be a multiple of the kernel's block: no claim
            return None
        return bool(p["kv_dtype"] == "fp8_ds_mla")

    return [Gate("flashmla-dense-decode-requires-sm90a", dense_arch, "ARCH"),
            Gate("flashmla-dense-decode-kv-dtype", dense_kv, "KV_DTYPE"),
            Gate("flashmla-dense-decode-shape", dense_shape, "HEAD_DIM"),
            Gate("flashmla-sparse-decode-arch", sparse_arch, "ARCH"),
            Gate("flashmla-sparse-decode-shape", sparse_shape, None),
            Gate("vllm-flashmla-dense-fp8-extension", fp8_extension, None),
            Gate("flashmla-dense-decode-d-qk-576-only-sm90", d_qk_576, "HEAD_DIM")]


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    sm = env.get("architecture")
    version = (env.get("libraries") or {}).get(LIB)
    gs = gates(sm)

    def scope_of(gate: Gate) -> dict[str, Any]:
        picked = lambda p: gate.expect(p) is not None  # noqa: E731
        return {"sm": sm, LIB: version, "phase": "decode", "paths": values(observations, "path", picked),
                "kv_dtypes": values(observations, "kv_dtype", picked)}

    out = judge_gates(gs, observations, scope_of, _label, reason_of=default_reason)
    ds = [o for o in observations if (o.get("params") or {}).get("kv_dtype") == "fp8_ds_mla"
          and o.get("outcome") == "OK" and (o.get("metrics") or {}).get("correct")]
    sizes = sorted({b for o in ds if (b := (o.get("metrics") or {}).get("bytes_per_token")) is not None})
    out.append({"claim": "flashmla-fp8-kv-bytes-per-token", "scope": {"sm": sm, LIB: version, "phase": "decode"},
                "verdict": "confirmed" if sizes == [DS_MLA_BYTES] else "inconclusive",
                "detail": f"sparse decode read an fp8_ds_mla cache of {sizes or 'no'} bytes per token and matched the "
                          f"reference in {len(ds)} cases"})
    if sm != "sm90":
        untestable_here(out, SPEC.claims, f"vLLM's FlashMLA build is compiled for sm90a here; {sm} runs none of it")
    return out


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    return {"outcomes": outcome_rows(observations, _label)}
