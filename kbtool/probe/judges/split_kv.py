"""Probe: does splitting the KV sequence across SMs (split-KV, flash-decoding) matter for FlashInfer decode?

Paged decode (BatchDecodeWithPagedKVCacheWrapper, bf16, 32 query / 8 KV heads, head dim 128, page 16) at batch 1
and 32 over 8K, 32K and 128K tokens, each planned twice: FlashInfer's own split-KV choice and disable_split_kv=True.
Both decode paths (CUDA cores and tensor cores). Each case times 20 runs with CUDA events after 5 warm-ups (median),
profiles one run (a split plan launches a merge kernel; a pair counts only where it did and the unsplit plan did
not, else the knob did not take effect there) and checks sequence 0 against an fp32 reference.

Judged by the speedup of split over unsplit at the same shape: "essential" at batch 1 from 32K on is read as at
least 2x at every such length (contradicted below 1.2x); "no further gain" at batch 32 as at most 1.1x at every
length (contradicted from 1.3x).

Version 3 pins backend="fa2" (FlashInfer 0.7's "auto" may pick cuDNN for an unpinned plan). At batch 32
FlashInfer's planner does not split on the tensor-core path (version 2 saw no merge kernel in either plan) and the
CUDA-core plan launched the merge kernel with and without disable_split_kv, so no pair showed a split and the claim
could not be read. Version 3 adds, at batch 32 on the tensor-core path, plans with a forced split (`fixed_split_size`,
in pages, which decode.py accepts only with tensor cores): KV_CHUNKS chunks per request. A forced pair counts like a
split pair: the forced plan launched the merge kernel and the unsplit plan did not.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="split-kv",
    version=3,
    order=46,
    title="FlashInfer decode with and without split-KV",
    claims=["split-kv-needed-small-batch-long-context-decode", "split-kv-unneeded-batch-32"],
    requires={"archs": None, "packages": ["torch", "flashinfer"]},
    timeout_s=240,
    rejudges=(2,),  # version 3 only added the forced-split cases; earlier cases kept their parameters
)


NEEDED, NOT_NEEDED = (2.0, 1.2), (1.1, 1.3)


def _speedups(observations: list[dict[str, Any]], batch: int) -> dict[int, float]:
    """Unsplit over split time per length, for pairs that show the knob took effect: the split plan launched a
    merge kernel (the partial results of the KV chunks are merged) and the unsplit plan did not. The split plan
    is FlashInfer's own choice or a forced split (fixed_split_pages); the best of the decode paths (CUDA cores,
    tensor cores) and split kinds that qualifies is kept."""
    ms: dict[tuple[int, bool, str], tuple[float, bool]] = {}
    for o in observations:
        p, m = o.get("params") or {}, o.get("metrics") or {}
        if p.get("batch") == batch and o.get("outcome") == "OK" and m.get("correct") and isinstance(m.get("ms"), float):
            kind = "forced" if p.get("fixed_split_pages") else "split" if p["split"] else "unsplit"
            ms[(int(p["ctx"]), bool(p.get("tensor_cores")), kind)] = (float(m["ms"]), bool(m.get("merge_kernel")))
    out: dict[int, float] = {}
    for (n, tc, kind), (t_split, merged) in ms.items():
        other = ms.get((n, tc, "unsplit"))
        if kind == "unsplit" or other is None or not merged or other[1]:
            continue
        out[n] = max(out.get(n, 0.0), other[0] / t_split)
    return out


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    scope = {"sm": env.get("architecture"), "flashinfer": (env.get("libraries") or {}).get("flashinfer"),
             "phase": "decode"}
    out = []
    one = {n: x for n, x in _speedups(observations, 1).items() if n >= 32768}
    text = ", ".join(f"{n // 1024}K {x:.2f}x" for n, x in sorted(one.items()))
    if len(one) < 2:
        verdict = "inconclusive"
    elif min(one.values()) >= NEEDED[0]:
        verdict = "confirmed"
    elif min(one.values()) < NEEDED[1]:
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    out.append({"claim": SPEC.claims[0], "verdict": verdict, "scope": {**scope, "batch": 1},
                "detail": f"split-KV over unsplit at batch 1: {text or 'no timed pair'}"})
    many = _speedups(observations, 32)
    text = ", ".join(f"{n // 1024}K {x:.2f}x" for n, x in sorted(many.items()))
    if len(many) < 2:
        verdict = "inconclusive"
    elif max(many.values()) <= NOT_NEEDED[0]:
        verdict = "confirmed"
    elif max(many.values()) >= NOT_NEEDED[1]:
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    out.append({"claim": SPEC.claims[1], "verdict": verdict, "scope": {**scope, "batch": 32},
                "detail": f"split-KV over unsplit at batch 32: {text or 'no timed pair'}"})
    return out


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    return {"speedup_split_over_unsplit": {str(b): {str(n): x for n, x in _speedups(observations, b).items()}
                                           for b in (1, 32)}}
