"""Probe: FlashMLA decode gates (architecture, KV dtype), where FlashMLA is installed.

FlashMLA has no wheels (PyPI has no flash-mla distribution; it is built from source with nvcc >= 12.8, or
12.9 for sm100), so on the probe hosts the runner marks its claims untestable with that reason. Where it is
installed, the dense decode path (MQA, head dims 576/512, page size 64) runs with a bf16 and an fp8 KV cache
through get_mla_metadata + flash_mla_with_kvcache (the API of the releases that still have dense decode).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import gate_verdict
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="flashmla",
    version=1,
    title="FlashMLA decode gates",
    claims=[
        "flashmla-requires-sm100-cuda-13-1",
        "flashmla-kv-format-fp8-fp4-only",
        "flashmla-fp8-kv-bytes-per-token",
        "flashmla-dense-decode-requires-sm90a",
        "flashmla-dense-decode-kv-dtype",
        "flashmla-sparse-decode-arch",
        # no case of this probe judges these yet; listed so that a host without FlashMLA marks them untestable
        "flashmla-cuda-12-8", "flashmla-dense-decode-requires-nvidia", "flashmla-dense-decode-shape",
        "flashmla-fp4-kv-bytes-per-token", "flashmla-hopper-pinned-checkout", "flashmla-kv-format-not-portable",
        "flashmla-prefill-dense-sm100", "flashmla-prefill-requires-nvidia", "flashmla-sparse-decode-requires-nvidia",
        "flashmla-sparse-decode-shape",
        # vLLM's FLASHMLA fp8 KV against FlashMLA's own source: settling it needs FlashMLA's dense decode with fp8 KV
        "vllm-flashmla-dense-fp8-kv-vs-flashmla-source",
    ],
    requires={"archs": None, "packages": ["torch", "flashmla"]},
    timeout_s=300,
    untestable=("No wheel installs there: PyPI has no flash-mla distribution (checked 2026-11-30); FlashMLA is "
                "built from source (nvcc >= 12.8, >= 12.9 for sm100), which takes longer than a device lease "
                "(10 minutes a command, 30 a session). vLLM's copy (upstream 48c6dc4 plus an out= argument) "
                "runs in probes/vllm_flashmla.py and judges the claims whose code it shares."),
)

KV_DTYPES = ["bf16", "fp8_e4m3"]
BATCH, SEQ_K, H_Q, H_KV, D_QK, D_V, PAGE = 4, 1024, 64, 1, 576, 512, 64


def cases() -> list[dict[str, Any]]:
    return [{"path": "dense-decode", "kv_dtype": kv} for kv in KV_DTYPES]


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from flash_mla import flash_mla_with_kvcache, get_mla_metadata

    dtype = {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}[case["kv_dtype"]]
    torch.manual_seed(0)
    pages = SEQ_K // PAGE
    q = torch.randn(BATCH, 1, H_Q, D_QK, device="cuda", dtype=torch.bfloat16)
    cache = torch.randn(BATCH * pages, PAGE, H_KV, D_QK, device="cuda", dtype=torch.bfloat16).to(dtype)
    table = torch.arange(BATCH * pages, device="cuda", dtype=torch.int32).view(BATCH, pages)
    seqlens = torch.full((BATCH,), SEQ_K, device="cuda", dtype=torch.int32)
    meta, splits = get_mla_metadata(seqlens, H_Q // H_KV, H_KV)
    out, _ = flash_mla_with_kvcache(q, cache, table, seqlens, D_V, meta, splits, causal=True)
    k = cache.float().view(BATCH, SEQ_K, D_QK)
    s = torch.einsum("bhd,bkd->bhk", q[:, 0].float(), k) / D_QK**0.5
    ref = torch.einsum("bhk,bkd->bhd", torch.softmax(s, -1), k[..., :D_V])
    rel = ((out[:, 0].float() - ref).abs().max() / ref.abs().max()).item()
    return {"outcome": "OK", "max_abs_err": rel, "metrics": {"rel_err": rel, "correct": rel <= 3e-2}}


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    sm = env.get("architecture")
    scope = {"sm": sm, "flashmla": (env.get("libraries") or {}).get("flashmla"), "phase": "decode",
             "cuda": env.get("cuda"), "kv_dtypes": KV_DTYPES}

    def label(p: dict[str, Any]) -> str:
        return f"{p.get('path')} kv {p.get('kv_dtype')}"

    return [
        gate_verdict("flashmla-dense-decode-requires-sm90a", observations,
                     lambda p: sm == "sm90" if p.get("kv_dtype") == "bf16" else None, scope, label),
        gate_verdict("flashmla-dense-decode-kv-dtype", observations,
                     lambda p: p.get("kv_dtype") == "bf16" if sm == "sm90" else None, scope, label),
    ]
