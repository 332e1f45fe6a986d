"""The rotary-embedding cos/sin caches in vLLM's loaded weights (kbtool/solve/engines/vllm/rope.py, issue 44), each
figure as vLLM's code builds it (model_executor/layers/rotary_embedding/ in the 0.24.0 and 0.26.0 wheels)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from kbtool.model import Model
from kbtool.model.hfconfig import to_record
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.engines.vllm import rope
from kbtool.solve.engines.vllm.budget import fit
from kbtool.solve.weights import weight_bytes
from tests.util import ROOT

MODELS = ROOT / "probes" / "vllm_boot" / "models"


def boot_model(name: str, **config: Any) -> Model:
    cfg = {**json.loads((MODELS / name / "config.json").read_text(encoding="utf-8")), **config}
    rec = to_record(cfg, name, where=str(MODELS / name))
    rec["sources"] = [{"type": "doc", "url": "https://huggingface.co"}]
    return Model.model_validate(rec)


@pytest.mark.parametrize("name,expected", [
    # Gemma 3: the global layers' linear rope (131,072 x factor 8 rows, linear_scaling_rope.py:90) and the sliding
    # layers' own default rope at rope_local_base_freq (gemma3.py:158-176), 256 dims, bf16
    ("gemma-3-12b", (131072 * 8 + 131072) * 256 * 2),
    # gpt-oss: YaRN over original 4,096 x factor 32 (yarn_scaling_rope.py:77-79), built in float32 (gpt_oss.py:94)
    ("gpt-oss-20b", 4096 * 32 * 64 * 4),
    # DeepSeek-V2-Lite: one rope over qk_rope_head_dim 64 (deepseek_v2.py:541-546), 4,096 x 40 rows, bf16
    ("deepseek-v2-lite", 4096 * 40 * 64 * 2),
    # Llama 3.1: llama3 scaling changes the frequencies, not the rows (llama3_rope.py): max_position_embeddings
    ("llama-3.1-8b", 131072 * 128 * 2),
    ("qwen3-8b", 40960 * 128 * 2),
    ("mixtral-8x7b", 32768 * 128 * 2),
    # Nemotron-H's attention layers have no rope (models/nemotron_h.py calls no get_rope)
    ("nemotron-3-nano-30b-a3b", 0),
])
def test_the_rope_caches_are_sized_as_vllm_builds_them(name: str, expected: int) -> None:
    assert rope.cache_bytes(boot_model(name))[0] == expected


def test_gemma_2_shares_one_rope_over_its_sliding_and_global_layers() -> None:
    """gemma2.py:147-152 gives every layer config.rope_parameters: one key in get_rope's cache, one buffer; its
    float32 checkpoint loads as bf16 (the rope takes the model dtype, torch.get_default_dtype())."""
    m = boot_model("gemma-2-9b")
    assert {g.type for g in m.layers} == {"sliding", "full"}
    assert rope.cache_bytes(m, "bf16")[0] == 8192 * 256 * 2
    assert rope.cache_bytes(m, "fp32")[0] == 8192 * 256 * 4


def test_a_partial_rotary_factor_rotates_fewer_dims() -> None:
    """get_rope: rotary_dim = int(head_size x partial_rotary_factor) (rotary_embedding/__init__.py:66-72)."""
    m = boot_model("qwen3-8b", partial_rotary_factor=0.25)
    assert m.rotary_dim == 32
    assert rope.cache_bytes(m)[0] == 40960 * 32 * 2


def test_every_gpu_holds_the_whole_cache() -> None:
    """Tensor parallel splits the parameters, not the rope buffer: each rank builds it."""
    m = boot_model("gemma-3-12b")
    w = weight_bytes(m)[0]
    r = rope.cache_bytes(m)[0]
    acct = vllm_pool.accounting("0.26.0")
    one = fit(m, "bf16", 80 << 30, 8192, batched_tokens=8192, max_num_seqs=1024, acct=acct)
    two = fit(m, "bf16", 80 << 30, 8192, batched_tokens=8192, max_num_seqs=1024, tp=2, acct=acct)
    assert one.weights_bytes == w + r
    assert two.weights_bytes == math.ceil(w / 2) + r
    assert "rope cos/sin caches" in one.formula
