"""vLLM 0.34.0's extensible KV cache keeps its margin free only where the utilization does not already: the cache
gets min(utilization x memory - non-KV use, headroom - margin) less the transient peak
(v1/worker/extensible_kv_cache.py:613-617 at 62d4bc3c7), so at 0.9 of a 24 GiB card (2.4 GiB left) the 1 GiB floor
costs nothing, and at 0.99 (0.24 GiB left) it costs the rest."""

from __future__ import annotations

import json

from tests.util import run_kb

ASK = ["query", "--gpu", "rtx-3090", "--model", "qwen3-8b", "--ctx", "8k", "--engine", "vllm", "--vllm", "0.34.0",
       "--json"]


def _memory(*extra: str) -> dict:
    r = run_kb(*ASK, *extra)
    assert r.code in (0, 1), r.err
    return json.loads(r.out)["memory"]


def test_the_margin_takes_only_what_the_utilization_leaves() -> None:
    at90, at99, at100 = _memory("--util", "0.9"), _memory("--util", "0.99"), _memory()
    cap = at100["capacity_bytes"]
    # the same weights and non-KV reserve at every utilization; what differs is the margin's binding part
    base = at90["reserve_bytes"]
    margin = at100["reserve_bytes"] - base  # at the default 1.0 the whole margin binds
    assert margin >= 1 << 30
    assert at99["reserve_bytes"] - base == margin - (cap - int(cap * 0.99))
