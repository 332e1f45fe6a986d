"""vLLM data parallel on an MoE model (kbtool/solve/engines/vllm/budget.fit `dp`, Vllm.unmodelled_memory): vLLM
shards each MoE layer's experts over all dp x tp GPUs of the replicas, as tensor-parallel slices without
--enable-expert-parallel and as whole experts with it (0.34.0 model_executor/layers/fused_moe/config.py:1143-1151
flatten_tp_across_dp_and_pcp, :1235-1263 make), while attention, dense layers and embeddings stay per replica. The
MoE activations over the tokens its all-gather dispatch collects from every rank are not modelled: such an answer is
conditional. A dense model's replicas are independent and sized as one."""

from __future__ import annotations

import json
import math

from kbtool.query_cli import image
from kbtool.solve.engines.vllm import budget
from kbtool.solve.weights import expert_bytes, weight_bytes
from tests.util import run_kb


def test_the_experts_bytes_are_their_group_at_the_loaded_format() -> None:
    m = image().model("deepseek-v3")  # fp8 experts
    assert expert_bytes(m) == m.parameter_groups["experts"] * 1
    assert expert_bytes(m, "bf16") == m.parameter_groups["experts"] * 2
    assert expert_bytes(image().model("llama-3.1-8b")) == 0


def test_data_parallel_shards_the_experts_over_every_gpu() -> None:
    m = image().model("deepseek-v3")
    kw = {"batched_tokens": 8192, "max_num_seqs": 256, "tp": 1, "utilization": 0.9}
    one = budget.fit(m, "bf16", 150_000_000_000, 8192, **kw)  # type: ignore[arg-type]
    eight = budget.fit(m, "bf16", 150_000_000_000, 8192, dp=8, **kw)  # type: ignore[arg-type]
    total, experts = weight_bytes(m)[0], expert_bytes(m)
    rope = one.weights_bytes - total  # the rope cache, whole on every GPU
    assert eight.weights_bytes == math.ceil(total - experts + experts / 8) + rope
    assert "the experts' 656.6 GB over tp x dp 8 GPUs" in eight.formula
    dense = image().model("llama-3.1-8b")
    a = budget.fit(dense, "bf16", 85_000_000_000, 8192, **kw)  # type: ignore[arg-type]
    b = budget.fit(dense, "bf16", 85_000_000_000, 8192, dp=4, **kw)  # type: ignore[arg-type]
    assert a.weights_bytes == b.weights_bytes


def _ask(line: str) -> dict:  # type: ignore[type-arg]
    r = run_kb("query", "--json", "--gpu", "h200", "--vllm-args", line, env={"HF_HUB_OFFLINE": "1"})
    assert r.code == 0, r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


def test_a_data_parallel_moe_line_is_conditional_and_a_dense_one_is_not() -> None:
    moe = _ask("vllm serve deepseek-ai/DeepSeek-V3 -dp 8 --enable-expert-parallel --max-model-len 8192")
    assert moe["verdict"] == "conditional"
    assert "sets --data-parallel-size (the MoE layers' activations" in moe["summary"]
    assert moe["memory"]["weights_bytes"] < 110e9  # 672.9 GB on one GPU without the sharding
    dense = _ask("vllm serve meta-llama/Llama-3.1-8B-Instruct -dp 2 --max-model-len 8192")
    assert dense["verdict"] == "yes"
