"""The defects of issue 44 that vLLM's per-GPU and per-release serve defaults fix, one test per case, each citing the
vLLM file:line kb now follows (through records/engine-releases, replayed in test_engine_release.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool import query_cli
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


@pytest.fixture(scope="module")
def img() -> Any:
    return query_cli.image()


def ask(img: Any, **kw: Any) -> Any:
    """The query under vLLM 0.33.0 (the lines these tests cite) unless a test names another release."""
    return solve(img, build_query(engine="vllm", **{"vllm": "0.33.0", **kw}))


def test_l40s_qwen3_32b_fp8_starts_with_vllms_small_gpu_defaults(img: Any) -> None:
    """vLLM 0.33.0 engine/arg_utils.py:2998 (get_batch_defaults): below 70 GiB, vllm serve takes 2048 batched tokens
    and 256 sequences, and config/cache.py:215 uses 0.92 of memory; kb said "no, 4.1 GB left" with 8192 and 1,024
    and 0.9. With vLLM's own defaults its start-up check passes."""
    a = ask(img, gpu="l40s", model="qwen3-32b-fp8", ctx="32k", kv="fp8")
    assert a.assumed["max_num_batched_tokens"].startswith(
        "2048, max_num_seqs 256 (vLLM 0.33.0, on 44.4 GiB NVIDIA L40S")
    assert a.memory.utilization == 0.92
    assert a.memory.pool.starts is True and a.memory.fits is True
    assert a.verdict != "no"


def test_rtx_5090_reserves_a_256_row_sampler(img: Any) -> None:
    """arg_utils.py:2998 (0.33.0): a 32 GB RTX 5090 gets max_num_seqs 256, so the profiled sampler is 256 rows of
    logits, not 1,024 (kb's pool was 17% low)."""
    a = ask(img, gpu="rtx-5090", model="qwen3-8b", ctx="32k")
    model = img.model("qwen3-8b")
    acct = vllm_pool.accounting("0.33.0")
    small, _ = vllm_pool.reserve(model, 2048, 256, acct=acct)
    big, _ = vllm_pool.reserve(model, 8192, 1024, acct=acct)
    assert a.memory.reserve_bytes == small < big
    assert "2048, max_num_seqs 256" in a.assumed["max_num_batched_tokens"]


def test_b200_takes_the_160_gib_tier(img: Any) -> None:
    """arg_utils.py:2973 (0.33.0): 160 GiB and above get 16384 batched tokens and 1,024 sequences."""
    a = ask(img, gpu="b200", model="llama-3.1-70b", ctx="32k")
    assert a.assumed["max_num_batched_tokens"].startswith("16384, max_num_seqs 1024 (vLLM 0.33.0, on 178.3 GiB")


def test_b200_under_0_24_0_has_no_160_gib_tier(img: Any) -> None:
    """0.24.0's get_batch_defaults (arg_utils.py:2404) stops at the 70 GiB tier: 8192 and 1,024 on a B200."""
    a = ask(img, gpu="b200", model="llama-3.1-70b", ctx="32k", vllm="0.24.0")
    assert a.assumed["max_num_batched_tokens"].startswith("8192, max_num_seqs 1024 (vLLM 0.24.0")


def test_a100_80gb_stays_on_the_small_tier(img: Any) -> None:
    """arg_utils.py:2984-2986 (0.33.0): 'a100' in the device name keeps the small defaults despite 80 GB."""
    a = ask(img, gpu="nvidia-a100-80gb-sxm", model="llama-3.1-8b", ctx="32k")
    assert a.assumed["max_num_batched_tokens"].startswith(
        "2048, max_num_seqs 256 (vLLM 0.33.0, on 79.3 GiB NVIDIA A100")


def test_0_34_0_block_64_utilization_1_and_the_extensible_cache_margin(img: Any) -> None:
    """vLLM 0.34.0: CacheConfig.DEFAULT_BLOCK_SIZE 64 (config/cache.py:185); gpu_memory_utilization resolves to 1.0
    with the extensible KV cache (cache.py:495), which keeps max(1 GiB, 0.75 x the transient peak) free
    (v1/worker/extensible_kv_cache.py:64-65, 615)."""
    a = ask(img, gpu="h100", model="llama-3.1-8b", ctx="32k", vllm="0.34.0")
    assert a.assumed["block_size"] == 64
    assert a.memory.utilization == 1.0
    assert a.assumed["gpu_memory_utilization"].startswith("1 (vLLM 0.34.0,")
    assert "extensible KV cache margin" in a.memory.formula
    given = ask(img, gpu="h100", model="llama-3.1-8b", ctx="32k", vllm="0.34.0", util=0.9)
    assert given.memory.utilization == 0.9 and "gpu_memory_utilization" not in given.assumed


def test_a_given_flag_wins_over_the_default(img: Any) -> None:
    a = ask(img, gpu="l40s", model="qwen3-8b", ctx="32k",
            vllm_args="vllm serve Qwen/Qwen3-8B --max-num-batched-tokens 4096 --max-num-seqs 64")
    assert "max_num_batched_tokens" not in a.assumed and "max_num_seqs" not in a.assumed
    assert a.memory.engine_report is not None


