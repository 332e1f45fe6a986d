"""vLLM 0.34.0 sizes its KV cache by its own accounting line (records/engine-releases/vllm-0.34.0.yaml `accounting:`),
not 0.33.0's. Each test cites the 0.34.0 code it follows (vllm-project/vllm at 62d4bc3c7, the 0.34.0 wheel; 0.33.0 is
4ba787ec9). No boot of 0.34.0 is recorded, so its answers stay "estimated"."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool import query_cli
from kbtool.solve.engines.vllm import planning as vllm_planning
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve

GIB = 1 << 30


@pytest.fixture(scope="module")
def img() -> Any:
    return query_cli.image()


def ask(img: Any, **kw: Any) -> Any:
    return solve(img, build_query(engine="vllm", **{"vllm": "0.34.0", "gpu": "l40s", "model": "qwen3-32b-fp8", **kw}))


def capacity_before_warmup(img: Any, a: Any) -> int:
    """What determine_available_memory hands the planner with the extensible cache on (v1/worker/gpu_worker.py:776-
    780): utilization x memory - weights - the profile run's peak - non-torch memory, and no CUDA-graph estimate,
    since the V2 runner estimates 0 with the extensible cache (v1/worker/gpu/model_runner.py:1121-1125)."""
    m = a.memory
    model = img.model("qwen3-32b-fp8")
    acct = vllm_pool.accounting("0.34.0")
    act, _ = vllm_pool.activation_bytes(model, 2048, 256, 1, acct, "V2")  # the L40S tier: 2048 / 256
    return int(m.capacity_bytes * m.utilization) - m.weights_bytes - act - vllm_pool.NON_TORCH_BYTES


def test_0_34_0_has_its_own_accounting_line() -> None:
    """0.34.0's line is its own record's. Its sampler step is 0.33.0's (the default and the warm-up-parameter passes:
    0.34.0 v1/worker/gpu/model_runner.py:1039-1062, 0.33.0 :993-1015), its Triton MXFP4 path keeps no second copy of
    the scales (fused_moe/oracle/mxfp4.py:1454-1461), and its graphs are measured after capture."""
    a34, a33 = vllm_pool.accounting("0.34.0"), vllm_pool.accounting("0.33.0")
    assert a34.release == "0.34.0" and a33.release == "0.33.0"
    assert a34.graphs == "measured" and a33.graphs == "all"
    assert a34.recheck and not a33.recheck
    assert a34.v2_sampler == a33.v2_sampler == vllm_pool.V1_SAMPLER_BYTES
    assert a34.mxfp4_scales_kept is False


def test_a_0_34_0_answer_is_estimated_from_its_own_accounting(img: Any) -> None:
    a = ask(img, ctx="32k")
    r = a.memory.engine_report
    assert r["accounting"] == r["planning"] == "0.34.0"
    assert "estimated from vLLM 0.34.0's accounting" in r["text"], r["text"]
    assert "no boot of vLLM 0.34.0 of dense models recorded: estimated" in r["text"]
    assert "0.33.0" not in r["text"]
    assert "estimated from vLLM 0.34.0's accounting" in a.memory.formula


def test_graphs_come_off_the_measured_cache_not_the_first_capacity(img: Any) -> None:
    """With the extensible cache the graph estimate is 0 before the pool (model_runner.py:1121-1125), and the graphs
    captured after warm-up are in the memory the cache is then sized from (v1/worker/extensible_kv_cache.py:592-618):
    eager, the pool grows by kb's graph estimate and the first capacity does not change."""
    graphs, eager = ask(img, ctx="32k"), ask(img, ctx="32k", vllm_args="vllm serve m --enforce-eager")
    assert eager.memory.available_bytes - graphs.memory.available_bytes == vllm_pool.GRAPH_ESTIMATE_BYTES
    before = f"plans first on {capacity_before_warmup(img, graphs):,} B"
    assert before in graphs.memory.formula and before in eager.memory.formula


