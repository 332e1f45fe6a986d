"""Probe: FlashAttention-2 and FlashAttention-3 gates (architecture, head dims, dtypes), where installed.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/fa2_fa3.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.environment import installed_version
from kbtool.probe.judges.fa2_fa3 import SPEC, judge

__all__ = ['SPEC', 'cases', 'judge', 'run']


HEAD_DIMS = {"fa2": [64, 128, 256, 512], "fa3": [64, 128, 192, 256, 512]}


DTYPES = {"fa2": ["bf16", "fp16", "fp8_e4m3"], "fa3": ["bf16", "fp8_e4m3", "fp8_e5m2"]}


BATCH, SEQ, HEADS, KV_HEADS = 2, 512, 8, 2


def cases() -> list[dict[str, Any]]:
    have = {"fa2": installed_version("flash-attn"), "fa3": installed_version("flash-attn-3")}
    return [{"lib": lib, "head_dim": d, "dtype": t}
            for lib in ("fa2", "fa3") if have[lib] for d in HEAD_DIMS[lib] for t in DTYPES[lib]]


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    if case["lib"] == "fa2":
        from flash_attn import flash_attn_func
    else:
        from flash_attn_interface import flash_attn_func
    d = case["head_dim"]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_e4m3": torch.float8_e4m3fn,
             "fp8_e5m2": torch.float8_e5m2}[case["dtype"]]
    torch.manual_seed(0)
    q, k, v = (torch.randn(BATCH, SEQ, h, d, device="cuda", dtype=torch.bfloat16).to(dtype)
               for h in (HEADS, KV_HEADS, KV_HEADS))
    result = flash_attn_func(q, k, v, causal=True)
    out = result[0] if isinstance(result, tuple) else result
    group = HEADS // KV_HEADS
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float().repeat_interleave(group, 2)) / d**0.5
    s = s.masked_fill(torch.ones(SEQ, SEQ, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), v.float().repeat_interleave(group, 2))
    rel = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    tol = 6e-2 if "fp8" in case["dtype"] else 3e-2
    return {"outcome": "OK", "max_abs_err": rel, "metrics": {"rel_err": rel, "correct": rel <= tol}}
