"""The memory model: vLLM's KV spec arithmetic per layer type, TP, weights at a deployed format, the budget."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbtool.model import Model
from kbtool.solve.engines.vllm import budget, kvcache
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.engines.vllm.kvcache import UNBOUNDED_CTX, max_context, state_page
from kbtool.solve.weights import weight_bytes

SRC = [{"type": "seed", "seed": "fixture.txt"}]
TOKENS, SEQS = 8192, 1024  # vLLM 0.33.0's vllm serve defaults on an 80 GiB H100 (records/engine-releases)


def fit(*args: Any, **kwargs: Any) -> Any:
    return budget.fit(*args, **{"batched_tokens": TOKENS, "max_num_seqs": SEQS, **kwargs})


def kv_model(*args: Any, **kwargs: Any) -> Any:
    return kvcache.kv_model(*args, **{"batched_tokens": TOKENS, **kwargs})


def model(layers: list[dict[str, Any]], **kw: Any) -> Model:
    data = {"id": "m", "kind": "model", "name": "m", "family": "f", "parameters": kw.pop("parameters", 70 * 10**9),
            "weight_dtype": kw.pop("weight_dtype", "bf16"), "num_heads": 64, "head_dim": 128, "layers": layers,
            "sources": SRC, **kw}
    return Model.model_validate(data)


LLAMA70 = [{"type": "full", "count": 80, "kv_heads": 8, "head_dim": 128}]
DSV3 = [{"type": "mla", "count": 61, "kv_lora_rank": 512, "rope_dim": 64}]
DSV32 = [{"type": "mla", "count": 61, "kv_lora_rank": 512, "rope_dim": 64, "index_head_dim": 128,
          "index_n_heads": 64}]


def test_llama_70b_bf16_is_327680_bytes_per_token() -> None:
    assert kv_model(model(LLAMA70), "bf16").bytes_per_token() == 327_680


def test_llama_70b_fp8_halves() -> None:
    assert kv_model(model(LLAMA70), "fp8_e4m3").bytes_per_token() == 163_840


def test_nvfp4_packs_half_a_byte_plus_one_scale_byte_per_16() -> None:
    # vLLM FullAttentionSpec nvfp4: per head dim/2 data bytes + dim/16 scale bytes, for K and for V
    assert kv_model(model(LLAMA70), "nvfp4").bytes_per_token() == 80 * 8 * 2 * (64 + 8)


def test_deepseek_v3_bf16_is_70272_bytes_per_token_no_factor_two() -> None:
    assert kv_model(model(DSV3), "bf16").bytes_per_token() == 70_272
    assert kv_model(model(DSV3), "fp8_e4m3").bytes_per_token() == 576 * 61  # dense MLA: plain fp8 latent


def _shipped_formats() -> dict[str, tuple[int, str | None]]:
    """The KV formats of the shipped kernel records, as the solver's image carries them."""
    from kbtool.solve.imagebuild import image_of
    from tests.util import RECORDS, load_kb

    return image_of(load_kb(RECORDS)).kv_formats


def test_sparse_mla_fp8_is_fp8_ds_mla_plus_the_indexer() -> None:
    formats = _shipped_formats()
    assert formats["fp8_ds_mla"][0] == 512 + 4 * 4 + 64 * 2  # FlashMLA README: e4m3 latent, fp32 scales, bf16 rope
    kv = kv_model(model(DSV32), "fp8_e4m3", formats=formats)
    assert kv.bytes_per_token() == 61 * 656 + 61 * 132 == 48_068
    assert "README.md:118" in kv.terms[0].text
    assert kv_model(model(DSV32), "bf16", formats=formats).bytes_per_token() == 61 * 1152 + 61 * 132  # uint8 indexer
    assert kv_model(model(DSV3), "fp8_e4m3", mla_format="fp8_ds_mla", formats=formats).bytes_per_token() == 61 * 656


def test_an_unsized_kv_format_is_a_plain_latent_with_a_note() -> None:
    kv = kv_model(model(DSV32), "fp8_e4m3")  # no records: the layout's size is unknown
    assert kv.bytes_per_token() == 61 * 576 + 61 * 132
    assert any("fp8_ds_mla" in n and "not in the records" in n for n in kv.notes)


def test_different_k_and_v_head_dims() -> None:
    kv = kv_model(model([{"type": "full", "count": 4, "kv_heads": 4, "head_dim": 192, "head_dim_v": 128}]), "bf16")
    assert kv.bytes_per_token() == 4 * 4 * (192 + 128) * 2