def test_the_first_check_plans_on_the_capacity_before_warm_up(img: Any) -> None:
    """get_kv_cache_configs checks the capacity determine_available_memory gave (v1/engine/core.py:338-351), less the
    null block, in the words of _more_kv_cache_memory_hint before warm-up (v1/core/kv_cache_planning.py:64-94,
    99-131): 48k tokens of Qwen3-32B need 12.0 GiB, more than that capacity."""
    a = ask(img, ctx="48k")
    err = a.memory.pool.error
    per = 64 * 64 * 262_144 // 64  # 64 layers x a 64-token page of 4 KiB per token per layer
    assert a.memory.pool.starts is False and err is not None
    assert err.startswith("To serve at least one request with the model's max seq len (49152), (12.0 GiB KV cache "
                          "is needed, which is larger than the available KV cache memory "
                          f"({vllm_planning.gib(capacity_before_warmup(img, a) - per)} GiB).")
    assert ("The extensible KV cache already takes all device memory left after the model and its activations; "
            "decrease `max_model_len` or `max_num_seqs`, or the model needs a device with more memory. Decreasing "
            "`max_model_len` also reduces what is needed.") in err


def test_the_check_after_warm_up_refuses_what_the_capacity_admits(img: Any) -> None:
    """40k tokens (10.0 GiB) fit the capacity before warm-up but not the blocks the cache is sized to after it:
    shrink_kv_cache_configs checks (num_blocks - 1) blocks again and raises in the after-warm-up words
    (v1/core/kv_cache_planning.py:1845-1858, 64-94 with after_warmup=True)."""
    a = ask(img, ctx="40k")
    r = a.memory.engine_report
    per = 64 * 64 * 262_144 // 64
    assert capacity_before_warmup(img, a) - per >= 10 * GIB  # the first check passes
    err = a.memory.pool.error
    assert err is not None and a.memory.fits is False
    assert f"available KV cache memory ({vllm_planning.gib((r['num_blocks'] - 1) * per)} GiB)" in err
    assert ("The extensible KV cache already takes all device memory left after the model, its activations, CUDA "
            "graphs and warmup; decrease `max_model_len` or `max_num_seqs`, or the model needs a device with more "
            "memory. CUDA graphs take less with fewer or smaller capture sizes in the compilation config. "
            "Decreasing `max_model_len` also reduces what is needed.") in err
    assert ask(img, ctx="32k").memory.pool.starts is True


def test_a_given_utilization_words_the_hint_for_it(img: Any) -> None:
    """A utilization below 1.0 as given: `The KV cache gets what is left after ... within gpu_memory_utilization`
    (v1/core/kv_cache_planning.py:78-84)."""
    err = ask(img, ctx="40k", util=0.9).memory.pool.error
    assert err is not None and ("The KV cache gets what is left after the model and its activations within "
                                "`gpu_memory_utilization`=0.9; increase it (with the extensible KV cache it defaults "
                                "to 1.0) or decrease `max_model_len` or `max_num_seqs`. Decreasing `max_model_len` "
                                "also reduces what is needed.") in err


def test_kv_cache_memory_bytes_turns_the_extensible_cache_off(img: Any) -> None:
    """--kv-cache-memory-bytes rules the extensible cache out (config/vllm.py:3252), so the hint is the one without it
    (v1/core/kv_cache_planning.py:90-94) and there is no check after warm-up."""
    a = ask(img, ctx="40k", vllm_args="vllm serve m --kv-cache-memory-bytes 4G")
    err = a.memory.pool.error
    assert err is not None and "Try increasing `gpu_memory_utilization` when initializing the engine (this flag " \
        "also controls CPU memory reservation on the CPU backend, despite its name). Decreasing `max_model_len` " \
        "also reduces what is needed." in err
    assert "plans first on" not in a.memory.formula


def test_the_hints_in_0_34_0s_words() -> None:
    """_more_kv_cache_memory_hint, v1/core/kv_cache_planning.py:64-94."""
    assert vllm_planning.extensible_hint() == (
        "The extensible KV cache already takes all device memory left after the model and its activations; decrease "
        "`max_model_len` or `max_num_seqs`, or the model needs a device with more memory.")
    assert vllm_planning.extensible_hint(0.95, after_warmup=True) == (
        "The KV cache gets what is left after the model, its activations, CUDA graphs and warmup within "
        "`gpu_memory_utilization`=0.95; increase it (with the extensible KV cache it defaults to 1.0) or decrease "
        "`max_model_len` or `max_num_seqs`. CUDA graphs take less with fewer or smaller capture sizes in the "
        "compilation config.")
    assert vllm_planning.extensible_hint(1.0) == vllm_planning.extensible_hint()
