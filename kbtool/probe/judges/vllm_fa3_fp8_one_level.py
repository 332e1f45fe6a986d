"""Probe: FA-3 FP8 error against context length with ONE-level accumulation (the half of
fa3-fp8-long-context-two-level-accumulation that says what happens without the fix).

The build is vLLM's FA-3 fork (vllm-project/flash-attention @ 803020a8, the commit whose sources match the 0.24.0
wheel) compiled on the GPU host by probes/_fa3_one_level_build.py with FLASHATTENTION_DISABLE_FP8_TWO_LEVEL_ACCUMULATION
(the define hopper/utils.h:238 tests; the fork's hopper/setup.py:51 reads it from the environment) and, to fit one
command, only head dim 128 (bf16 and e4m3, PackGQA, varlen, no split/paged/softcap/local). It is loaded as
vllm.vllm_flash_attn._vllm_fa3_C behind the 0.24.0 wheel's own Python interface, so each case is exactly the call
and inputs of probes/vllm_fa3_fp8_accuracy.py (the two-level build's curve), head dim 128, one and eight query heads.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges import fp8_accumulation as acc
from kbtool.probe.judges import vllm_fa3_fp8_accuracy as two
from kbtool.probe.spec import ProbeSpec

LIB = "vllm-flash-attn-3-one-level"


CLAIM = "fa3-fp8-one-level-accumulation-loses-accuracy"


SPEC = ProbeSpec(
    id="vllm-fa3-fp8-one-level",
    version=1,
    order=46,
    title="FA-3 (vLLM's fork built without two-level accumulation) FP8 error against context length",
    claims=[CLAIM],
    requires={"archs": ["sm90"], "packages": ["torch", LIB]},
    timeout_s=300,
    untestable="The one-level build is compiled on the GPU host (probes/_fa3_one_level_build.py); no wheel ships it.",
)


series = two.series


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Confirmed where an fp8 series degrades as a truncating accumulator does (error growing with the keys beyond
    what P's rounding explains, or retrieval dropping); contradicted where every series holds flat to 100K+."""
    sm = env.get("architecture")
    version = (env.get("libraries") or {}).get(LIB)
    fp8, ctx = two.fp8_series(observations)
    scope = {"sm": sm, LIB: version, "phase": "prefill", "dtypes": ["fp8_e4m3"], "head_dims": [128], "ctx": ctx}
    if not fp8 or max(ctx) < 100_000:
        return [{"claim": CLAIM, "verdict": "inconclusive", "scope": scope, "detail": "no fp8 series ran to 100K keys"}]
    holds, degrades, parts = two.flatness(fp8)
    if degrades:
        verdict = "confirmed"
    elif holds:
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    return [{"claim": CLAIM, "verdict": verdict, "scope": scope,
             "detail": f"one-level FA-3 FP8 error against fp64 on the same fp8 inputs, per series: {parts} "
                       f"(thresholds: material {acc.MATERIAL_ERR}, growth x{acc.GROWTH})"}]


summarize = two.summarize
