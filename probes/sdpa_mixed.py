"""Probe: PyTorch SDPA with a KV dtype other than the query's, GQA, unequal q/v head dims, the default.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/sdpa_mixed.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.sdpa_mixed import BATCH, HEADS, SEQ, SPEC, D, judge, summarize
from probes.sdpa_gates import BACKENDS, dispatched, sdpa_backend  # dispatched: whose kernels a profile shows

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


MIXED_KV = ["fp8_e4m3", "fp8_e5m2", "fp4_e2m1"]


MEMORY_LENGTHS = [1024, 2048, 4096, 8192, 16384]


TOLERANCE = 5e-2


def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in BACKENDS:
        for kv in MIXED_KV:
            out.append({"kind": "mixed", "backend": b, "dtype": "bf16", "kv_dtype": kv, "head_dim": D})
        out.append({"kind": "mixed", "backend": b, "dtype": "fp8_e4m3", "kv_dtype": "fp8_e4m3", "head_dim": D})
        out.append({"kind": "gqa", "backend": b, "dtype": "bf16", "kv_dtype": "bf16", "head_dim": D,
                    "num_heads": 8, "kv_heads": 2})
        out.append({"kind": "head_dim_v", "backend": b, "dtype": "bf16", "kv_dtype": "bf16", "head_dim": 192,
                    "head_dim_v": 128})
    out.append({"kind": "default", "backend": "default", "dtype": "bf16", "kv_dtype": "bf16", "head_dim": D})
    for n in MEMORY_LENGTHS:
        out.append({"kind": "memory", "backend": "math", "dtype": "bf16", "kv_dtype": "bf16", "head_dim": D,
                    "seq": n})
    return out


def _tensor(shape: tuple[int, ...], name: str) -> Any:
    import torch

    if name == "fp4_e2m1":
        packed = torch.randint(0, 256, (*shape[:-1], shape[-1] // 2), device="cuda", dtype=torch.uint8)
        return packed.view(torch.float4_e2m1fn_x2)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_e4m3": torch.float8_e4m3fn,
             "fp8_e5m2": torch.float8_e5m2}[name]
    return torch.randn(shape, device="cuda", dtype=torch.bfloat16).to(dtype)


def _memory(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    n = case["seq"]
    q, k, v = (torch.randn(1, HEADS, n, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with sdpa_kernel([SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    rule = 1 * HEADS * n * n * 4
    return {"outcome": "OK", "metrics": {"peak_bytes": int(peak), "rule_bytes": rule, "peak_over_rule": peak / rule,
                                         "out_bytes": out.numel() * out.element_size()}}


def run(case: dict[str, Any]) -> dict[str, Any]:
    import contextlib
    import warnings

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    if case["kind"] == "memory":
        return _memory(case)
    hq = case.get("num_heads", HEADS)
    hkv = case.get("kv_heads", HEADS)
    dv = case.get("head_dim_v", case["head_dim"])
    q = _tensor((BATCH, hq, SEQ, case["head_dim"]), case["dtype"])
    k = _tensor((BATCH, hkv, SEQ, case["head_dim"]), case["kv_dtype"])
    v = _tensor((BATCH, hkv, SEQ, dv), case["kv_dtype"])
    kwargs = {"enable_gqa": True} if hkv != hq else {}
    backends = None if case["backend"] == "default" else [sdpa_backend(case["backend"])]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx = sdpa_kernel(backends) if backends else contextlib.nullcontext()
        with ctx:
            try:
                out = F.scaled_dot_product_attention(q, k, v, **kwargs)
            except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
                noise = ("kernel not used because", "has been runtime disabled")
                reasons = [str(w.message) for w in caught if not any(x in str(w.message) for x in noise)]
                return {"outcome": "UNSUPPORTED", "message": " | ".join([*reasons, f"{type(exc).__name__}: {exc}"]),
                        "metrics": {"exception": type(exc).__name__}}
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                out = F.scaled_dot_product_attention(q, k, v, **kwargs)
                torch.cuda.synchronize()
    kernels = sorted({e.name for e in prof.events() if "cuda" in str(getattr(e, "device_type", "")).lower()})
    kind = dispatched(kernels)
    metrics: dict[str, Any] = {"dispatched": kind, "out_dtype": str(out.dtype)}
    if case["backend"] != "default":
        metrics["dispatch_ok"] = None if kind is None else kind == case["backend"]
    if not str(case["kv_dtype"]).startswith("fp4"):
        group = hq // hkv
        kf = k.float().repeat_interleave(group, dim=1)
        vf = v.float().repeat_interleave(group, dim=1)
        ref = torch.softmax((q.float() @ kf.transpose(-1, -2)) / case["head_dim"] ** 0.5, dim=-1) @ vf
        err = (out.float() - ref).abs().max().item()
        rel = err / max(ref.abs().max().item(), 1e-12)
        metrics.update(rel_err=rel, correct=bool(rel <= TOLERANCE))
    return {"outcome": "OK", "kernels": [x[:160] for x in kernels[:12]], "metrics": metrics}
