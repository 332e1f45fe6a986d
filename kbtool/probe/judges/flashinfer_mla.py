"""Probe: FlashInfer's MLA wrapper (BatchMLAPagedAttentionWrapper, backend="auto") as SGLang's flashinfer backend
plans it: the latent width (head_dim_ckv) and rope width (head_dim_kpe), the q/KV dtype pairs, decode and causal
(paged-prefill) plans, page size 1. Each case plans and runs the wrapper on a small paged batch and compares the
output with an fp32 reference of absorbed MLA computed from the very (dequantized) caches the kernel read; a refusal
is the wrapper's own planning error (every candidate backend's reason, joined), recorded UNSUPPORTED.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="flashinfer-mla",
    version=1,
    order=42,
    title="FlashInfer MLA wrapper gates",
    claims=[
        "flashinfer-mla-latent-head-dims",
        "flashinfer-mla-q-kv-dtypes",
        "flashinfer-mla-requires-sm80",
        "flashinfer-mla-requires-nvidia",
    ],
    requires={"archs": None, "packages": ["torch", "flashinfer"]},
    timeout_s=600,
    workers=4,
)

HEADS = 16
"""Query heads per GPU: DeepSeek-V3/R1's 128 at tensor parallel 8."""

NO_BACKEND = "No supported planned MLA backend"
"""How FlashInfer 0.7.x's auto policy words a call none of its candidate backends plans."""


def _label(p: dict[str, Any]) -> str:
    return f"{p.get('phase')} ckv {p.get('ckv')} kpe {p.get('kpe')} q/kv {p.get('q_dtype')}/{p.get('kv_dtype')}"


def subjects(p: dict[str, Any]) -> list[str]:
    return ["flashinfer-mla"]


def gate_of(message: str) -> str | None:
    """The gate a planning refusal names, read from the fa2 template's reason where the auto policy lists one (fa2 is
    the candidate every architecture from SM80 tries), else from the whole message."""
    parts = [s.strip() for s in message.replace(NO_BACKEND + ":", "").split(";")]
    text = next((s for s in parts if s.startswith("fa2:")), message).lower()
    if "head_dim_ckv" in text or "head_dim_kpe" in text:
        return "HEAD_DIM"
    if "sm80 or newer" in text or "requires an sm90" in text or "compute capability" in text:
        return "ARCH"
    if "kv_data_type" in text or "kv dtype" in text or "q_data_type" in text:
        return "KV_DTYPE"
    return None


def reason_of(obs: dict[str, Any]) -> str | None:
    return gate_of(str(obs.get("message") or "")) or default_reason(obs)


def variables(env: dict[str, Any]) -> Any:
    def bind(p: dict[str, Any]) -> dict[str, Any]:
        ckv, kpe = int(p.get("ckv", 0)), int(p.get("kpe", 0))
        out = {"dtype": p.get("q_dtype"), "kv_dtype": p.get("kv_dtype"),
               "kv_dtype_differs": p.get("kv_dtype") != p.get("q_dtype"), "kv_lora_rank": ckv,
               "qk_rope_head_dim": kpe, "head_dim": ckv + kpe, "head_dim_v": ckv, "attention": "mla",
               "phase": p.get("phase"), "num_heads": HEADS, "block_size": p.get("page_size")}
        out.update(env_vars(env))
        return out
    return bind


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Each claim's prediction per case comes from its own `when`/`requires` (env['claims']); a refusal is read by the
    reason the wrapper gives (gate_of)."""
    claims = env.get("claims") or {}
    gates = claim_gates(claims, SPEC.claims, subjects, variables(env))
    version = (env.get("libraries") or {}).get("flashinfer")

    def scope_of(gate: Any) -> dict[str, Any]:
        params = [o.get("params") or {} for o in observations if gate.expect(o.get("params") or {}) is not None]
        out: dict[str, Any] = {"sm": env.get("architecture"), "flashinfer": version,
                               "dims": sorted({f"{p.get('ckv')}+{p.get('kpe')}" for p in params}),
                               "dtypes": sorted({f"{p.get('q_dtype')}/{p.get('kv_dtype')}" for p in params})}
        phases = sorted({str(p.get("phase")) for p in params})
        if len(phases) == 1:
            out["phase"] = phases[0]
        return out

    return judge_gates(gates, observations, scope_of, _label, reason_of=reason_of)


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    """Outcome per case label (OK-but-wrong when the result was wrong), with the backend the auto policy planned."""
    rows: dict[str, str] = {}
    for o in observations:
        p = o.get("params") or {}
        outcome = str(o.get("outcome"))
        metrics = o.get("metrics") or {}
        if outcome == "OK" and metrics.get("correct") is False:
            outcome = "OK-but-wrong"
        if metrics.get("backend"):
            outcome += f" ({metrics['backend']})"
        rows[_label(p)] = outcome
    return {"outcomes": rows}
