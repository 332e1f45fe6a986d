"""Probe: does FlashAttention-4 (flash-attn-4, CuTe DSL) run forward on this GPU, by head dim and dtype?.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/fa4_arch.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.fa4_arch import SPEC, judge

__all__ = ['SPEC', 'cases', 'judge', 'run']


HEAD_DIMS = [64, 128, 192, 256, 512]


DTYPES = ["bf16", "fp8_e4m3"]


BATCH, SEQ, HEADS, KV_HEADS = 2, 512, 8, 2


TOLERANCE = {"bf16": 3e-2, "fp8_e4m3": 6e-2, "fp32": 1e-3}


WINDOW = 128


FEATURES = [{"head_dim": 128, "dtype": "bf16", "sinks": True, "sliding_window": 0},
            {"head_dim": 128, "dtype": "bf16", "sinks": False, "sliding_window": WINDOW}]


INPUT_DTYPES = [{"head_dim": 128, "dtype": "fp32"}, {"head_dim": 128, "dtype": "bf16", "kv_dtype": "nvfp4"}]


"""v3: inputs outside FA-4's dtype list (fa4-dtypes): fp32 q/k/v, and a bf16 query with K/V stored as uint8 the way
an NVFP4 cache is (full head dim, so the dtype assertion, not a shape check, answers)."""


"""How FA-4 treats the query of an fp8 KV cache can only be seen where its FP8 path runs (fa4-fp8-sm100-only)."""


def cases() -> list[dict[str, Any]]:
    return ([{"head_dim": d, "dtype": t} for t in DTYPES for d in HEAD_DIMS] + [dict(f) for f in FEATURES]
            + [dict(c) for c in INPUT_DTYPES])


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from flash_attn.cute import flash_attn_func

    d = case["head_dim"]
    names = {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn, "fp32": torch.float32, "nvfp4": torch.uint8}
    dtype, kv = names[case["dtype"]], names[case.get("kv_dtype", case["dtype"])]
    torch.manual_seed(0)
    q = torch.randn(BATCH, SEQ, HEADS, d, device="cuda", dtype=torch.bfloat16).to(dtype)
    if kv == torch.uint8:  # bytes as an NVFP4 cache stores them (values are not decoded: the dtype gate answers)
        k = torch.randint(0, 256, (BATCH, SEQ, KV_HEADS, d), device="cuda", dtype=torch.uint8)
        v = torch.randint(0, 256, (BATCH, SEQ, KV_HEADS, d), device="cuda", dtype=torch.uint8)
    else:
        k = torch.randn(BATCH, SEQ, KV_HEADS, d, device="cuda", dtype=torch.bfloat16).to(kv)
        v = torch.randn(BATCH, SEQ, KV_HEADS, d, device="cuda", dtype=torch.bfloat16).to(kv)
    window = int(case.get("sliding_window") or 0)
    sink = torch.randn(HEADS, device="cuda", dtype=torch.float32) if case.get("sinks") else None
    kwargs: dict[str, Any] = {"causal": bool(window)}
    if window:
        kwargs["window_size"] = (window - 1, 0)
    if sink is not None:
        kwargs["learnable_sink"] = sink
    result = flash_attn_func(q, k, v, **kwargs)
    out = result[0] if isinstance(result, tuple) else result
    torch.cuda.synchronize()
    group = HEADS // KV_HEADS
    kf = k.float().repeat_interleave(group, dim=2)
    vf = v.float().repeat_interleave(group, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), kf) / d**0.5
    if window:
        i = torch.arange(SEQ, device="cuda")[:, None]
        j = torch.arange(SEQ, device="cuda")[None, :]
        s = s.masked_fill(~((j <= i) & (j > i - window)), float("-inf"))
    if sink is not None:
        s = torch.cat([s, sink.view(1, HEADS, 1, 1).expand(BATCH, HEADS, SEQ, 1)], dim=-1)
        p = torch.softmax(s, dim=-1)[..., :-1]
    else:
        p = torch.softmax(s, dim=-1)
    ref = torch.einsum("bhqk,bkhd->bqhd", p, vf)
    err = (out.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    finite = bool(torch.isfinite(out.float()).all().item())
    return {"outcome": "OK", "max_abs_err": err,
            "metrics": {"rel_err": rel, "correct": bool(finite and rel <= TOLERANCE[case["dtype"]]),
                        "out_dtype": str(out.dtype).replace("torch.", "")}}


BLACKWELL = ("sm100", "sm103")


SKIPS_HEAD_DIM_CHECK = ("sm80", "sm86", "sm89", "sm120", "sm121")


def head_dims_allowed(sm: str | None, d: int) -> bool | None:
    """fa4-head-dims for equal q/k and v head dims, per architecture (None: the claim does not say)."""
    if sm in SKIPS_HEAD_DIM_CHECK:
        return True
    if sm == "sm90":
        return 8 <= d <= 256 and d % 8 == 0
    if sm in BLACKWELL:
        return (8 <= d <= 128 and d % 8 == 0) or d in (256, 512)
    return None
