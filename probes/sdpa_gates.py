"""Probe: PyTorch SDPA backend gates (flash, efficient, cudnn, math) by head dim, dtype and causality.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/sdpa_gates.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.sdpa_gates import SPEC, dispatched, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


BACKENDS = ["flash", "efficient", "cudnn", "math"]


"""SDPA's four backends by this probe's names (sdpa-mixed and sdpa-features use the same)."""


def sdpa_backend(name: str) -> Any:
    """torch's SDPBackend for one of BACKENDS (imported here, on the GPU host, not at module import)."""
    from torch.nn.attention import SDPBackend

    return {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[name]


HEAD_DIMS = [64, 96, 128, 192, 256, 512]


DTYPES = ["bf16", "fp16", "fp32"]


TOLERANCE = {"bf16": 3e-2, "fp16": 5e-3, "fp32": 2e-3}  # max |out - ref| / max |ref|


BATCH, HEADS, SEQ = 2, 8, 256


def cases() -> list[dict[str, Any]]:
    return [
        {"backend": b, "head_dim": d, "dtype": t, "causal": c}
        for b in BACKENDS
        for d in HEAD_DIMS
        for t in DTYPES
        for c in (False, True)
    ]


def run(case: dict[str, Any]) -> dict[str, Any]:
    import warnings

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    backend = sdpa_backend(case["backend"])
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[case["dtype"]]
    torch.manual_seed(0)
    shape = (BATCH, HEADS, SEQ, case["head_dim"])
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with sdpa_kernel([backend]):
            try:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"])
            except RuntimeError as exc:
                noise = ("kernel not used because", "has been runtime disabled")  # other backends being off
                reasons = [str(w.message) for w in caught if not any(n in str(w.message) for n in noise)]
                if "No available kernel" not in str(exc):
                    raise
                return {"outcome": "UNSUPPORTED", "message": " | ".join([*reasons, str(exc)])}
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"])
                torch.cuda.synchronize()
    kernels = sorted({e.name for e in prof.events() if "cuda" in str(getattr(e, "device_type", "")).lower()})
    s = (q.float() @ k.float().transpose(-1, -2)) / case["head_dim"] ** 0.5
    if case["causal"]:
        s = s.masked_fill(torch.ones(SEQ, SEQ, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.softmax(s, dim=-1) @ v.float()
    err = (out.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    kind = dispatched(kernels)
    return {
        "outcome": "OK",
        "kernels": [k if len(k) <= 160 else k[:157] + "..." for k in kernels[:12]],
        "max_abs_err": err,
        "metrics": {
            "rel_err": rel,
            "correct": bool(rel <= TOLERANCE[case["dtype"]]),
            "dispatched": kind,
            "dispatch_ok": None if kind is None else kind == case["backend"],
        },
    }
