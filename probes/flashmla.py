"""Probe: FlashMLA decode gates (architecture, KV dtype), where FlashMLA is installed: the program (cases and run).

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/flashmla.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.flashmla import KV_DTYPES, SPEC, judge

__all__ = ['SPEC', 'cases', 'judge', 'run']


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
