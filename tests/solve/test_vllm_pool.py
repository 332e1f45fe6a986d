"""vLLM's pool accounting per release (kbtool/solve/engines/vllm/pool.py Accounting): where 0.19.1, 0.24.0 and 0.33.0
differ, kb's numbers differ the same way, and --kv-cache-memory-bytes is the pool."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kbtool.query_cli import image
from kbtool.solve.engines.vllm import planning as vllm_planning
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.engines.vllm.args import parse
from kbtool.solve.engines.vllm.planning import Point
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


def _model(arch: str | None) -> SimpleNamespace:
    return SimpleNamespace(architecture=arch, vocab_size=100_000, intermediate_size=10_000, hidden_size=4096,
                           experts=None, weight_dtype="bf16")


def test_a_release_takes_the_newest_recorded_line_at_or_below_it() -> None:
    assert [vllm_pool.accounting(v).release for v in ("0.33.0", "0.34.1", "0.28.0", "0.27.1", "0.26.0", "0.25.0",
                                                      "0.24.0", "0.20.2", "0.10.0")] \
        == ["0.33.0", "0.34.0", "0.28.0", "0.26.0", "0.26.0", "0.25.0", "0.24.0", "0.19.1", "0.19.1"]
    assert vllm_pool.accounting(None) is vllm_pool.MEASURED and vllm_pool.MEASURED.release == "0.24.0"


@pytest.mark.parametrize("release,arch,eager,graphs", [
    ("0.19.1", "Qwen3ForCausalLM", False, 0),          # 0.19.1 logs the estimate only
    ("0.19.1", "MixtralForCausalLM", False, 0),
    ("0.24.0", "Qwen3ForCausalLM", False, 0),          # V2 runner by default: its estimate is 0
    ("0.24.0", "MixtralForCausalLM", False, round(0.5938 * (1 << 30))),  # V1 runner: its boots' mean, subtracted
    ("0.33.0", "Qwen3ForCausalLM", False, 1 << 30),    # V2 for all, with a real estimate
    ("0.33.0", "MixtralForCausalLM", False, 1 << 30),
    ("0.33.0", "MixtralForCausalLM", True, 0),         # eager: no graphs in any release
    ("0.34.0", "Qwen3ForCausalLM", False, 1 << 30),    # measured after capture (the first check's capacity: none)
    ("0.34.0", "Qwen3ForCausalLM", True, 0),
])
def test_the_cuda_graph_estimate_is_subtracted_where_the_release_does(release: str, arch: str, eager: bool,
                                                                       graphs: int) -> None:
    acct = vllm_pool.accounting(release)
    m = _model(arch)
    act, _ = vllm_pool.activation_bytes(m, 8192, 1024, acct=acct)
    total, words = vllm_pool.reserve(m, 8192, 1024, eager=eager, acct=acct)
    assert total - act - vllm_pool.NON_TORCH_BYTES == graphs
    assert f"vLLM {release}" in words



def _dense(arch: str, vocab: int, inter: int, hidden: int = 4096, dtype: str = "bf16") -> SimpleNamespace:
    return SimpleNamespace(architecture=arch, vocab_size=vocab, intermediate_size=inter, hidden_size=hidden,
                           experts=None, weight_dtype=dtype)


def test_the_v2_profile_peak_is_the_larger_step_not_the_sum() -> None:
    """vLLM's V2 profile_run frees the forward before it samples (0.26.0 v1/worker/gpu/model_runner.py:673-688):
    kb takes the larger of the two steps. Mistral-7B's small vocabulary leaves the forward's MLP the peak."""
    t, r, gib = 8192, 1024, 1 << 30
    mistral = _dense("MistralForCausalLM", 32_768, 14_336)
    act, how = vllm_pool.activation_bytes(mistral, t, r, acct=vllm_pool.accounting("0.26.0"), run="V2")
    # gate/up [T, 2I] + activation [T, I] + 3 x [T, H] in bf16, and torch's 32 MiB cuBLAS workspace: 0.875 GiB,
    # which is what every eager Mistral-7B boot logs (metrics.activation_peak_gib)
    assert act == 2 * t * (3 * 14_336 + 3 * 4096) + (32 << 20) and act / gib == 0.875
    assert "max(forward" in how and "sampler" in how
    # an int4 checkpoint's MLP runs Marlin kernels: no cuBLAS workspace in the forward
    awq = _dense("LlamaForCausalLM", 128_256, 14_336, dtype="int4")
    assert vllm_pool.activation_bytes(awq, t, r, acct=vllm_pool.accounting("0.26.0"), run="V2")[0] == act - (32 << 20)


@pytest.mark.parametrize("release,per", [("0.24.0", 6), ("0.26.0", 2), ("0.28.0", 6)])
def test_the_v2_sampler_step_holds_what_each_release_holds(release: str, per: int) -> None:
    """0.24.0 and 0.28.0 sample on an fp32 copy beside the bf16 logits (sample/sampler.py:157, :196), 0.26.0 mutates
    the bf16 logits in place (sampler.py:162-168): Qwen3-8B's sampler step sets the peak in 0.24.0 only."""
    t, r = 8192, 1024
    qwen = _dense("Qwen3ForCausalLM", 151_936, 12_288)
    acct = vllm_pool.accounting(release)
    assert acct.v2_sampler == per
    act, _ = vllm_pool.activation_bytes(qwen, t, r, acct=acct, run="V2")
    sampler = 2 * (t + r) * 4096 + r * 151_936 * per + (32 << 20)
    forward = 2 * t * (3 * 12_288 + 4 * 4096) + (32 << 20)  # Qwen2's MLP keeps gate/up through down_proj: 4 x [T, H]
    assert act == max(sampler, forward) and (act == sampler) == (per == 6)


