"""`--dtype float32` under vLLM (issue 44): kv_cache_dtype auto stores the cache in the model's dtype (vLLM 0.33.0
vllm/utils/torch_utils.py:519-525), so the KV takes 4 bytes per element; a 2-byte checkpoint is upcast as it
loads (vllm/config/model.py:2509-2510, "Upcasting"); FLASH_ATTN refuses float32 queries and TRITON_ATTN, whose
supported_dtypes hold float32 (v1/attention/backends/triton_attn.py:321-325), runs them."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool import query_cli
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve

LINE = "vllm serve Qwen/Qwen3-8B --max-model-len 32768"


@pytest.fixture(scope="module")
def img() -> Any:
    return query_cli.image()


def test_float32_doubles_kv_and_weights_against_the_bf16_line(img: Any) -> None:
    half = solve(img, build_query(gpu="h100", vllm_args=LINE))
    full = solve(img, build_query(gpu="h100", vllm_args=LINE + " --dtype float32"))
    assert half.memory is not None and full.memory is not None
    model = img.model("qwen3-8b")
    per_elem = 2 * sum(g.count * g.kv_heads * g.head_dim for g in model.layers)  # K and V, every layer
    assert half.memory.kv_bytes_per_token == per_elem * 2
    assert full.memory.kv_bytes_per_token == per_elem * 4
    assert full.memory.weights_bytes == pytest.approx(2 * half.memory.weights_bytes, rel=1e-6)
    assert any("Upcasting" in n for n in full.memory.notes), full.memory.notes
    assert full.assumed["kv"].startswith("fp32")


def test_float32_selects_a_backend_that_takes_float32_queries(img: Any) -> None:
    a = solve(img, build_query(gpu="h100", vllm_args=LINE + " --dtype float32"))
    assert a.engine is not None
    assert a.engine["selected"] == "vllm-triton-attn", a.engine["refused"]
    refused = dict(a.engine["refused"])
    assert "fp32" in refused["FLASH_ATTN"], refused

