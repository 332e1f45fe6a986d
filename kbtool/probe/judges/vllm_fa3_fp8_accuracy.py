"""Probe: FA-3 FP8 accuracy against context length, as vLLM ships FA-3 (vllm-flash-attn), on sm90.

The inputs and references are those of probes/fp8_accumulation.py (probes/_fp8_gpu.py make_inputs: a needle test
whose values share a common component, quantized once to e4m3 per tensor), so the curves compare with that probe's
switch kernel (in-place vs promoted wgmma accumulation) and FlashInfer's FA3-backend FP8 path:
  * error of the fork's FP8 forward against fp64 attention on the very fp8 bytes it read (dequantized), from 4K to
    128K keys (256K at head dim 128), at head dims 64/128/256 and one or eight query heads per KV head (the eight
    carry the same queries, so the packed-GQA kernel path runs with the same reference);
  * the part of that error that P's rounding to e4m3 alone explains (FA-3 scales P by 2^8 before the cast): a
    kernel whose P.V sums truncate in the tensor cores adds error on top of it that grows with context;
  * needle retrieval against the fp64 reference's; a bf16 FA-3 run of the unquantized inputs as the baseline.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges import fp8_accumulation as acc
from kbtool.probe.spec import ProbeSpec

LIB = "vllm-flash-attn-3"


CLAIM_SEED = acc.CLAIM_FA3


CLAIM_FORK = "vllm-fa3-fp8-two-level-accumulation-on"


SPEC = ProbeSpec(
    id="vllm-fa3-fp8-accuracy",
    version=1,
    order=43,
    title="FA-3 (vLLM's fork) FP8 error against context length",
    claims=[CLAIM_SEED, CLAIM_FORK],
    requires={"archs": ["sm90"], "packages": ["torch", LIB]},
    timeout_s=300,
    untestable="FA-3 here is vLLM's build inside the vllm wheel (see probes/vllm_fa3.py).",
)


def series(observations: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """{"fp8 hd128 gqa1": {ctx: metrics}, "bf16 hd128 gqa1": ...} over the cases that ran."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for o in observations:
        p = o.get("params") or {}
        if o.get("outcome") != "OK":
            continue
        out.setdefault(f"{p['path']} hd{p['head_dim']} gqa{p['gqa']}", {})[int(p["ctx"])] = o.get("metrics") or {}
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def _flat(runs: dict[int, dict[str, Any]]) -> tuple[bool, bool, str]:
    """(holds at long context, degrades like a truncating accumulator, detail) for one fp8 series."""
    n0, n1 = min(runs), max(runs)
    e = {n: r["total"]["rel_err"] for n, r in runs.items()}
    qo = runs[n1].get("quant_only_p256", {}).get("rel_err", 0.0)
    excess = max(0.0, e[n1] - qo)
    drop = runs[n1].get("ref64_retrieval", 1.0) - runs[n1].get("retrieval", 0.0)
    holds = excess < acc.MATERIAL_ERR and e[n1] <= 2 * max(e[n0], acc._TINY) + acc.MATERIAL_ERR \
        and drop < acc.RETRIEVAL_DROP
    degrades = (excess >= acc.MATERIAL_ERR and e[n1] >= acc.GROWTH * max(e[n0], acc._TINY)) \
        or drop >= acc.RETRIEVAL_DROP
    detail = (f"{e[n0]:.2e} at {n0} keys, {e[n1]:.2e} at {n1} (P rounding alone {qo:.2e}; retrieval "
              f"{runs[n1].get('retrieval', float('nan')):.3f} vs {runs[n1].get('ref64_retrieval', float('nan')):.3f})")
    return holds, degrades, detail


def fp8_series(observations: list[dict[str, Any]]) -> tuple[dict[str, dict[int, dict[str, Any]]], list[int]]:
    """The fp8 series with two points or more, and every context they ran at."""
    fp8 = {k: v for k, v in series(observations).items() if k.startswith("fp8") and len(v) >= 2}
    return fp8, sorted({n for v in fp8.values() for n in v})


def flatness(fp8: dict[str, dict[int, dict[str, Any]]]) -> tuple[bool, bool, str]:
    """(every series holds flat, some series degrades, the per-series words) over `fp8`'s series."""
    judged = {k: _flat(v) for k, v in fp8.items()}
    parts = "; ".join(f"{k}: {d}" for k, (_, _, d) in judged.items())
    return all(h for h, _, _ in judged.values()), any(dg for _, dg, _ in judged.values()), parts


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    sm = env.get("architecture")
    version = (env.get("libraries") or {}).get(LIB)
    fp8, ctx = fp8_series(observations)
    dims = sorted({int(k.split()[1][2:]) for k in fp8})
    scope = {"sm": sm, LIB: version, "phase": "prefill", "dtypes": ["fp8_e4m3"], "head_dims": dims, "ctx": ctx}
    if not fp8 or max(ctx) < 100_000:
        why = "no fp8 series ran to 100K keys"
        return [{"claim": c, "verdict": "inconclusive", "scope": scope, "detail": why} for c in SPEC.claims]
    holds, degrades, parts = flatness(fp8)
    if holds:
        verdict = "confirmed"
    elif degrades:
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    fork = {"claim": CLAIM_FORK, "verdict": verdict, "scope": scope,
            "detail": f"FP8 error against fp64 on the same fp8 inputs, per series: {parts}"}
    seed_verdict = {"confirmed": "confirmed", "contradicted": "contradicted"}.get(verdict, "inconclusive")
    seed = {"claim": CLAIM_SEED, "verdict": seed_verdict, "scope": scope,
            "detail": ("on a build with two-level accumulation (vLLM's fork): FP8 accuracy "
                       + ("holds" if verdict == "confirmed" else "does not hold" if verdict == "contradicted"
                          else "is unclear") + f" to {max(ctx)} keys; {parts}. The unpromoted side is shown by "
                       "hopper-fp8-accumulator-promotion and flashinfer-fa3-fp8-long-context-accuracy")}
    return [seed, fork]


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    curves = {k: [{"ctx": n, "rel_err": m["total"]["rel_err"], "bias": m["total"]["bias"],
                   "retrieval": m.get("retrieval"), "ref64_retrieval": m.get("ref64_retrieval"),
                   "p_rounding_rel_err": (m.get("quant_only_p256") or {}).get("rel_err")} for n, m in v.items()]
              for k, v in series(observations).items()}
    measured = {}
    for k, v in series(observations).items():
        if k.startswith("fp8") and 131072 in v:
            d, g = k.split()[1][2:], k.split()[2][3:]
            measured[f"fa3_fp8_rel_err_ctx131072_hd{d}_gqa{g}"] = {
                "value": v[131072]["total"]["rel_err"], "unit": "1", "ctx": 131072, "head_dim": int(d), "gqa": int(g),
                "reference": "fp64 attention on the same fp8 inputs",
                "library": f"{LIB} {env.get('libraries', {}).get(LIB)}"}
    return {"curves": curves, "measured": measured,
            "thresholds": {"material_err": acc.MATERIAL_ERR, "growth": acc.GROWTH,
                           "retrieval_drop": acc.RETRIEVAL_DROP}}
