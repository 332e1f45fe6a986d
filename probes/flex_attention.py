"""Probe: torch FlexAttention (torch.nn.attention.flex_attention, compiled to Triton) by dtype and head dim.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/flex_attention.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.flex_attention import SPEC, judge

__all__ = ['SPEC', 'cases', 'judge', 'run']


BATCH, HEADS, SEQ = 2, 8, 512


TOLERANCE = {"fp16": 1e-2, "bf16": 3e-2, "fp32": 5e-3}


ODD_HEAD_DIMS = [46, 44, 40, 72]


def cases() -> list[dict[str, Any]]:
    out = [{"dtype": t, "kv_dtype": t, "head_dim": d} for t in ("bf16", "fp16", "fp32") for d in (64, 128)]
    out.append({"dtype": "bf16", "kv_dtype": "fp8_e4m3", "head_dim": 128})
    out += [{"dtype": "bf16", "kv_dtype": "bf16", "head_dim": d} for d in ODD_HEAD_DIMS]
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    names = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8_e4m3": torch.float8_e4m3fn}
    torch.manual_seed(0)
    shape = (BATCH, HEADS, SEQ, case["head_dim"])
    q = torch.randn(shape, device="cuda", dtype=torch.float32).to(names[case["dtype"]])
    k = torch.randn(shape, device="cuda", dtype=torch.float32).to(names[case["kv_dtype"]])
    v = torch.randn(shape, device="cuda", dtype=torch.float32).to(names[case["kv_dtype"]])
    compiled = torch.compile(flex_attention)
    try:
        out = compiled(q, k, v)
    except Exception as exc:  # torch.compile wraps the eager check in its own error types
        text = f"{type(exc).__name__}: {exc}"
        if any(w in text.lower() for w in ("dtype", "same", "expected", "must")):
            return {"outcome": "UNSUPPORTED", "message": text[:1500]}
        raise
    torch.cuda.synchronize()
    ref = torch.softmax((q.float() @ k.float().transpose(-1, -2)) / case["head_dim"] ** 0.5, dim=-1) @ v.float()
    err = (out.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    return {"outcome": "OK", "max_abs_err": err,
            "metrics": {"rel_err": rel, "correct": bool(rel <= TOLERANCE.get(case["dtype"], 3e-2))}}