# --- issue 47: vLLM's own start-up check on the batch bounds (records/engine-releases startup_checks) -------------

# the `if` of SchedulerConfig.verify_max_model_len, read in each release's wheel
CHECKED = {"0.19.1": 273, "0.20.0": 273, "0.21.0": 273, "0.22.1": 273, "0.23.0": 273, "0.24.0": 286, "0.25.0": 286,
           "0.25.1": 286, "0.26.0": 286, "0.27.1": 263, "0.28.0": 263, "0.29.0": 298, "0.30.0": 309, "0.31.0": 329,
           "0.32.0": 328, "0.33.0": 331, "0.34.0": 375}


def test_every_recorded_release_refuses_fewer_batched_tokens_than_sequences(img: Any) -> None:
    """vllm/config/scheduler.py (SchedulerConfig.verify_max_model_len, from __post_init__) in every release kb
    records: pydantic wraps the ValueError in a ValidationError for SchedulerConfig."""
    rows = img.engine_data("vllm")["releases"]
    assert set(rows) == set(CHECKED)
    for rel, row in rows.items():
        batch = "max_num_batched_tokens>=max_num_seqs"
        [(_check, raises, message, where)] = [c for c in row["checks"] if c[0] == batch]
        assert raises == "ValidationError (SchedulerConfig)"
        assert message == ("max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or equal to "
                           "max_num_seqs ({max_num_seqs}).")
        assert where.endswith(f" vllm/config/scheduler.py:{CHECKED[rel]}"), (rel, where)


@pytest.mark.parametrize(("line", "tokens", "seqs"), [
    ("--max-num-seqs 100000", 8192, 100000),  # the H100 tier's 8192 (arg_utils.py:2984) is below it
    ("--max-num-seqs 512 --max-num-batched-tokens 256", 256, 512),
    ("--max_num_seqs 2048 --max-model-len 4096", 8192, 2048),
])
def test_vllm_refuses_fewer_batched_tokens_than_sequences(img: Any, line: str, tokens: int, seqs: int) -> None:
    """kb answered these as if vLLM started (or, for 100000, 'weights 16.1 GB exceed the 78.2 GB usable'); vLLM
    stops while it builds its SchedulerConfig, before it loads anything."""
    from kbtool.render.verdict import answer_summary

    a = ask(img, gpu="h100", vllm_args=f"vllm serve qwen3-8b {line}")
    if seqs <= tokens:
        assert a.verdict != "no" or "refuses" not in answer_summary(a)
        return
    assert a.verdict == "no" and a.engine["state"] == "error"
    assert answer_summary(a) == (f"nvidia-h100-sxm: vLLM 0.33.0 refuses to start: max_num_batched_tokens ({tokens}) "
                                 f"must be greater than or equal to max_num_seqs ({seqs}).")
    assert a.engine["error_type"] == "ValidationError (SchedulerConfig)"
    assert a.engine["details"][0][1].startswith("vllm-project/vllm@4ba787ec vllm/config/scheduler.py:331")


def test_the_batch_check_follows_the_release_and_the_gpu(img: Any) -> None:
    """A B200's tier is 16384 tokens (arg_utils.py:2973 in 0.33.0): 10000 sequences start there, not on an H100;
    without --max-num-seqs vLLM caps its own default at max_num_batched_tokens and never refuses."""
    line = "vllm serve qwen3-8b --max-num-seqs 10000"
    assert ask(img, gpu="b200", vllm_args=line).engine["state"] == "selected"
    assert ask(img, gpu="h100", vllm_args=line, vllm="0.19.1").engine["error"].startswith(
        "max_num_batched_tokens (8192) must be")
    assert ask(img, gpu="h100", vllm_args="vllm serve qwen3-8b --max-num-batched-tokens 64").engine["state"] == \
        "selected"


def test_a_reserve_that_takes_the_memory_is_not_worded_as_the_weights(img: Any) -> None:
    """With 100000 sequences and as many batched tokens vLLM starts building, and its sampler's profile takes the
    memory: the weights (16.4 GB of 78.2 GB usable) do not exceed it, weights and reserve together do."""
    from kbtool.render.verdict import answer_summary

    a = ask(img, gpu="h100", vllm_args="vllm serve qwen3-8b --max-num-seqs 100000 --max-num-batched-tokens 100000")
    text = answer_summary(a)
    assert a.verdict == "no" and "exceed the 78.2 GB usable" not in text
    m = a.memory
    reserve = f"{m.reserve_bytes / 1e9:,.1f}"
    assert text == (f"nvidia-h100-sxm: does not fit: weights {m.weights_bytes / 1e9:,.1f} GB and a {reserve} GB "
                    "activation and CUDA-graph reserve per GPU leave nothing of the 78.2 GB usable (0.92 x 85.0 GB) "
                    f"for {m.kv_bytes / 1e9:,.1f} GB of KV")
    big = ask(img, gpu="h100", model="llama-3.1-405b")
    assert answer_summary(big).startswith("nvidia-h100-sxm: does not fit: weights 811.7 GB per GPU exceed the 78.2 GB "
                                          "usable")
