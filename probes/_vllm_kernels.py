"""GPU helpers shared by the probes of vLLM's kernel forks (vllm_fa3, vllm_fa2, vllm_flashmla).

The kernels come from the vllm wheel without vLLM itself (../shared/gpu/fetch-wheels.sh --vllm-kernels): a bare
`vllm/` package holding vllm_flash_attn (FA-3 and FA-2 builds of vLLM's FlashAttention fork) and FlashMLA. Their
Python wrappers are called directly; helpers that import vllm.platforms are never called. Imported only inside
a probe's run(case), on the GPU host.
"""

from __future__ import annotations

import math
from typing import Any

import torch

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn,
          "fp8_e5m2": torch.float8_e5m2, "fp32": torch.float32}
FP8 = ("fp8_e4m3", "fp8_e5m2")
FP8_MAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}


def flash_attn() -> Any:
    from vllm.vllm_flash_attn import flash_attn_interface

    return flash_attn_interface


def quantize(x: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """x (float) in dtype `name`: (stored tensor, per-tensor scale or None, dequantized float32 copy)."""
    if name in FP8:
        scale = x.abs().amax().clamp(min=1e-6) / FP8_MAX[name]
        stored = (x / scale).to(DTYPES[name])
        return stored, scale.float().reshape(1), stored.float() * scale
    if name == "fp4":  # packed e2m1 pairs; only to see whether a kernel takes the dtype at all
        stored = torch.zeros(*x.shape[:-1], x.shape[-1] // 2, dtype=torch.uint8, device=x.device)
        return stored.view(torch.float4_e2m1fn_x2), None, torch.zeros_like(x)
    stored = x.to(DTYPES[name])
    return stored, None, stored.float()


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, window: tuple[int, int],
              softcap: float, sinks: torch.Tensor | None, scale: float,
              alibi: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 attention of one sequence: q (Lq, Hq, D), k (Lk, Hk, D), v (Lk, Hk, Dv); causal and window aligned to the
    bottom right as FlashAttention does; softcap as cap * tanh(s / cap); sinks: one extra logit per query head that
    takes softmax mass and contributes no value; alibi: slopes (Hq,) adding -slope * |i - j|."""
    lq, hq, _ = q.shape
    lk, hk, _ = k.shape
    g = hq // hk
    kk, vv = k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1)
    s = torch.einsum("qhd,khd->hqk", q.float(), kk) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(lq, device=q.device)[:, None] + (lk - lq)
    j = torch.arange(lk, device=q.device)[None, :]
    if alibi is not None:
        s = s - alibi.float()[:, None, None] * (i - j).abs()[None]
    keep = torch.ones(lq, lk, dtype=torch.bool, device=q.device)
    if causal:
        keep &= j <= i
    if window[0] >= 0:
        keep &= j >= i - window[0]
    if window[1] >= 0:
        keep &= j <= i + window[1]
    s = s.masked_fill(~keep, float("-inf"))
    if sinks is not None:
        sink = sinks.float()[:, None, None].expand(hq, lq, 1)
        p = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1]
    else:
        p = torch.softmax(s, dim=-1)
    return torch.einsum("hqk,khd->qhd", torch.nan_to_num(p), vv)


def compare(out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    diff = out.float() - ref
    return {"rel_l2": float(diff.norm() / ref.norm().clamp(min=1e-12)),
            "rel_max": float(diff.abs().max() / ref.abs().max().clamp(min=1e-12)),
            "finite": bool(torch.isfinite(out.float()).all())}


def paged(k: torch.Tensor, v: torch.Tensor, lens: list[int], block: int) -> tuple[torch.Tensor, torch.Tensor,
                                                                                    torch.Tensor]:
    """Scatter packed K/V (sum(lens), H, D) into shuffled pages (P, block, H, D) and a block table."""
    per = [math.ceil(n / block) for n in lens]
    total = sum(per)
    order = torch.randperm(total, device=k.device)
    kc = torch.zeros(total, block, *k.shape[1:], dtype=k.dtype, device=k.device)
    vc = torch.zeros(total, block, *v.shape[1:], dtype=v.dtype, device=v.device)
    table = torch.zeros(len(lens), max(per), dtype=torch.int32, device=k.device)
    start, page = 0, 0
    for b, n in enumerate(lens):
        for p in range(per[b]):
            dst = int(order[page])
            m = min(block, n - p * block)
            kc[dst, :m] = k[start + p * block:start + p * block + m]
            vc[dst, :m] = v[start + p * block:start + p * block + m]
            table[b, p] = dst
            page += 1
        start += n
    return kc, vc, table
