"""Probe: FA-3 (vLLM's fork) on the call vLLM's FLASH_ATTN_MLA backend makes for MLA decode.

vllm/v1/attention/backends/mla/flashattn_mla.py (forward_mqa; 0.24.0 line 346, 0.33.0 line 382) does not pass the
576-wide absorbed query: it calls flash_attn_varlen_func(q=q_pe, k=k_pe_cache, v=kv_c_cache, q_v=q_nope, ...,
block_table, seqused_k, causal=True, fa_version=3), so FA-3 sees head_dim 64 (the rope part) and head_dim_v 512 (the
latent), with the no-rope part as q_v. Cases: that call at 16 and 128 query heads over one shared latent head, bf16,
paged blocks of 64, decode (one query token) and two-token decode; and the same numbers as one 576-wide query against
a 576-wide key (no q_v), the shape kb used to model, which fa3-head-dims predicts FA-3 refuses. The reference is fp32
attention with scores q_pe.k_pe + q_nope.kv_c, scaled by 1/sqrt(576) as vLLM's MLA scale is, over the latent values.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, env_vars, judge_gates, outcome_rows
from kbtool.probe.spec import ProbeSpec
from kbtool.probe.verdicts import untestable_here

LIB = "vllm-flash-attn-3"


SPEC = ProbeSpec(
    id="vllm-fa3-mla",
    version=1,
    order=45,
    title="FA-3 (vLLM's fork) on FLASH_ATTN_MLA's decode call (q 64 + q_v 512)",
    claims=["fa3-head-dims"],
    requires={"archs": None, "packages": ["torch", LIB]},
    timeout_s=240,
    untestable="FA-3 here is vLLM's build inside the vllm wheel (see probes/vllm_fa3.py).",
)


ROPE, LATENT, BLOCK = 64, 512, 64


def _label(p: dict[str, Any]) -> str:
    return f"{'q 64 + q_v 512' if p.get('q_v') else 'q 576'} h{p.get('heads')} q_len {p.get('q_len')}"


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """fa3-head-dims' own prediction for the shape each case passes: (64, 512) for the engine's call, (576, 512) for
    the concatenated query."""
    claims = env.get("claims") or {}
    version = (env.get("libraries") or {}).get(LIB)

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        d = ROPE if p.get("q_v") else ROPE + LATENT
        return {"dtype": "bf16", "kv_dtype": "bf16", "head_dim": d, "head_dim_v": LATENT, "phase": "decode",
                **env_vars(env)}

    gates = claim_gates(claims, SPEC.claims, lambda p: ["flash-attention-3"], bind)
    scope = {"sm": env.get("architecture"), LIB: version, "phase": "decode",
             "dtypes": ["bf16"], "head_dims": [ROPE, ROPE + LATENT]}
    out = judge_gates(gates, observations, lambda g: scope, _label)
    if env.get("architecture") != "sm90":
        untestable_here(out, SPEC.claims, f"vLLM's FA-3 build is compiled for sm90a only; {env.get('architecture')} "
                        "runs none of it")
    return out


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    return {"outcomes": outcome_rows(observations, _label)}
