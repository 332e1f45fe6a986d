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
LENS_K = [1000, 77, 4096]


def cases() -> list[dict[str, Any]]:
    out = [{"name": f"mla call h{h} q{q}", "heads": h, "q_len": q, "q_v": True} for h in (16, 128) for q in (1, 2)]
    out += [{"name": "absorbed 576 h16 q1", "heads": 16, "q_len": 1, "q_v": False}]
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    from probes import _vllm_kernels as kx

    fa = kx.flash_attn()
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    h, lq = int(case["heads"]), int(case["q_len"])
    b = len(LENS_K)
    q_pe = torch.randn(b * lq, h, ROPE, device=dev).to(bf)
    q_nope = torch.randn(b * lq, h, LATENT, device=dev).to(bf)
    k_pe = torch.randn(sum(LENS_K), 1, ROPE, device=dev).to(bf)
    kv_c = torch.randn(sum(LENS_K), 1, LATENT, device=dev).to(bf)
    scale = (ROPE + LATENT) ** -0.5
    cu_q = torch.arange(0, b * lq + 1, lq, device=dev, dtype=torch.int32)
    seqused = torch.tensor(LENS_K, device=dev, dtype=torch.int32)
    if case["q_v"]:
        kc, vc, table = kx.paged(k_pe, kv_c, LENS_K, BLOCK)
        res = fa.flash_attn_varlen_func(q=q_pe, k=kc, v=vc, q_v=q_nope, max_seqlen_q=lq, cu_seqlens_q=cu_q,
                                        max_seqlen_k=max(LENS_K), seqused_k=seqused, block_table=table,
                                        softmax_scale=scale, causal=True, fa_version=3)
    else:
        k_all = torch.cat([kv_c, k_pe], dim=-1)
        kc, vc, table = kx.paged(k_all, kv_c, LENS_K, BLOCK)
        res = fa.flash_attn_varlen_func(torch.cat([q_nope, q_pe], dim=-1), kc, vc, max_seqlen_q=lq, cu_seqlens_q=cu_q,
                                        max_seqlen_k=max(LENS_K), seqused_k=seqused, block_table=table,
                                        softmax_scale=scale, causal=True, fa_version=3)
    out = res[0] if isinstance(res, tuple) else res
    torch.cuda.synchronize()
    refs, ko = [], 0
    for i, n in enumerate(LENS_K):
        qs = slice(i * lq, (i + 1) * lq)
        s = (torch.einsum("qhd,kd->hqk", q_pe[qs].float(), k_pe[ko:ko + n, 0].float())
             + torch.einsum("qhd,kd->hqk", q_nope[qs].float(), kv_c[ko:ko + n, 0].float())) * scale
        row = torch.arange(lq, device=dev)[:, None] + (n - lq)
        s = s.masked_fill(torch.arange(n, device=dev)[None, :] > row, float("-inf"))
        refs.append(torch.einsum("hqk,kd->qhd", torch.softmax(s, -1), kv_c[ko:ko + n, 0].float()))
        ko += n
    m = kx.compare(out, torch.cat(refs))
    return {"outcome": "OK", "metrics": {**m, "tolerance": 2e-2, "correct": m["finite"] and m["rel_l2"] <= 2e-2,
                                         "out_dtype": str(out.dtype).removeprefix("torch.")}}


# ---- judge (pure) --------------------------------------------------------------------------------


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
