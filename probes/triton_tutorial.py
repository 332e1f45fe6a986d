"""Probe: the Triton fused-attention tutorial kernel (python/tutorials/06-fused-attention.py) forward pass.

The tutorial ships in Triton's source tree, not in its wheel; a host that has the file puts it on the path as
`fused_attention_tutorial.py`. Cases: fp16 at head dims 16-256 and two it does not list (80, 512), bf16, fp8_e5m2
(V stored transposed, as the tutorial's benchmark does), and a bf16 query with fp8_e5m2 K/V; (1, 4, 1024, D),
non-causal. Autotuning is cut to the first configuration of each kernel (one compile per case): tuning changes
speed, not which inputs the kernel takes (every configuration has BLOCK_N >= 32, so the kernel's
static_assert(BLOCK_N <= HEAD_DIM) refuses head dim 16 under any of them).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="triton-tutorial",
    version=1,
    order=35,
    title="Triton fused-attention tutorial: dtypes and head dims",
    claims=["triton-fused-attention-dtypes", "triton-fused-attention-head-dims", "triton-fused-attention-hardware"],
    requires={"archs": None, "packages": ["torch", "triton", "triton-tutorial"]},
    timeout_s=240,
    untestable=("The tutorial kernel is not a package: the triton wheel does not ship python/tutorials/"
                "06-fused-attention.py and the probe host cannot fetch it; put the file on the path as "
                "fused_attention_tutorial.py to run this probe."),
)

BATCH, HEADS, SEQ = 1, 4, 1024
TOLERANCE = {"fp16": 1e-2, "bf16": 3e-2, "fp8_e5m2": 1.5e-1}


def cases() -> list[dict[str, Any]]:
    out = [{"dtype": "fp16", "kv_dtype": "fp16", "head_dim": d} for d in (16, 32, 64, 128, 256, 80, 512)]
    out += [{"dtype": "bf16", "kv_dtype": "bf16", "head_dim": 64}, {"dtype": "fp8_e5m2", "kv_dtype": "fp8_e5m2",
                                                                   "head_dim": 64},
            {"dtype": "bf16", "kv_dtype": "fp8_e5m2", "head_dim": 64}]
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    import fused_attention_tutorial as tutorial
    import torch

    for name in ("_attn_fwd", "_attn_fwd_tma"):
        kernel = getattr(tutorial, name, None)
        if kernel is not None and getattr(kernel, "configs", None):
            kernel.configs = kernel.configs[:1]
    names = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8_e5m2": torch.float8_e5m2}
    torch.manual_seed(0)
    d = case["head_dim"]
    shape = (BATCH, HEADS, SEQ, d)
    q = (torch.randn(shape, device="cuda") * 0.5).to(names[case["dtype"]])
    k = (torch.randn(shape, device="cuda") * 0.5).to(names[case["kv_dtype"]])
    v32 = torch.randn(shape, device="cuda") * 0.5
    if case["kv_dtype"] == "fp8_e5m2":  # the tutorial reads an fp8 V transposed
        v = v32.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)
    else:
        v = v32.to(names[case["kv_dtype"]])
    scale = d ** -0.5
    out = tutorial.attention(q, k, v, False, scale)
    torch.cuda.synchronize()
    ref = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * scale, dim=-1) @ v.float()
    err = (out.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    return {"outcome": "OK", "max_abs_err": err,
            "metrics": {"rel_err": rel, "correct": bool(rel <= TOLERANCE[case["dtype"]]), "out_dtype": str(out.dtype)}}


def _label(p: dict[str, Any]) -> str:
    return f"q {p.get('dtype')} kv {p.get('kv_dtype')} hd{p.get('head_dim')}"


def reason_of(obs: dict[str, Any]) -> str | None:
    """The tutorial's own head-dim checks: `assert HEAD_DIM_K in {16, ...}` in forward, and
    `tl.static_assert(BLOCK_N <= HEAD_DIM)` in the kernel (every tuning config has BLOCK_N >= 32). Other compile
    errors echo kernel source, whose words name no gate: no reason is read from them."""
    text = str(obs.get("message") or "") + str((obs.get("metrics") or {}).get("traceback_tail") or "")
    if "assert HEAD_DIM_K in" in text or "static_assert(BLOCK_N <= HEAD_DIM)" in text:
        return "HEAD_DIM"
    return None


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    claims = env.get("claims") or {}

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        out = {"dtype": p.get("dtype"), "kv_dtype": p.get("kv_dtype"),
               "kv_dtype_differs": p.get("kv_dtype") != p.get("dtype"), "head_dim": p.get("head_dim"),
               "head_dim_v": p.get("head_dim"), "phase": "prefill"}
        out.update(env_vars(env))
        return out

    gates = claim_gates(claims, SPEC.claims, lambda p: ["triton-fused-attention"], bind)
    scope = {"sm": env.get("architecture"), "triton": (env.get("libraries") or {}).get("triton"),
             "phase": "prefill", "dtypes": values(observations, "dtype", lambda p: True),
             "head_dims": values(observations, "head_dim", lambda p: True)}
    return judge_gates(gates, observations, lambda g: scope, _label, reason_of=reason_of)
