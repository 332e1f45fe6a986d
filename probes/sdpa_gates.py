"""Probe: PyTorch SDPA backend gates (flash, efficient, cudnn, math) by head dim, dtype and causality.

Each case forces one backend alone (torch.nn.attention.sdpa_kernel) on q = k = v shapes (2, 8, 256, D).
A refusal is PyTorch's "No available kernel" error; its message is kept together with the warnings in which
PyTorch states each failed check. A case that runs is checked against an fp32 reference and profiled: the
CUDA kernel names show which implementation really ran (the dispatch check of seed 000).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates, reason_from_text, values
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
        "torch-sdpa-cudnn-dtypes",
        "torch-sdpa-efficient-dtypes",
        "torch-sdpa-efficient-sm-range",
        "torch-sdpa-cudnn-requires-nvidia",
        "torch-sdpa-math-any-device",
        "torch-sdpa-math-any-shape",
        "torch-sdpa-flash-same-dtype-qkv",
        "torch-sdpa-efficient-same-dtype-qkv",
        "torch-sdpa-cudnn-same-dtype-qkv",
        "torch-sdpa-math-same-dtype-qkv",
    ],
    requires={"archs": None, "packages": ["torch"]},
    timeout_s=120,
)

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


# ---- judge (pure) --------------------------------------------------------------------------------


def _label(p: dict[str, Any]) -> str:
    return f"{p.get('backend')} hd{p.get('head_dim')} {p.get('dtype')}"


def _cudnn_version(env: dict[str, Any]) -> int | None:
    raw = (env.get("libraries") or {}).get("cudnn")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


SUBJECT = {"flash": "torch-sdpa-flash", "efficient": "torch-sdpa-efficient", "cudnn": "torch-sdpa-cudnn",
           "math": "torch-sdpa-math"}


def reason_of(obs: dict[str, Any]) -> str | None:
    """PyTorch states each failed check as a warning before "No available kernel"; read the first that names a
    gate (the message lists them in the order PyTorch checked)."""
    text = str(obs.get("message") or "")
    for part in text.split(" | "):
        code = reason_from_text(part)
        if code is not None:
            return code
    return default_reason(obs)


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Predictions come from the claims' own conditions (env['claims']); the cuDNN head-dim limit of 256 needs a
    runtime cuDNN newer than 9.22, which the claim's condition tree does not carry, so the probe supplies it."""
    claims = env.get("claims") or {}
    sm = env.get("architecture")
    cudnn = _cudnn_version(env)
    cudnn_limit = 256 if sm in ("sm90", "sm100", "sm103") and (cudnn is None or cudnn > 92200) else 128
    obs = [o for o in observations if (o.get("metrics") or {}).get("dispatch_ok", True) is not False]

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        out = {"dtype": p.get("dtype"), "kv_dtype": p.get("dtype"), "kv_dtype_differs": False,
               "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim")}
        out.update(env_vars(env))
        return out

    def cudnn_head_dim(p: dict[str, Any]) -> bool | None:
        if p.get("backend") != "cudnn" or p.get("dtype") not in ("fp16", "bf16"):
            return None
        return p["head_dim"] % 8 == 0 and p["head_dim"] <= cudnn_limit

    gates = claim_gates(claims, SPEC.claims, lambda p: [SUBJECT.get(str(p.get("backend")), "")], bind,
                        overrides={"torch-sdpa-cudnn-head-dim": cudnn_head_dim})

    def scope_of(gate: Any) -> dict[str, Any]:
        subject = (claims.get(gate.claim) or {}).get("subject")
        picked = lambda p: SUBJECT.get(str(p.get("backend"))) == subject  # noqa: E731
        out = {"sm": sm, "torch": env.get("torch"), "head_dims": values(obs, "head_dim", picked),
               "dtypes": values(obs, "dtype", picked)}
        if subject == "torch-sdpa-cudnn" and cudnn is not None:
            out["cudnn"] = str(cudnn)
        return out

    return judge_gates(gates, obs, scope_of, _label, reason_of=reason_of)


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
