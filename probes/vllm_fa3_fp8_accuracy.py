"""Probe: FA-3 FP8 accuracy against context length, as vLLM ships FA-3 (vllm-flash-attn), on sm90.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_fa3_fp8_accuracy.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.vllm_fa3_fp8_accuracy import SPEC, judge, summarize
from probes import fp8_accumulation as acc

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


CONTEXTS = [4096, 8192, 16384, 32768, 65536, 131072]


HEAD_DIMS = [64, 128, 256]


GQA = [1, 8]


LONG = 262144


P_SCALE = 256.0  # FA-3 subtracts Max_offset 8 (log2 units) from the row max for fp8: P is scaled by 2^8


def cases() -> list[dict[str, Any]]:
    out = [{"path": "fp8", "ctx": n, "head_dim": d, "gqa": g} for d in HEAD_DIMS for g in GQA for n in CONTEXTS]
    out.append({"path": "fp8", "ctx": LONG, "head_dim": 128, "gqa": 1})
    out += [{"path": "bf16", "ctx": n, "head_dim": 128, "gqa": 1} for n in CONTEXTS]
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.vllm_flash_attn import flash_attn_interface as fa

    from probes import _fp8_gpu as gpu

    c = {**acc.sys_consts(), "head_dim": case["head_dim"]}
    n, g = int(case["ctx"]), int(case["gqa"])
    x = gpu.make_inputs(n, c)
    m = x["q8"].shape[0]
    fp8 = case["path"] == "fp8"
    q, k, v = (x[name + ("8" if fp8 else "_bf16")] for name in ("q", "k", "v"))
    qh = q[:, None, :].expand(m, g, q.shape[-1]).contiguous()  # g query heads, the same queries
    kv = {"k": k[:, None, :].contiguous(), "v": v[:, None, :].contiguous()}
    ds = {}
    if fp8:
        ds = {f"{name}_descale": torch.full((1, 1), x[name + "_scale"], device="cuda", dtype=torch.float32)
              for name in "qkv"}
    cu_q = torch.tensor([0, m], device="cuda", dtype=torch.int32)
    cu_k = torch.tensor([0, n], device="cuda", dtype=torch.int32)
    o = fa.flash_attn_varlen_func(qh, max_seqlen_q=m, cu_seqlens_q=cu_q, max_seqlen_k=n, cu_seqlens_k=cu_k,
                                  softmax_scale=x["sm_scale"], causal=False, fa_version=3, **kv, **ds)
    torch.cuda.synchronize()
    heads = o.to(torch.float64)  # (m, g, d)
    if fp8:
        ref, _ = gpu.attention64(x["q_dq"], x["k_dq"], x["v_dq"], x["sm_scale"])
        vals = x["v_dq"]
    else:
        vals = x["v_bf16"].to(torch.float64)
        ref, _ = gpu.attention64(x["q_bf16"].to(torch.float64), x["k_bf16"].to(torch.float64), vals, x["sm_scale"])
    per_head = [gpu.err(heads[:, h], ref) for h in range(g)]
    worst = max(per_head, key=lambda e: e["rel_err"])
    metrics: dict[str, Any] = {"total": worst, "heads_agree": bool((heads - heads[:, :1]).abs().max() == 0),
                               "retrieval": min(gpu.retrieval(heads[:, h], vals, x["pos"]) for h in range(g)),
                               "ref64_retrieval": gpu.retrieval(ref, vals, x["pos"]),
                               "out_dtype": str(o.dtype).removeprefix("torch.")}
    if fp8:
        metrics["quant_only_p256"] = gpu.err(gpu.quant_only(x, P_SCALE), ref)
    return {"outcome": "OK", "max_abs_err": worst["max_abs_err"], "metrics": metrics}
