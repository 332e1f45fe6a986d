"""Probe: FA-3 (vLLM's fork) on the call vLLM's FLASH_ATTN_MLA backend makes for MLA decode.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_fa3_mla.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.vllm_fa3_mla import BLOCK, LATENT, ROPE, SPEC, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


LENS_K = [1000, 77, 4096]


def cases() -> list[dict[str, Any]]:
    out = [{"name": f"mla call h{h} q{q}", "heads": h, "q_len": q, "q_v": True} for h in (16, 128) for q in (1, 2)]
    out += [{"name": "absorbed 576 h16 q1", "heads": 16, "q_len": 1, "q_v": False}]
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    from probes import _vllm_kernels as kx

    fa = kx.flash_attn()
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    h, lq = int(case["heads"]), int(case["q_len"])
    b = len(LENS_K)
    q_pe = torch.randn(b * lq, h, ROPE, device=dev).to(bf)
    q_nope = torch.randn(b * lq, h, LATENT, device=dev).to(bf)
    k_pe = torch.randn(sum(LENS_K), 1, ROPE, device=dev).to(bf)
    kv_c = torch.randn(sum(LENS_K), 1, LATENT, device=dev).to(bf)
    scale = (ROPE + LATENT) ** -0.5
    cu_q = torch.arange(0, b * lq + 1, lq, device=dev, dtype=torch.int32)
    seqused = torch.tensor(LENS_K, device=dev, dtype=torch.int32)
    if case["q_v"]:
        kc, vc, table = kx.paged(k_pe, kv_c, LENS_K, BLOCK)
        res = fa.flash_attn_varlen_func(q=q_pe, k=kc, v=vc, q_v=q_nope, max_seqlen_q=lq, cu_seqlens_q=cu_q,
                                        max_seqlen_k=max(LENS_K), seqused_k=seqused, block_table=table,
                                        softmax_scale=scale, causal=True, fa_version=3)
    else:
        k_all = torch.cat([kv_c, k_pe], dim=-1)
        kc, vc, table = kx.paged(k_all, kv_c, LENS_K, BLOCK)
        res = fa.flash_attn_varlen_func(torch.cat([q_nope, q_pe], dim=-1), kc, vc, max_seqlen_q=lq, cu_seqlens_q=cu_q,
                                        max_seqlen_k=max(LENS_K), seqused_k=seqused, block_table=table,
                                        softmax_scale=scale, causal=True, fa_version=3)
    out = res[0] if isinstance(res, tuple) else res
    torch.cuda.synchronize()
    refs, ko = [], 0
    for i, n in enumerate(LENS_K):
        qs = slice(i * lq, (i + 1) * lq)
        s = (torch.einsum("qhd,kd->hqk", q_pe[qs].float(), k_pe[ko:ko + n, 0].float())
             + torch.einsum("qhd,kd->hqk", q_nope[qs].float(), kv_c[ko:ko + n, 0].float())) * scale
        row = torch.arange(lq, device=dev)[:, None] + (n - lq)
        s = s.masked_fill(torch.arange(n, device=dev)[None, :] > row, float("-inf"))
        refs.append(torch.einsum("hqk,kd->qhd", torch.softmax(s, -1), kv_c[ko:ko + n, 0].float()))
        ko += n
    m = kx.compare(out, torch.cat(refs))
    return {"outcome": "OK", "metrics": {**m, "tolerance": 2e-2, "correct": m["finite"] and m["rel_l2"] <= 2e-2,
                                         "out_dtype": str(out.dtype).removeprefix("torch.")}}
