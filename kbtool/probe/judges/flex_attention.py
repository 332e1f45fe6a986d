"""Probe: torch FlexAttention (torch.nn.attention.flex_attention, compiled to Triton) by dtype and head dim.

Cases: q = k = v in fp16, bf16 and fp32 at head dims 64 and 128, and a bf16 query with fp8 (e4m3) K/V; bf16 at head
dims that are not powers of two (v2): 46 and 44 (not multiples of 8: vLLM PR 41454 saw a CUDA misaligned-address
fault at head size 46), 40 and 72 (multiples of 8). Each case compiles flex_attention once (torch.compile) and
compares with an fp32 reference.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="flex-attention",
    version=2,
    order=25,
    title="FlexAttention dtypes and head dims",
    claims=["flex-attention-dtypes", "flex-attention-runs-via-triton", "flex-attention-head-dim-multiple-of-8"],
    requires={"archs": None, "packages": ["torch", "triton"]},
    timeout_s=240,
    workers=2,
    rejudges=(1,),
)


def _label(p: dict[str, Any]) -> str:
    return f"q {p.get('dtype')} kv {p.get('kv_dtype')} hd{p.get('head_dim')}"


def reason_of(obs: dict[str, Any]) -> str | None:
    """A CUDA misaligned-address fault is the head-dim caveat's own failure (HEAD_DIM), as are flex's head-dim
    refusals ("embedding dimension ... must be at least 16"); other messages by the shared keyword families."""
    text = (str(obs.get("message") or "") + str((obs.get("metrics") or {}).get("traceback_tail") or "")).lower()
    if "misaligned address" in text or "embedding dimension" in text:
        return "HEAD_DIM"
    return default_reason(obs)


def head_dim_multiple_of_8(p: dict[str, Any]) -> bool | None:
    """flex-attention-head-dim-multiple-of-8 is a caveat ("can fault"), which claim_expect leaves ungated. Its test:
    a head dim that is not a multiple of 8 is predicted to fail (fault or refusal naming the head dim), a multiple
    of 8 to run; a clean, correct run at 46 or 44 says the fault is not there in this release."""
    d = p.get("head_dim")
    return None if not isinstance(d, int) else d % 8 == 0


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    claims = env.get("claims") or {}

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        out = {"vendor": "nvidia", "sm": env.get("architecture"), "dtype": p.get("dtype"),
               "kv_dtype": p.get("kv_dtype"), "kv_dtype_differs": p.get("kv_dtype") != p.get("dtype"),
               "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim")}
        out.update(env_vars(env))
        return out

    # Without a case off the multiple-of-8 grid (v1 records) the caveat is not tested at all: nothing is gated.
    odd = any((o.get("params") or {}).get("head_dim", 0) % 8 for o in observations)
    gates = claim_gates(claims, SPEC.claims, lambda p: ["flex-attention"], bind,
                        overrides={"flex-attention-head-dim-multiple-of-8":
                                   head_dim_multiple_of_8 if odd else (lambda p: None)})
    scope = {"sm": env.get("architecture"), "torch": env.get("torch"),
             "triton": (env.get("libraries") or {}).get("triton"),
             "dtypes": values(observations, "dtype", lambda p: True),
             "kv_dtypes": values(observations, "kv_dtype", lambda p: True)}
    return judge_gates(gates, observations, lambda g: scope, _label, reason_of=reason_of)
