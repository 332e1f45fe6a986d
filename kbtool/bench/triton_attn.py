# mypy: ignore-errors
"""kb's fused-attention forward kernel in Triton, written after the idea of the Triton fused-attention
tutorial (one program per block of queries and (batch, head); K/V streamed in blocks; online softmax with
a running max and sum in fp32; exp2 with log2(e) folded into the scale).

Differences from the tutorial, for the benchmark's needs: grouped-query heads (KV head = head // group),
query and key lengths may differ (decode: one query), causal masking aligned to the bottom right (query i
sees keys j <= i + Nk - Nq), and masked loads so lengths need not be multiples of the block sizes.

Imported only in a benchmark worker, on a machine with triton and a GPU.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _kb_attn_fwd(Q, K, V, Out, sm_scale,
                 sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
                 H, GROUP, NQ, NK,
                 CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd
    q = tl.load(q_ptrs, mask=offs_m[:, None] < NQ, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    shift = NK - NQ
    hi = NK
    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M + shift, NK)
    k_base = K + b * skb + hk * skh
    v_base = V + b * svb + hk * svh
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kt = tl.load(k_base + cols[None, :] * skn + offs_d[:, None] * skd, mask=cols[None, :] < NK, other=0.0)
        qk = tl.dot(q, kt) * qk_scale
        valid = cols[None, :] < NK
        if CAUSAL:
            valid = valid & (cols[None, :] <= offs_m[:, None] + shift)
        qk = tl.where(valid, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(qk - m_use[:, None])
        alpha = tl.math.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        vb = tl.load(v_base + cols[:, None] * svn + offs_d[None, :] * svd, mask=cols[:, None] < NK, other=0.0)
        acc = tl.dot(p.to(vb.dtype), vb, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    o_ptrs = Out + b * sob + h * soh + offs_m[:, None] * som + offs_d[None, :] * sod
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < NQ)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """q [B, H, Nq, D], k/v [B, H_kv, Nk, D] -> [B, H, Nq, D]."""
    b, h, nq, d = q.shape
    hk, nk = k.shape[1], k.shape[2]
    if d not in (16, 32, 64, 128, 256):
        raise ValueError(f"kb's Triton kernel supports head_dim 16, 32, 64, 128, 256; got {d}")
    if h % hk:
        raise ValueError(f"query heads {h} not a multiple of KV heads {hk}")
    o = torch.empty_like(q)
    if nq <= 16:
        block_m, block_n, warps, stages = 16, 64, 4, 3
    else:
        block_m, block_n, warps, stages = 128, (64 if d <= 128 else 32), 8, 3
    grid = (triton.cdiv(nq, block_m), b * h)
    _kb_attn_fwd[grid](q, k, v, o, 1.0 / math.sqrt(d),
                       *q.stride(), *k.stride(), *v.stride(), *o.stride(),
                       h, h // hk, nq, nk,
                       CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n, HEAD_DIM=d,
                       num_warps=warps, num_stages=stages)
    return o
