"""Probe: FlashInfer head-dim gates at the library level (not vLLM's engine gate).

Paths: single decode, paged batch decode, single prefill with backend fa2 and with backend fa3, for head dims
64, 128, 256, 512 with a bf16 query and bf16 or fp8 (e4m3) KV. Every output is compared with an fp32
reference computed from the very (dequantized) K and V the kernel read. Kernels are JIT-compiled on first use
and cached on disk, so several workers compile different variants at once and later runs reuse them.

FA3 prefill: FlashInfer itself decides whether FA3 takes a shape (`is_fa3_prefill_head_dim_supported`,
`is_fa3_backend_supported`; backend="auto" falls back to fa2 otherwise). Where that gate says no, the case is
recorded UNSUPPORTED with the gate's answer instead of forcing a compile of a kernel FlashInfer never builds.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="flashinfer-head-dim",
    version=2,
    order=40,
    title="FlashInfer head-dim gates",
    claims=[
        "flashinfer-decode-head-dims",
        "flashinfer-prefill-fa2-head-dims",
        "flashinfer-prefill-fa3-head-dims",
        "flashinfer-head-dim-256-512-unsupported",
        "flashinfer-fp8-kv-head-dim-512-needs-sm100",
        "flashinfer-fa3-fp8-kv-needs-fp8-query",
        "flashinfer-fa3-requires-sm90a",
        "flashinfer-fa2-requires-nvidia",
        "flashinfer-fa3-requires-nvidia",
        "flashinfer-arch-range",
        "flashinfer-fa2-q-kv-dtypes",
    ],
    requires={"archs": None, "packages": ["torch", "flashinfer"]},
    timeout_s=420,
    workers=4,
    rejudges=(1,),  # version 1 had the same cases; it forced FA3 compiles and recorded the JIT arch gate as ERROR
)


def _label(p: dict[str, Any]) -> str:
    return f"{p.get('path')} hd{p.get('head_dim')} kv {p.get('kv_dtype')}"


SUBJECT = {"prefill-fa3": "flashinfer-fa3", "prefill-fa2": "flashinfer-fa2", "decode-paged": "flashinfer-fa2",
           "decode-single": "flashinfer-fa2"}


def subjects(p: dict[str, Any]) -> list[str]:
    """The kernel a case exercises. FA3 with fp8 KV and a bf16 query is refused by FlashInfer's own helper
    (is_fa3_backend_supported) before any head-dim or arch check, so those cases gate no FA3 claim here."""
    if p.get("path") == "prefill-fa3" and p.get("kv_dtype") != "bf16":
        return []
    return [SUBJECT.get(str(p.get("path")), "")]


def reason_of(obs: dict[str, Any]) -> str | None:
    """The gate a refusal names: FlashInfer's JIT arch gate, the FA3 helpers the probe asks, else keywords."""
    text = str(obs.get("message") or "")
    if "No supported CUDA architectures" in text:
        return "ARCH"
    if "is_fa3_backend_supported" in text:
        return "KV_DTYPE"
    if "is_fa3_prefill_head_dim_supported" in text or "Unsupported head_dim" in text:
        return "HEAD_DIM"
    if "is_sm90a_supported" in text:
        return "ARCH"
    return default_reason(obs)


def variables(env: dict[str, Any]) -> Any:
    def bind(p: dict[str, Any]) -> dict[str, Any]:
        path = str(p.get("path", ""))
        out = {"vendor": "nvidia", "sm": env.get("architecture"), "cuda": env.get("cuda"), "dtype": "bf16",
               "kv_dtype": p.get("kv_dtype"), "kv_dtype_differs": p.get("kv_dtype") != "bf16",
               "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim"),
               "phase": "decode" if path.startswith("decode") else "prefill"}
        out.update(env_vars(env))
        return out
    return bind


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Every claim's prediction per case comes from its own `when`/`requires` (env['claims']); the head-dim claims
    judge only the bf16 query paths they name. A refusal is read by its message (reason_of)."""
    claims = env.get("claims") or {}
    gates = claim_gates(claims, SPEC.claims, subjects, variables(env))
    version = (env.get("libraries") or {}).get("flashinfer")

    def scope_of(gate: Any) -> dict[str, Any]:
        subject = (claims.get(gate.claim) or {}).get("subject")
        when = variables(env)
        picked = [o for o in observations if SUBJECT.get(str((o.get("params") or {}).get("path"))) == subject
                  and gate.expect(o.get("params") or {}) is not None]
        params = [o.get("params") or {} for o in picked]
        phases = sorted({when(p)["phase"] for p in params})
        out: dict[str, Any] = {"sm": env.get("architecture"), "flashinfer": version,
                               "paths": sorted({str(p.get("path")) for p in params}),
                               "head_dims": sorted({int(p.get("head_dim", 0)) for p in params}),
                               "kv_dtypes": sorted({str(p.get("kv_dtype")) for p in params})}
        if len(phases) == 1:
            out["phase"] = phases[0]
        return out

    return judge_gates(gates, observations, scope_of, _label, reason_of=reason_of)


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    """Outcome grid: path -> kv dtype -> head dim -> outcome (OK! when the result was wrong)."""
    grid: dict[str, dict[str, dict[str, str]]] = {}
    for o in observations:
        p = o.get("params") or {}
        outcome = str(o.get("outcome"))
        if outcome == "OK" and (o.get("metrics") or {}).get("correct") is False:
            outcome = "OK-but-wrong"
        grid.setdefault(p.get("path", "?"), {}).setdefault(p.get("kv_dtype", "?"), {})[str(p.get("head_dim"))] = (
            outcome)
    return {"outcomes": grid}
