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
        return bool(p["head_dim"] % 8 == 0 and p["head_dim"] <= cudnn_limit)

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
