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
    assert [vllm_pool.accounting(v).release for v in ("0.33.0", "0.34.1", "0.28.0", "0.24.0", "0.20.2", "0.10.0")] \
        == ["0.33.0", "0.33.0", "0.25.0", "0.24.0", "0.19.1", "0.19.1"]
    assert vllm_pool.accounting(None) is vllm_pool.MEASURED and vllm_pool.MEASURED.release == "0.24.0"


@pytest.mark.parametrize("release,arch,eager,graphs", [
    ("0.19.1", "Qwen3ForCausalLM", False, 0),          # 0.19.1 logs the estimate only
    ("0.19.1", "MixtralForCausalLM", False, 0),
    ("0.24.0", "Qwen3ForCausalLM", False, 0),          # V2 runner by default: its estimate is 0
    ("0.24.0", "MixtralForCausalLM", False, 1 << 30),  # V1 runner: subtracted
    ("0.33.0", "Qwen3ForCausalLM", False, 1 << 30),    # V2 for all, with a real estimate
    ("0.33.0", "MixtralForCausalLM", False, 1 << 30),
    ("0.33.0", "MixtralForCausalLM", True, 0),         # eager: no graphs in any release
])
def test_the_cuda_graph_estimate_is_subtracted_where_the_release_does(release: str, arch: str, eager: bool,
                                                                       graphs: int) -> None:
    acct = vllm_pool.accounting(release)
    m = _model(arch)
    act, _ = vllm_pool.activation_bytes(m, 8192, 1024, acct=acct)
    total, words = vllm_pool.reserve(m, 8192, 1024, eager=eager, acct=acct)
    assert total - act - vllm_pool.NON_TORCH_BYTES == graphs
    assert f"vLLM {release}" in words


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
    assert a.memory.engine_report["num_blocks"] == 20 * 2**30 // (16 * 36 * 8 * 256 * 2)
    huge = solve(image(), build_query(gpu="h200", vllm_args=line.replace("20G", "200G")))
    assert huge.memory is not None and huge.memory.fits is False  # weights + 200 GiB exceed the GPU
