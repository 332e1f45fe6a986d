"""SGLang's static memory fraction when --mem-fraction-static is not given (0.5.23
sglang/srt/arg_groups/memory_hook.py:281-343 and reserve_for_graph_mb :357-399; 0.5.17 server_args.py
_handle_gpu_memory_settings): round((gpu_mem - reserved) / gpu_mem, 3), every constant from the resolution record."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def prefill_capture_sizes(max_bs: int) -> list[int]:
    """The prefill CUDA-graph capture sizes up to max_bs (cuda_graph_hook.py:480-497)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


def mem_fraction(env: dict[str, Any], c: dict[str, Any]) -> float:
    gpu = env.get("gpu_mem_mib") or 0
    if not gpu:
        return float(c["unknown_gpu_fraction"])
    chunk = env.get("chunked_prefill_size") or 0
    tp, pp = env.get("tp") or 1, 1
    tokens = max(chunk, int(c["activation_tokens_min"])) if chunk > 0 else max(16384, int(c["activation_tokens_min"]))
    reserved = c["reserve_floor_mib"] + tokens * c["activation_mib_per_token"] + tp * pp * c["parallel_mib_per_gpu"]
    graph = 0.0
    if env.get("decode_graph") != "disabled":
        graph += (env.get("decode_graph_max_bs") or 0) * c["decode_graph_mib_per_bs"]
    if env.get("prefill_graph") != "disabled":
        if env.get("attention") in ("mla", "sparse-mla"):
            graph += c["prefill_graph_mla_mib"]
        else:
            graph += len(prefill_capture_sizes(chunk)) * c["prefill_graph_mib_per_size"]
    reserved += graph
    if gpu > c["large_gpu_mib"]:
        reserved = max(reserved, c["reserve_min_mib_over_60g"])
    return round(float(gpu - reserved) / gpu, 3)