def test_gemma_2_soft_caps_its_logits_out_of_place() -> None:
    """compute_logits divides, tanh-es and multiplies into new tensors (layers/logits_processor.py:76-79): two bf16
    logit tensors alive, which sets Gemma-2-9B's peak (1.0693 GiB in its 0.26.0 boots)."""
    t, r = 8192, 1024
    gemma2 = _dense("Gemma2ForCausalLM", 256_000, 14_336, hidden=3584)
    act, _ = vllm_pool.activation_bytes(gemma2, t, r, acct=vllm_pool.accounting("0.26.0"), run="V2")
    assert act == 2 * (t + r) * 3584 + r * 256_000 * 4 + (32 << 20)
    assert vllm_pool.hidden_live("Gemma3ForCausalLM") == 5 and vllm_pool.hidden_live("LlamaForCausalLM") == 3

def test_runner_by_release() -> None:
    qwen, mixtral = _model("Qwen3ForCausalLM"), _model("MixtralForCausalLM")
    assert [vllm_pool.runner(m, vllm_pool.accounting(r)) for r in ("0.19.1", "0.24.0", "0.33.0") for m in
            (qwen, mixtral)] == ["V1", "V1", "V2", "V1", "V2", "V2"]


POINT = Point(32768, 8192)  # async scheduling on the V2 runner, pp 1: two batches in flight in 0.33.0


def test_sliding_window_requests_hold_the_in_flight_batches_in_0_33() -> None:
    g = [vllm_planning.Group("sliding", 10, 1000, 1024), vllm_planning.Group("full", 10, 1000)]
    old = vllm_pool.report(10**10, (g, []), 16, POINT, vllm_pool.accounting("0.24.0"))
    new = vllm_pool.report(10**10, (g, []), 16, POINT, vllm_pool.accounting("0.33.0"))
    # window blocks: ceil((1023 + 8192) / 16) + 1 = 577 in 0.24.0; (1023 + 2 x 8192) -> 1089 in 0.33.0
    assert old.concurrency == pytest.approx(old.num_blocks / (2048 + 577))
    assert new.concurrency == pytest.approx(new.num_blocks / (2048 + 1089))


def test_gpu_kv_cache_size_in_0_19_is_blocks_per_group() -> None:
    g = [vllm_planning.Group("sliding", 10, 1000, 1024), vllm_planning.Group("full", 10, 1000)]
    r = vllm_pool.report(10**10, (g, []), 16, POINT, vllm_pool.accounting("0.19.1"))
    assert r.tokens == r.num_blocks // 2 * 16
    assert vllm_pool.report(10**10, (g, []), 16, POINT).tokens == int(r.concurrency * 32768)


def test_kv_cache_memory_bytes_is_read_as_vllm_reads_it_and_is_the_pool() -> None:
    assert parse("serve m --kv-cache-memory-bytes 20G").kv_cache_memory == 20 * 2**30
    assert parse("serve m --kv-cache-memory=8g").kv_cache_memory == 8 * 10**9
    line = "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --kv-cache-memory-bytes 20G"
    a = solve(image(), build_query(gpu="h200", vllm_args=line))
    assert a.memory is not None and a.memory.available_bytes == 20 * 2**30
    assert "--kv-cache-memory-bytes" not in (a.query.get("ignored") or [])
    # blocks of vLLM 0.34.0's default block size, 64 (the default release)
    assert a.memory.engine_report["num_blocks"] == 20 * 2**30 // (64 * 36 * 8 * 256 * 2)
    huge = solve(image(), build_query(gpu="h200", vllm_args=line.replace("20G", "200G")))
    assert huge.memory is not None and huge.memory.fits is False  # weights + 200 GiB exceed the GPU
