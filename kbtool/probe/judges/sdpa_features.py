"""Probe: what PyTorch SDPA offers beyond plain attention: attention sinks, a sliding window, and the math backend's
score matrix against free memory.

- sinks (flash, efficient, cudnn, math, each forced alone with torch.nn.attention.sdpa_kernel): a gpt-oss style
  per-head sink logit has no place in SDPA's signature. The honest test is the one a user would make: read the
  ATen schema of aten::scaled_dot_product_attention (the argument names it declares are recorded), then pass the
  sink tensor as `sinks=` under the forced backend. A TypeError for the unknown keyword, with no sink-like argument
  in the schema, is the refusal the claim names (SINKS). If a future release declares a sink argument, the case
  passes the tensor under that name and checks the output against an fp32 reference with one extra softmax column
  per head (logit = sink, no value), so a real sinks input shows up as a clean run.
- window (flash, efficient, math): a causal sliding window of 128 tokens expressed as a boolean banded attn_mask
  (key j visible from query i when i - 128 < j <= i), checked against an fp32 reference. Flash takes no attn_mask
  (sdp_utils.cpp check_for_attn_mask), so its refusal is the claim's SLIDING_WINDOW reason.
- workspace (math): score_matrix_fits is fixed per case from the shape against a bound any GPU this runs on
  satisfies: batch x heads x q x kv x 4 B = 2.1 GB (fits) and 1.1 TB (does not). The run reads
  torch.cuda.mem_get_info after allocating the inputs and records an ERROR instead of a verdict if the premise
  does not hold there. The 1.1 TB case must end in a clean OOM on the score matrix's first allocation (its
  requested size is recorded); the memory is freed afterwards.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="sdpa-features",
    version=1,
    order=22,
    title="PyTorch SDPA: sinks, sliding window via attn_mask, math score-matrix memory",
    claims=[
        "torch-sdpa-flash-no-sinks",
        "torch-sdpa-efficient-no-sinks",
        "torch-sdpa-cudnn-no-sinks",
        "torch-sdpa-math-no-sinks",
        "torch-sdpa-flash-no-sliding-window",
        "torch-sdpa-efficient-sliding-window-via-mask",
        "torch-sdpa-math-sliding-window-via-mask",
        "torch-sdpa-math-score-matrix-workspace",
    ],
    requires={"archs": None, "packages": ["torch"]},
    timeout_s=120,
)


WORKSPACE = [  # (heads, seq, head_dim): batch 1
    (8, 8192, 128),  # 8 x 8192^2 x 4 B = 2.1 GB
    (64, 65536, 64),  # 64 x 65536^2 x 4 B = 1.1 TB, beyond any single GPU's memory
]


SUBJECT = {"flash": "torch-sdpa-flash", "efficient": "torch-sdpa-efficient", "cudnn": "torch-sdpa-cudnn",
           "math": "torch-sdpa-math"}


def _label(p: dict[str, Any]) -> str:
    if p.get("kind") == "workspace":
        return f"math h{p.get('num_heads')} L{p.get('seq')} score matrix {p.get('score_matrix_bytes')} B"
    return f"{p.get('backend')} {p.get('kind')}"


def reason_of(obs: dict[str, Any]) -> str | None:
    """A gate the probe recorded (metrics.gate), else: attn_mask refused -> SLIDING_WINDOW (the window travels as a
    mask), a sink keyword refused -> SINKS, else the shared keyword families."""
    if isinstance((obs.get("metrics") or {}).get("gate"), str):
        return default_reason(obs)
    text = str(obs.get("message") or "").lower()
    if "attn_mask" in text or "attention mask" in text:
        return "SLIDING_WINDOW"
    if "sink" in text:
        return "SINKS"
    return default_reason(obs)


def as_judged(obs: dict[str, Any]) -> dict[str, Any]:
    """An OOM on the math backend's own score-matrix allocation is the refusal the workspace claim names; every
    other OOM stays without a clear answer."""
    p = obs.get("params") or {}
    m = obs.get("metrics") or {}
    if p.get("kind") == "workspace" and obs.get("outcome") == "OOM" and m.get("score_alloc") is True:
        return {**obs, "outcome": "UNSUPPORTED", "metrics": {**m, "gate": "WORKSPACE"}}
    return obs


def variables(env: dict[str, Any]) -> Any:
    def bind(p: dict[str, Any]) -> dict[str, Any]:
        out = {"vendor": "nvidia", "sm": env.get("architecture"), "dtype": p.get("dtype"),
               "kv_dtype": p.get("kv_dtype"), "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim"),
               "sinks": p.get("sinks"), "sliding_window": p.get("sliding_window"),
               "score_matrix_fits": p.get("score_matrix_fits"), "phase": "prefill"}
        out.update(env_vars(env))
        return out
    return bind


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    claims = env.get("claims") or {}
    obs = [as_judged(o) for o in observations]
    gates = claim_gates(claims, SPEC.claims, lambda p: [SUBJECT.get(str(p.get("backend")), "")], variables(env))

    def scope_of(gate: Any) -> dict[str, Any]:
        subject = (claims.get(gate.claim) or {}).get("subject")
        picked = lambda p: SUBJECT.get(str(p.get("backend"))) == subject  # noqa: E731
        return {"sm": env.get("architecture"), "torch": env.get("torch"), "phase": "prefill",
                "kinds": values(obs, "kind", picked), "dtypes": values(obs, "dtype", picked)}

    return judge_gates(gates, obs, scope_of, _label, reason_of=reason_of)


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for o in observations:
        p, m = o.get("params") or {}, o.get("metrics") or {}
        rows.append({"case": _label(p), "outcome": o.get("outcome"), "rel_err": m.get("rel_err"),
                     "peak_bytes": m.get("peak_bytes"), "tried_bytes": m.get("tried_bytes"),
                     "free_bytes": m.get("free_bytes")})
    return {"cases": rows}
