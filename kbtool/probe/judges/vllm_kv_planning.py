"""Probe: vLLM's own KV-cache planning and start-up check, run on a CPU over every recorded model (issue 44).

`run` builds, for each model in records/models that kb can describe as vLLM's per-layer KV specs
(kbtool/solve/engines/vllm/pool.py `specs`: full, sliding-window, chunked-local, MLA and Mamba layers, and a
sparse-MLA layer's indexer key cache beside its latent), the specs of one tensor-parallel rank, and starts
probes/_vllm_kv_planning.py under the interpreter that has vLLM (KB_VLLM_PYTHON, else this one). That helper
runs vLLM's own engine-core start-up path on them (grouping, `get_kv_cache_configs` with its start-up check, the
scheduler's config, "GPU KV cache size" and "Maximum concurrency") at every point of a grid: available KV memory
x max_model_len x max_num_batched_tokens x async scheduling (in-flight batches) x, for Mamba hybrids, the
state-cache mode ("none", or "align" as prefix caching sets it) and prefill checkpoint blocks. Each point records
num_blocks, the KV cache groups (spec class, layers, block, page bytes; for a group of one type whose layers'
pages differ, UniformTypeKVCacheSpecs, each page size with its layers and the group's block bytes), tokens,
concurrency, and whether the start-up check passes, with vLLM's exact error text. From 0.32.0 a sparse-MLA
model's specs are first adjusted by their backends as the worker does (v1/worker/utils.py
customize_attention_spec).

The whole grid is written to tests/data/vllm/<version>/kv-planning.json.gz (KB_VLLM_RAW_DIR overrides the
folder); the evidence keeps its digest and counts. tests/solve/test_vllm_planning.py replays every point with kb's
own accounting (pool.groups, pool.report, pool.check) and must find 0 mismatches, without vLLM installed.

What this does not run: the model code that builds the specs (layer shapes come from kb's model records), the
block-size resolution (kb's block, widened for Mamba state as kbtool/solve/engines/vllm/mamba.py says, is the
input), the config resolution that picks a release's defaults (another probe's), and available memory itself
(weights, activation peak, CUDA graphs: a GPU's). No claim is judged: the evidence is data for the replay.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.spec import ProbeSpec

GIB = 1 << 30


# available KV memory per rank: from one that fits little to one that fits many long requests; 17.3e9 is the order of
# an H100's pool for a 27B model (the gemma-3-27b 128k case of issue 44)
AVAILABLE = [GIB, 4 * GIB, 17_300_000_000, 60 * GIB]


CONTEXTS = [4096, 32768, 131072]


BATCHED = [2048, 8192]  # vLLM's per-GPU defaults for vllm serve span 2048 to 16384 (engine/arg_utils.py)


SPEC = ProbeSpec(
    id="vllm-kv-planning",
    version=1,
    order=7,
    title="vLLM's KV-cache planning and start-up check over the recorded models (no GPU)",
    claims=[],
    requires={"gpu": False, "packages": ["vllm"]},
    timeout_s=1800,
    untestable="The vLLM KV-planning probe needs vLLM installed (pip install 'kbtool[engine]' or KB_VLLM_PYTHON).",
)


def points(spec: dict[str, Any], max_context: int | None) -> list[dict[str, Any]]:
    kinds = {g["type"] for g in spec["layers"]}
    windowed = bool(kinds & {"sliding", "chunked"})
    ctxs = sorted({min(c, max_context or c) for c in CONTEXTS})
    steps = [(b, a) for b in BATCHED for a in (False, True)] if windowed else [(8192, True)]
    modes: list[tuple[str | None, int | None]] = [(None, None)]
    if "mamba" in kinds:
        modes = [("none", 0), ("align", 0), ("align", 1)]
    out = []
    for mode, ckpt in modes:
        for ctx in ctxs:
            for batched, async_ in steps:
                for avail in AVAILABLE:
                    p: dict[str, Any] = {"available": avail, "max_model_len": ctx, "batched_tokens": batched,
                                         "async": async_}
                    if mode:
                        p.update(mamba_mode=mode, checkpoint_blocks=ckpt, prefix_caching=mode == "align")
                    out.append(p)
    return out


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    return []  # data for the replay (tests/solve/test_vllm_planning.py); no claim is judged


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    m = next((o.get("metrics") or {} for o in observations if o.get("outcome") == "OK"), {})
    return {k: m[k] for k in ("vllm", "models", "configurations", "points", "starts", "refuses", "exceptions")
            if k in m}
