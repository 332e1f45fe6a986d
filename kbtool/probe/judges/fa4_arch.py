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


FP8_ARCHS = ("sm100", "sm103")


OFF_ARCH_UNTESTABLE = ("fa4-fp8-kv-needs-fp8-query",)


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
