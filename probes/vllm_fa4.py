"""Probe: the FlashAttention-4 that vLLM bundles (vllm/vllm_flash_attn/cute, CuTe DSL), by head dim and dtype.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_fa4.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.vllm_fa4 import SPEC, judge

__all__ = ['SPEC', 'cases', 'judge', 'run']


HEAD_DIMS = [128, 256, 320, 384, 448, 512]


LENS = [300, 211]


HEADS, KV_HEADS = 8, 2


TOLERANCE = {"bf16": 2e-2, "fp8": 6e-2}


def cases() -> list[dict[str, Any]]:
    out = [{"head_dim": d, "dtype": "bf16", "kv_dtype": "bf16"} for d in HEAD_DIMS]
    out += [{"head_dim": d, "dtype": "fp8_e4m3", "kv_dtype": "fp8_e4m3"} for d in (256, 512)]
    out += [{"head_dim": d, "dtype": "bf16", "kv_dtype": "fp8_e4m3", "dequant": True} for d in (256, 512)]
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.vllm_flash_attn.cute import interface as fa4

    d = int(case["head_dim"])
    torch.manual_seed(0)
    dev = "cuda"
    total = sum(LENS)
    q = torch.randn(total, HEADS, d, device=dev)
    k = torch.randn(total, KV_HEADS, d, device=dev)
    v = torch.randn(total, KV_HEADS, d, device=dev)
    cu = torch.tensor([0, LENS[0], total], device=dev, dtype=torch.int32)
    scale = d ** -0.5
    fp8 = torch.float8_e4m3fn
    if case["dtype"] == "fp8_e4m3":
        qs, ks, vs = (x.abs().amax() / 448.0 for x in (q, k, v))
        q8, k8, v8 = (x / s for x, s in ((q, qs), (k, ks), (v, vs)))
        q8, k8, v8 = q8.to(fp8), k8.to(fp8), v8.to(fp8)
        qf, kf, vf = q8.float() * qs, k8.float() * ks, v8.float() * vs
        desc = {f"{n}_descale": s.reshape(1, 1).expand(len(LENS), KV_HEADS).contiguous().float()
                for n, s in (("q", qs), ("k", ks), ("v", vs))}
        res = fa4._flash_attn_fwd(q8, k8, v8, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(LENS),
                                  max_seqlen_k=max(LENS), softmax_scale=scale, causal=True, **desc)
    elif case.get("dequant"):
        ks, vs = k.abs().amax() / 448.0, v.abs().amax() / 448.0
        k8, v8 = (k / ks).to(fp8), (v / vs).to(fp8)
        qb = q.to(torch.bfloat16)
        qf, kf, vf = qb.float(), k8.float() * ks, v8.float() * vs
        tile_n = fa4._tile_size_fwd_sm90(d, d, True, False).n_block_size
        pages = [-(-n // tile_n) for n in LENS]
        kc = torch.zeros(sum(pages), tile_n, KV_HEADS, d, device=dev, dtype=fp8)
        vc = torch.zeros_like(kc)
        table = torch.zeros(len(LENS), max(pages), device=dev, dtype=torch.int32)
        page, off = 0, 0
        for b, n in enumerate(LENS):
            for p in range(pages[b]):
                lo, hi = off + p * tile_n, min(off + n, off + (p + 1) * tile_n)
                kc[page, : hi - lo] = k8[lo:hi]
                vc[page, : hi - lo] = v8[lo:hi]
                table[b, p] = page
                page += 1
            off += n
        one = torch.ones(len(LENS), KV_HEADS, device=dev)
        res = fa4._flash_attn_fwd(qb, kc, vc, cu_seqlens_q=cu, max_seqlen_q=max(LENS),
                                  seqused_k=torch.tensor(LENS, device=dev, dtype=torch.int32), page_table=table,
                                  softmax_scale=scale, causal=True, k_descale=one * ks, v_descale=one * vs,
                                  fp8_kv_dequant=True)
    else:
        qb, kb_, vb = q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16)
        qf, kf, vf = qb.float(), kb_.float(), vb.float()
        res = fa4.flash_attn_varlen_func(qb, kb_, vb, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(LENS),
                                         max_seqlen_k=max(LENS), softmax_scale=scale, causal=True)
    out = res[0] if isinstance(res, tuple) else res
    torch.cuda.synchronize()
    refs, off = [], 0
    g = HEADS // KV_HEADS
    for n in LENS:
        qq, kk, vv = qf[off:off + n], kf[off:off + n].repeat_interleave(g, 1), vf[off:off + n].repeat_interleave(g, 1)
        s = torch.einsum("qhd,khd->hqk", qq, kk) * scale
        s = s.masked_fill(torch.ones(n, n, device=dev, dtype=torch.bool).triu(1), float("-inf"))
        refs.append(torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vv))
        off += n
    ref = torch.cat(refs)
    o = out.float()
    finite = bool(torch.isfinite(o).all().item())
    rel = float((o - ref).norm() / ref.norm().clamp(min=1e-12))
    tol = TOLERANCE["fp8" if "fp8" in case["kv_dtype"] else "bf16"]
    return {"outcome": "OK", "max_abs_err": float((o - ref).abs().max()),
            "metrics": {"rel_l2": rel, "tolerance": tol, "correct": finite and rel <= tol,
                        "out_dtype": str(out.dtype).removeprefix("torch.")}}
