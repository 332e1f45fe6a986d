"""The memory model: per-token KV bytes for each layer type, TP, weights, fit and max_ctx."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbtool.model import Model
from kbtool.solve.kvcache import UNBOUNDED_CTX, fit, kv_model, max_context, weight_bytes

SRC = [{"type": "seed", "seed": "fixture.txt"}]


def model(layers: list[dict[str, Any]], **kw: Any) -> Model:
    data = {"id": "m", "kind": "model", "name": "m", "family": "f", "parameters": kw.pop("parameters", 70 * 10**9),
            "weight_dtype": kw.pop("weight_dtype", "bf16"), "num_heads": 64, "head_dim": 128, "layers": layers,
            "sources": SRC, **kw}
    return Model.model_validate(data)


LLAMA70 = [{"type": "full", "count": 80, "kv_heads": 8, "head_dim": 128}]
DSV3 = [{"type": "mla", "count": 61, "kv_lora_rank": 512, "rope_dim": 64}]


def test_llama_70b_bf16_is_327680_bytes_per_token() -> None:
    assert kv_model(model(LLAMA70), "bf16").bytes_per_token() == 327_680


def test_llama_70b_fp8_halves() -> None:
    assert kv_model(model(LLAMA70), "fp8_e4m3").bytes_per_token() == 163_840


def test_deepseek_v3_bf16_is_70272_bytes_per_token_no_factor_two() -> None:
    assert kv_model(model(DSV3), "bf16").bytes_per_token() == 70_272


def test_flashmla_fp8_fixed_format() -> None:
    kv = kv_model(model(DSV3), "fp8_e4m3", mla_format="flashmla-fp8")
    assert kv.bytes_per_token() == 656 * 61
    plain = kv_model(model(DSV3), "fp8_e4m3")
    assert plain.bytes_per_token() == 576 * 61


def test_different_k_and_v_head_dims() -> None:
    kv = kv_model(model([{"type": "full", "count": 4, "kv_heads": 4, "head_dim": 192, "head_dim_v": 128}]), "bf16")
    assert kv.bytes_per_token() == 4 * 4 * (192 + 128) * 2


def test_tensor_parallel_divides_heads_never_below_one() -> None:
    m = model(LLAMA70)
    assert kv_model(m, "bf16", tp=4).bytes_per_token() == 327_680 / 4
    assert kv_model(m, "bf16", tp=16).bytes_per_token() == 2 * 80 * 1 * 128 * 2  # 8 heads over 16 GPUs: 1 each
    assert kv_model(model(DSV3), "bf16", tp=8).bytes_per_token() == 70_272  # the latent is replicated


def test_sliding_window_is_capped() -> None:
    m = model([{"type": "sliding", "count": 52, "kv_heads": 16, "head_dim": 128, "window": 1024},
               {"type": "full", "count": 10, "kv_heads": 16, "head_dim": 128}])
    kv = kv_model(m, "bf16")
    per_sliding = 2 * 52 * 16 * 128 * 2
    per_full = 2 * 10 * 16 * 128 * 2
    assert kv.per_sequence(512) == (per_sliding + per_full) * 512
    assert kv.per_sequence(131072) == per_sliding * 1024 + per_full * 131072


def test_linear_state_is_fixed_per_sequence() -> None:
    m = model([{"type": "full", "count": 12, "kv_heads": 2, "head_dim": 256},
               {"type": "linear", "count": 36, "state_bytes": 1_097_728}])
    kv = kv_model(m, "bf16")
    assert kv.bytes_per_token() == 2 * 12 * 2 * 256 * 2 == 24_576
    assert kv.per_sequence(10) - kv.per_sequence(9) == 24_576
    assert kv.fixed == 36 * 1_097_728


def test_weights_from_parameters_and_dtype_or_recorded_bytes() -> None:
    assert weight_bytes(model(LLAMA70)) == 140 * 10**9
    assert weight_bytes(model(DSV3, parameters=671 * 10**9, weight_dtype="fp8")) == 671 * 10**9
    assert weight_bytes(model(LLAMA70, weight_bytes=123)) == 123


def test_fit_numbers_and_formula() -> None:
    f = fit(model(LLAMA70, weight_dtype="fp8"), "bf16", 80 * 10**9, 131072)
    assert f.weights_bytes == 70 * 10**9
    assert f.available_bytes == 72 * 10**9 - 70 * 10**9
    assert f.kv_bytes == 327_680 * 131072
    assert f.fits is False
    assert f.max_ctx == (2 * 10**9) // 327_680
    assert "327,680 B/token" in f.formula and "0.9" in f.formula


def test_weights_too_big_gives_zero_ctx() -> None:
    f = fit(model(LLAMA70, parameters=405 * 10**9), "bf16", 80 * 10**9, 131072)
    assert f.fits is False and f.max_ctx == 0 and f.available_bytes < 0
    assert any("weights alone" in n for n in f.notes)


def test_utilization_flag_changes_available() -> None:
    a = fit(model(LLAMA70, parameters=10**9), "bf16", 80 * 10**9, 1024, utilization=0.5)
    assert a.available_bytes == 40 * 10**9 - 2 * 10**9


def test_unbounded_when_nothing_grows() -> None:
    m = model([{"type": "linear", "count": 4, "state_bytes": 1000}], parameters=1000)
    assert fit(m, "bf16", 10**9, 1024).max_ctx == UNBOUNDED_CTX


@given(st.integers(1, 64), st.integers(1, 10**7), st.integers(1, 4096))
def test_max_context_is_the_largest_that_fits(batch: int, available: int, window: int) -> None:
    kv = kv_model(model([{"type": "full", "count": 1, "kv_heads": 1, "head_dim": 8},
                         {"type": "sliding", "count": 1, "kv_heads": 1, "head_dim": 8, "window": window}]), "bf16")
    n = max_context(kv, available, batch)
    if n == 0:
        assert batch * kv.per_sequence(1) > available
    else:
        assert batch * kv.per_sequence(n) <= available < batch * kv.per_sequence(n + 1)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "nvfp4"])
def test_every_kv_dtype_sizes(dtype: str) -> None:
    assert kv_model(model(LLAMA70), dtype).bytes_per_token() > 0
