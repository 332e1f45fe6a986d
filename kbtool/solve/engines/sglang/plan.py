"""SGLang's KV pool planning at start-up, replayed: from the memory free before and after the weights load to
max_total_num_tokens, max_running_requests, the sliding-window and Mamba splits, or the error SGLang raises.

Followed line by line from SGLang 0.5.23 (0.5.17 is the same arithmetic at other lines), and held to SGLang's own
planner at every recorded point by tests/solve/test_sglang_pool_replay.py (the sglang-pool probe runs SGLang's
KVCacheConfigurator on a CPU: probes/_sglang_pool.py, recordings tests/data/sglang/<release>/pool-*.json.gz):
- mem_cache/kv_cache_configurator.py `_profile_available_bytes` (:2990-3060): rest = available - pre x (1 -
  mem_fraction_static) GiB; rest <= 0 is "Loaded weights leave no GPU memory for the KV cache ...";
- `_handle_max_mamba_cache` (:3229-3410), models with Mamba / linear-attention layers: the state pool takes
  rest x r / (1 + r) (r = --mamba-full-memory-ratio, 0.9), in whole per-request slots less a padding slot; none
  left is "Not enough GPU memory for hybrid (mamba/linear-attention) state cache ...";
- model_executor/pool_configurator.py DefaultPoolConfigurator (:219-653): tokens = bytes // cell, whole pages;
  HybridSWAPoolConfigurator (:656-917): cell = full layers + swa_full_tokens_ratio x sliding layers, the SWA pool
  ratio x the full one, refused when it cannot hold the window plus a page; MemoryPoolConfig (:73-100): no token
  left is "Not enough memory. Please try to increase --mem-fraction-static.";
- `resolve_max_num_reqs` (:3119-3172): clamp(tokens / context_len x 512, 2048, 4096), at most tokens // 2 (or the
  given --max-running-requests), Mamba models at most state slots // (3 + 2 with the extra-buffer strategy and
  overlap scheduling); none is "Hybrid (mamba/linear-attention) state cache is too small to serve any requests".
Arithmetic in SGLang's own order and types (GiB floats, then bytes), so the counts are SGLang's to the token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1 << 30
MAMBA_BASE_SLOTS = 3  # kv_cache_configurator.py:227 MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
TRY_STATE = ("Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, (3) reduce "
             "--speculative-num-draft-tokens, or (4) use GPUs with more memory.")


@dataclass
class Cell:
    """Bytes per token of SGLang's pool: `bytes` of max_total_num_tokens; for hybrid sliding-window models the full
    and SWA parts (per token of each pool) and the window; for Mamba / linear-attention hybrids the state bytes per
    request slot."""

    bytes: float
    full_bytes: int = 0
    swa_bytes: int = 0
    swa_ratio: float = 0.0
    window: int | None = None
    state_per_request: int = 0
    mamba_memory_ratio: float = 0.9
    mamba_slots_per_request: int = MAMBA_BASE_SLOTS


@dataclass
class Planned:
    """What SGLang's start-up plans, or its error (`error` is the exception type, `message` its exact text)."""

    tokens: int = 0
    max_running_requests: int = 0
    full_tokens: int | None = None
    swa_tokens: int | None = None
    state_slots: int | None = None
    error: str | None = None
    message: str | None = None
    rest_bytes: int = 0


def plan(cell: Cell, *, page_size: int, mem_fraction_static: float, pre_gib: float, available_gib: float,
         context_len: int, max_running_requests: int | None = None,
         max_total_tokens: int | None = None, reserve_gib: float = 0.0) -> Planned:
    """SGLang's `_resolve_memory_pool_config(pre)` with `available_gib` free after the load (see the docstring)."""
    rest = available_gib - pre_gib * (1 - mem_fraction_static) - reserve_gib  # reserve: multimodal embedding cache
    slots = None
    if cell.state_per_request:
        per = cell.state_per_request
        budget = rest * cell.mamba_memory_ratio / (1 + cell.mamba_memory_ratio)
        slots = int((budget * GIB - 0 - per) // per)
        if slots <= 0:
            return Planned(error="RuntimeError", message=(
                "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
                f"max_mamba_cache_size={slots} (total_rest_memory={rest:.2f} GB, mamba_cache_per_req="
                f"{per / (1 << 20):.2f} MB). " + TRY_STATE))
        rest = rest - (slots + 1) * per / GIB
    if rest <= 0:  # after the state pool: kv_cache_configurator.py:3034-3049
        minimum = 1 - available_gib / pre_gib
        suggested = math.ceil(minimum * 1000) / 1000
        return Planned(error="ValueError", message=(
            f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={mem_fraction_static}"
            f". Raise --mem-fraction-static above {suggested:.3f} (minimum viable = 1 - available/pre = "
            f"{minimum:.4f}). If using speculative decoding, draft weights are now counted."))
    avail = int(rest * GIB)
    out = Planned(rest_bytes=avail, state_slots=slots)
    # the hybrid SWA cell is a float (ratio x sliding layers), the default one whole bytes
    tokens = int(avail // cell.bytes) if cell.swa_bytes else avail // int(cell.bytes) if cell.bytes else 0
    tokens = tokens // page_size * page_size
    if max_total_tokens is not None:
        tokens = min(tokens, max_total_tokens) // page_size * page_size
    if cell.swa_bytes:
        swa = int(tokens * cell.swa_ratio) // page_size * page_size
        out.full_tokens, out.swa_tokens = tokens, swa
        if cell.window is not None and cell.window + page_size >= swa:
            return Planned(error="ValueError", message=(
                f"SWA pool ({swa} tokens) cannot hold even one request: the prefill admission floor is "
                f"sliding_window_size ({cell.window}) + page_size ({page_size}). Increase --swa-full-tokens-ratio "
                "or the total KV budget."))
    if tokens <= 0:
        return Planned(error="RuntimeError", message="Not enough memory. Please try to increase "
                       "--mem-fraction-static.")
    out.tokens = tokens
    estimated = max(min(int(tokens / context_len * 512), 4096), 2048)
    reqs = min(max(1, max_running_requests), tokens // 2) if max_running_requests else min(estimated, tokens // 2)
    if slots is not None:
        ratio = cell.mamba_slots_per_request
        reqs = min(reqs, slots // ratio)
        if reqs <= 0:
            return Planned(error="RuntimeError", message=(
                "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
                f"max_mamba_cache_size={slots}, mamba_ratio={ratio}, resulting max_num_reqs={reqs}. Try: (1) reduce "
                "--max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory."))
    out.max_running_requests = reqs
    return out
