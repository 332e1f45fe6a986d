"""Probe: does FlashAttention-4 (flash-attn-4, CuTe DSL) run forward on this GPU, by head dim and dtype?

Cases: head dims 64, 128, 192, 256, 512 (q/k and v equal), bf16 and fp8 e4m3, non-causal, GQA 8:2,
shapes (2, 512, heads, D). FA-4 states its gates as assertions (arch, head dims, "FP8 is only supported on
SM100"), which are recorded as UNSUPPORTED with the library's own message. Outputs that run are compared with
an fp32 reference on the same (dequantized) inputs. This settles "FA-4 requires Blackwell" for the
architecture it runs on, and FA-4's per-architecture head-dim and fp8 gates there.

v2 adds two bf16 hd128 cases for the features FA-4's interface takes on every architecture it dispatches to
(flash_attn/cute/interface.py passes learnable_sink and window_size_left/right to FlashAttentionForwardSm90 too):
a learned sink logit per query head (learnable_sink, fp32, shape (heads,)), and a causal sliding window of 128
tokens (causal=True, window_size=(127, 0): key j visible from query i when i - 127 <= j <= i). The sink reference is
softmax over the scores plus one extra column per head whose logit is the sink (natural-log units, not scaled,
no value vector), as softmax.apply_learnable_sink describes it.
"""

from __future__ import annotations

import re
from typing import Any

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec
from kbtool.probe.verdicts import untestable_here

SPEC = ProbeSpec(
    id="fa4-arch",
    version=3,
    order=30,
    title="FlashAttention-4 architecture, head-dim and fp8 gates",
    claims=["fa4-requires-blackwell", "fa4-head-dims", "fa4-fp8-sm100-only", "fa4-arch-range", "fa4-requires-nvidia",
            "fa4-sinks", "flash-attention-4-sliding-window", "fa4-dtypes", "fa4-fp8-kv-needs-fp8-query"],
    requires={"archs": None, "packages": ["torch", "flash-attn-4"]},
    timeout_s=300,
    workers=2,
    rejudges=(1, 2),  # v3 only added cases
)

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
FP8_ARCHS = ("sm100", "sm103")
OFF_ARCH_UNTESTABLE = ("fa4-fp8-kv-needs-fp8-query",)
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


# ---- judge (pure) --------------------------------------------------------------------------------

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


def _label(p: dict[str, Any]) -> str:
    extra = " sinks" if p.get("sinks") else f" window {p['sliding_window']}" if p.get("sliding_window") else ""
    kv = f" kv {p['kv_dtype']}" if p.get("kv_dtype") else ""
    return f"hd{p.get('head_dim')} {p.get('dtype')}{kv}{extra}"


def reason_of(obs: dict[str, Any]) -> str | None:
    """FA-4's assertions about sinks (learnable_sink) and local attention (window) name those features; every other
    message by the shared keyword families (head dims, FP8, architecture)."""
    text = str(obs.get("message") or "").lower()
    if "inputs must be float16, bfloat16" in text:
        return "KV_DTYPE"  # interface.py's assertion on v's dtype (fa4-dtypes)
    if "must have the same dtype" in text:
        return "Q_DTYPE"
    if re.search(r"\bsink|learnable_sink", text):
        return "SINKS"
    if re.search(r"window|local attention|\bis_local\b", text):
        return "SLIDING_WINDOW"
    return default_reason(obs)


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Predictions from the claims' own conditions (env['claims']); FA-4 states its gates as assertions whose
    text names the gate (head dims, FP8, architecture)."""
    claims = env.get("claims") or {}
    version = (env.get("libraries") or {}).get("flash-attn-4")

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        kv = p.get("kv_dtype", p.get("dtype"))
        out = {"dtype": p.get("dtype"), "kv_dtype": kv, "kv_dtype_differs": kv != p.get("dtype"),
               "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim"), "phase": "prefill",
               "sinks": p.get("sinks"), "sliding_window": p.get("sliding_window")}
        out.update(env_vars(env))
        return out

    gates = claim_gates(claims, SPEC.claims, lambda p: ["flash-attention-4"], bind)
    scope = {"sm": env.get("architecture"), "flash-attn-4": version, "phase": "prefill",
             "dtypes": values(observations, "dtype", lambda p: True),
             "head_dims": values(observations, "head_dim", lambda p: True)}
    out = judge_gates(gates, observations, lambda g: scope, _label, reason_of=reason_of)
    if env.get("architecture") not in FP8_ARCHS:
        untestable_here(out, OFF_ARCH_UNTESTABLE, f"FA-4 runs FP8 on {'/'.join(FP8_ARCHS)} only "
                        f"(fa4-fp8-sm100-only), so a run on {env.get('architecture')} cannot show it")
    return out


