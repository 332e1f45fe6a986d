"""Probe: PyTorch SDPA backend gates (flash, efficient, cudnn, math) by head dim, dtype and causality.

Each case forces one backend alone (torch.nn.attention.sdpa_kernel) on q = k = v shapes (2, 8, 256, D).
A refusal is PyTorch's "No available kernel" error; its message is kept together with the warnings in which
PyTorch states each failed check. A case that runs is checked against an fp32 reference and profiled: the
CUDA kernel names show which implementation really ran (the dispatch check of seed 000).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import gate_verdict, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="sdpa-gates",
    version=1,
    order=20,
    title="PyTorch SDPA backend gates",
    claims=[
        "torch-sdpa-flash-sm-range",
        "torch-sdpa-flash-head-dim",
        "torch-sdpa-flash-dtypes",
        "torch-sdpa-efficient-head-dim",
        "torch-sdpa-cudnn-sm-range",
        "torch-sdpa-cudnn-head-dim",
    ],
    requires={"archs": None, "packages": ["torch"]},
    timeout_s=120,
)

BACKENDS = ["flash", "efficient", "cudnn", "math"]
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


def dispatched(kernels: list[str]) -> str | None:
    """Which SDPA implementation the profiled CUDA kernel names belong to."""
    text = " ".join(kernels).lower()
    if "cudnn" in text or "fort_native_sdpa" in text:
        return "cudnn"
    if "flash_fwd" in text or "pytorch_flash" in text:
        return "flash"
    if "fmha_cutlass" in text or "memeffattention" in text or "mem_eff" in text:
        return "efficient"
    if any(k in text for k in ("gemm", "nvjet", "softmax", "cutlass")):
        return "math"
    return None


def run(case: dict[str, Any]) -> dict[str, Any]:
    import warnings

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[case["backend"]]
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


# ---- judge (pure) --------------------------------------------------------------------------------


def _label(p: dict[str, Any]) -> str:
    return f"{p.get('backend')} hd{p.get('head_dim')} {p.get('dtype')}"


def _cudnn_version(env: dict[str, Any]) -> int | None:
    raw = (env.get("libraries") or {}).get("cudnn")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    cc = float(env.get("compute_capability") or 0)
    sm = env.get("architecture")
    half = ("fp16", "bf16")
    in_range = 8.0 <= cc <= 12.1
    cudnn = _cudnn_version(env)
    # The cuDNN limit of 256 needs sm90/sm10x and runtime cuDNN > 9.22 (statement of the claim); else 128.
    cudnn_limit = 256 if sm in ("sm90", "sm100", "sm103") and (cudnn is None or cudnn > 92200) else 128
    # Observations whose kernels belong to another backend say nothing about the requested backend's gate.
    obs = [o for o in observations if (o.get("metrics") or {}).get("dispatch_ok", True) is not False]

    def scope(backend: str) -> dict[str, Any]:
        picked = lambda p: p.get("backend") == backend  # noqa: E731
        out = {"sm": sm, "torch": env.get("torch"), "backend": backend,
               "head_dims": values(observations, "head_dim", picked), "dtypes": values(observations, "dtype", picked)}
        if backend == "cudnn" and cudnn is not None:
            out["cudnn"] = cudnn
        return out

    def is_(backend: str, p: dict[str, Any]) -> bool:
        return p.get("backend") == backend

    rules: list[tuple[str, str, Any]] = [
        ("torch-sdpa-flash-sm-range", "flash",
         lambda p: in_range if is_("flash", p) and p["head_dim"] <= 256 and p["dtype"] in half else None),
        ("torch-sdpa-flash-head-dim", "flash",
         lambda p: p["head_dim"] <= 256 if is_("flash", p) and p["dtype"] in half and in_range else None),
        ("torch-sdpa-flash-dtypes", "flash",
         lambda p: p["dtype"] in half if is_("flash", p) and p["head_dim"] <= 256 and in_range else None),
        ("torch-sdpa-efficient-head-dim", "efficient",
         lambda p: p["head_dim"] % 8 == 0 if is_("efficient", p) and p["dtype"] in half else None),
        ("torch-sdpa-cudnn-sm-range", "cudnn",
         lambda p: in_range if is_("cudnn", p) and p["head_dim"] <= 128 and p["dtype"] in half else None),
        ("torch-sdpa-cudnn-head-dim", "cudnn",
         lambda p: (p["head_dim"] % 8 == 0 and p["head_dim"] <= cudnn_limit)
         if is_("cudnn", p) and p["dtype"] in half and in_range else None),
    ]
    return [gate_verdict(claim, obs, expect, scope(backend), _label) for claim, backend, expect in rules]


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    """Accept/refuse table per backend and dtype (head dims that ran), and dispatch mismatches."""
    table: dict[str, dict[str, list[int]]] = {}
    mismatches = []
    for o in observations:
        p = o.get("params") or {}
        if o.get("outcome") == "OK" and not p.get("causal"):
            table.setdefault(p["backend"], {}).setdefault(p["dtype"], []).append(p["head_dim"])
        m = o.get("metrics") or {}
        if o.get("outcome") == "OK" and m.get("dispatch_ok") is False:
            mismatches.append({"params": p, "dispatched": m.get("dispatched")})
    return {"ran_head_dims_non_causal": table, "dispatch_mismatches": mismatches}