def test_tensor_parallel_divides_heads_never_below_one() -> None:
    m = model(LLAMA70)
    assert kv_model(m, "bf16", tp=4).bytes_per_token() == 327_680 / 4
    assert kv_model(m, "bf16", tp=16).bytes_per_token() == 2 * 80 * 1 * 128 * 2  # 8 heads over 16 GPUs: 1 each
    assert kv_model(model(DSV3), "bf16", tp=8).bytes_per_token() == 70_272  # the latent is replicated


def test_full_attention_holds_whole_blocks() -> None:
    kv = kv_model(model(LLAMA70), "bf16")
    assert kv.per_sequence(16) == kv.per_sequence(1) == 327_680 * 16
    assert kv.per_sequence(17) == 327_680 * 32


def test_sliding_window_holds_w_minus_1_plus_batched_tokens_plus_a_block() -> None:
    """Gemma 3 27B's local layers at 8,192 batched tokens: 3.93 GB per sequence, not 0.44 GB (issue 19)."""
    m = model([{"type": "sliding", "count": 52, "kv_heads": 16, "head_dim": 128, "window": 1024},
               {"type": "full", "count": 10, "kv_heads": 16, "head_dim": 128}])
    kv = kv_model(m, "bf16", batched_tokens=8192)
    per_sliding = 2 * 52 * 16 * 128 * 2
    per_full = 2 * 10 * 16 * 128 * 2
    held = (-(-(1024 - 1 + 8192) // 16) + 1) * 16  # (cdiv(min(W - 1 + T, ctx), block) + 1) blocks
    assert kv.per_sequence(131072) == per_sliding * held + per_full * 131072
    assert round(per_sliding * held / 1e9, 2) == 3.93
    assert kv.per_sequence(512) == (per_sliding + per_full) * 512 + per_sliding * 16  # the extra block


def test_chunked_local_attention_holds_chunk_plus_batched_tokens() -> None:
    m = model([{"type": "chunked", "count": 36, "kv_heads": 8, "head_dim": 128, "chunk": 8192}])
    kv = kv_model(m, "bf16", batched_tokens=2048)
    assert kv.per_sequence(1 << 20) == 36 * 8 * 256 * 2 * (8192 + 2048)


def test_gated_delta_net_state_page_and_hybrid_padding() -> None:
    """Qwen3-Next: 1,097,728 B per layer in bf16; vLLM raises the attention block to 544 tokens and pads."""
    state = [{"name": "conv", "shape": [8192, 3], "tp_dim": 0, "dtype": "bf16"},
             {"name": "recurrent", "shape": [32, 128, 128], "tp_dim": 0, "dtype": "bf16"}]
    assert state_page(state, 1) == 1_097_728
    assert state_page(state, 2) == 1_097_728 // 2
    m = model([{"type": "full", "count": 12, "kv_heads": 2, "head_dim": 256},
               {"type": "linear", "count": 36, "state": state}])
    kv = kv_model(m, "bf16")
    attn_page_1 = 2 * 2 * 256 * 2  # one layer's bytes per token
    assert kv.block == 16 * -(-1_097_728 // (16 * attn_page_1)) == 544
    assert kv.fixed() == 36 * 544 * attn_page_1
    assert kv.bytes_per_token() == 12 * attn_page_1 == 24_576


def test_weights_at_the_deployed_format_keep_embeddings_unquantized() -> None:
    groups = {"embedding": 10**9, "lm_head": 10**9, "attention": 10 * 10**9, "mlp": 58 * 10**9}
    m = model(LLAMA70, parameter_groups=groups, parameters=70 * 10**9)
    assert weight_bytes(m)[0] == 140 * 10**9
    assert weight_bytes(m, "fp8")[0] == 68 * 10**9 + 2 * 2 * 10**9
    assert weight_bytes(m, "nvfp4")[0] == int(68 * 10**9 * 0.5625) + 4 * 10**9
    gptoss = model(LLAMA70, parameter_groups={"embedding": 10**9, "attention": 10**9, "experts": 10**10},
                   parameters=12 * 10**9, weight_dtype="mxfp4", quantized=["experts"])
    assert weight_bytes(gptoss)[0] == int(10**10 * 0.53125) + 2 * 2 * 10**9
    assert weight_bytes(model(LLAMA70, weight_bytes=123))[0] == 123
    assert weight_bytes(model(LLAMA70, parameters=10**9, weight_dtype="int4", quant_group_size=32))[0] == \
        int(10**9 * (0.5 + 2 / 32))


def test_budget_subtracts_weights_and_reserve() -> None:
    m = model(LLAMA70, weight_dtype="fp8", hidden_size=8192, intermediate_size=28672, vocab_size=128256)
    f = fit(m, "bf16", 80 * 10**9, 131072, reserve=2 * 10**9)
    assert f.weights_bytes == 70 * 10**9
    assert f.pool_bytes == 72 * 10**9 - 70 * 10**9 - 2 * 10**9 == 0
    assert f.fits is False and f.max_ctx == 0 and f.max_sequences == 0
    g = fit(m, "bf16", 100 * 10**9, 131072, reserve=10**9)
    pool = 90 * 10**9 - 70 * 10**9 - 10**9
    assert g.pool_bytes == pool and g.pool_tokens == pool // 327_680
    assert g.max_sequences == pool // (327_680 * 131072)
    assert "- reserve 1,000,000,000 B" in g.formula and "0.9" in g.formula


def test_reserve_follows_vllms_model_runner_sampler_and_graphs() -> None:
    m = model(LLAMA70, hidden_size=8192, intermediate_size=28672, vocab_size=128256)
    v1_eager, how = vllm_pool.reserve(m, 8192, 1024, eager=True)
    v1_graphs, _ = vllm_pool.reserve(m, 8192, 1024)
    assert v1_graphs - v1_eager == vllm_pool.MEASURED.graph_estimate  # V1 subtracts its graph estimate first
    # V1's profile peak is the larger of the forward over 8,192 tokens and the sampler over 1,024 rows: for a
    # 70B MLP (28,672 wide) the forward's 2.2 GB beats the sampler's 1.98 GB
    sampler = int(1024 * 128256 * vllm_pool.V1_SAMPLER_BYTES)
    forward = vllm_pool.forward_bytes(m, 8192, 1)[0]
    assert forward > sampler and v1_eager == forward + vllm_pool.NON_TORCH_BYTES
    assert vllm_pool.reserve(m, 8192, 2048, eager=True)[0] == int(2048 * 128256 * vllm_pool.V1_SAMPLER_BYTES) + \
        vllm_pool.NON_TORCH_BYTES  # twice the rows: the sampler sets it
    assert "V1 runner" in how and "estimated" in how
    v2 = model(LLAMA70, hidden_size=8192, intermediate_size=28672, vocab_size=128256, architecture="LlamaForCausalLM")
    small, _ = vllm_pool.reserve(v2, 1024, 256)
    big, how2 = vllm_pool.reserve(v2, 8192, 1024)
    assert small < big and "V2 runner" in how2
    assert big == vllm_pool.reserve(v2, 8192, 1024, eager=True)[0]  # V2 captures its graphs after the pool


def test_max_ctx_is_capped_at_the_model_limit_and_says_so() -> None:
    m = model(LLAMA70, parameters=10**9, max_context=131072)
    f = fit(m, "fp8_e4m3", 10**12, 4096, reserve=0)
    assert f.max_ctx == 131072 and f.ctx_limit == "model" and f.max_ctx_memory > 131072
    tight = fit(m, "fp8_e4m3", 10 * 10**9, 4096, reserve=0)
    assert tight.ctx_limit == "memory" and tight.max_ctx == tight.max_ctx_memory < 131072


def test_weights_too_big_gives_zero_ctx() -> None:
    f = fit(model(LLAMA70, parameters=405 * 10**9), "bf16", 80 * 10**9, 131072)
    assert f.fits is False and f.max_ctx == 0 and f.pool_bytes < 0
    assert any("exceed the usable memory" in n for n in f.notes)


def test_utilization_changes_the_budget() -> None:
    a = fit(model(LLAMA70, parameters=10**9), "bf16", 80 * 10**9, 1024, utilization=0.5, reserve=0)
    assert a.pool_bytes == 40 * 10**9 - 2 * 10**9


def test_unbounded_when_nothing_grows() -> None:
    state = [{"name": "s", "shape": [10, 10], "tp_dim": None, "dtype": "fp32"}]
    m = model([{"type": "linear", "count": 4, "state": state}], parameters=1000)
    assert fit(m, "bf16", 10**9, 1024, reserve=0).max_ctx == UNBOUNDED_CTX


@given(st.integers(1, 64), st.integers(1, 10**7), st.integers(1, 4096))
def test_max_context_is_the_largest_that_fits(batch: int, available: int, window: int) -> None:
    kv = kv_model(model([{"type": "full", "count": 1, "kv_heads": 1, "head_dim": 8},
                         {"type": "sliding", "count": 1, "kv_heads": 1, "head_dim": 8, "window": window}]), "bf16",
                  batched_tokens=64)
    n = max_context(kv, available, batch)
    if n == 0:
        assert batch * kv.per_sequence(1) > available
    else:
        assert batch * kv.per_sequence(n) <= available < batch * kv.per_sequence(n + 1)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "nvfp4"])
def test_every_kv_dtype_sizes(dtype: str) -> None:
    assert kv_model(model(LLAMA70), dtype).bytes_per_token() > 0
