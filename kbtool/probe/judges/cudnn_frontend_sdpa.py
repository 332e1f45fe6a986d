"""Probe: cuDNN's SDPA forward through the cudnn-frontend Python graph API (not through PyTorch).

Cases: q = k = v in fp16, bf16 and fp32 at head dim 128; a bf16 query with fp8 (e4m3) K/V; bf16 at head dims 64,
72, 100, 192 and 256, and q/k 192 with v 128. Each builds one graph (validate, build, check_support, plans) and
runs it against an fp32 reference; cuDNN's refusal at any step is recorded with its message.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="cudnn-frontend-sdpa",
    version=2,
    order=30,
    title="cuDNN frontend SDPA dtypes and head dims",
    claims=["cudnn-frontend-sdpa-dtypes", "cudnn-frontend-sdpa-head-dim", "cudnn-frontend-sdpa-requires-sm80"],
    requires={"archs": None, "packages": ["torch", "cudnn-frontend"]},
    timeout_s=180,
)


def _label(p: dict[str, Any]) -> str:
    return f"q {p.get('dtype')} kv {p.get('kv_dtype')} hd{p.get('head_dim')}/{p.get('head_dim_v')}"


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    claims = env.get("claims") or {}

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        out = {"vendor": "nvidia", "sm": env.get("architecture"), "dtype": p.get("dtype"),
               "kv_dtype": p.get("kv_dtype"), "kv_dtype_differs": p.get("kv_dtype") != p.get("dtype"),
               "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim_v")}
        out.update(env_vars(env))
        return out

    gates = claim_gates(claims, SPEC.claims, lambda p: ["cudnn-frontend-sdpa"], bind)
    fe = next((m.get("cudnn_frontend") for o in observations if (m := o.get("metrics") or {}).get("cudnn_frontend")),
              None) or (env.get("libraries") or {}).get("cudnn-frontend")
    scope = {"sm": env.get("architecture"), "cudnn-frontend": fe, "cudnn": (env.get("libraries") or {}).get("cudnn"),
             "dtypes": values(observations, "dtype", lambda p: True),
             "head_dims": values(observations, "head_dim", lambda p: True)}
    return judge_gates(gates, observations, lambda g: scope, _label)
