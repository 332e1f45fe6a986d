"""`kb query`'s memory options and answer on the shipped KB (issue 19's done-when checks)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kbtool.errors import UsageError
from kbtool.solve.query import parse_size, parse_weights
from tests.util import RECORDS, run_kb

ENV: dict[str, str] = {}  # the session's KB cache (tests/conftest.py)


def memory(*args: str) -> dict[str, Any]:
    r = run_kb("query", *args, "--json", env=ENV)
    assert r.code == 0, r.err
    return json.loads(r.out)["memory"]  # type: ignore[no-any-return]


def driver_bytes(acc: str) -> int:
    import yaml

    rec = yaml.safe_load((RECORDS / "accelerators" / f"{acc}.yaml").read_text())
    return int(rec["memory_bytes"]["value"])


def test_405b_fp8_weights_on_8_h100_fits_with_the_budget_lines() -> None:
    r = run_kb("query", "--gpu", "h100", "--gpus", "8", "--model", "llama-3.1-405b", "--weights", "fp8",
               "--ctx", "128k", "--kv", "fp8", "--explain", env=ENV)  # the headline has one memory line
    assert r.code == 0, r.err
    line = next(x for x in r.out.splitlines() if x.startswith("memory:"))
    assert line.startswith("memory: fits")
    for part in ("budget = ", "- weights ", "(fp8)", "- reserve ", "= KV pool "):
        assert part in r.out
    m = memory("--gpu", "h100", "--gpus", "8", "--model", "llama-3.1-405b", "--weights", "fp8", "--ctx", "128k",
               "--kv", "fp8")
    assert m["fits"] is True and m["weights_dtype"] == "fp8" and m["max_sequences"] >= 1
    bf16 = memory("--gpu", "h100", "--gpus", "8", "--model", "llama-3.1-405b", "--ctx", "128k", "--kv", "fp8")
    assert bf16["fits"] is False and bf16["weights_bytes"] > 1.9 * m["weights_bytes"]


def test_70b_on_2_h100_uses_the_driver_capacity_and_counts_128k_sequences() -> None:
    m = memory("--gpu", "h100", "--gpus", "2", "--model", "llama-3.1-70b", "--ctx", "128k", "--kv", "fp8")
    assert m["capacity_bytes"] == driver_bytes("nvidia-h100-sxm")
    assert m["kv_bytes_per_token"] == 2 * 80 * 4 * 128
    pool = m["available_bytes"]
    assert m["max_sequences"] == max(0, pool // m["kv_bytes"])
    assert pool == int(m["capacity_bytes"] * m["utilization"]) - m["weights_bytes"] - m["reserve_bytes"]
    assert m["utilization"] == 0.92  # vLLM 0.24.0's default (config/cache.py:67), whose accounting sizes it
    r = run_kb("query", "--gpu", "h100", "--gpus", "2", "--model", "llama-3.1-70b", "--ctx", "128k", "--kv", "fp8",
               env=ENV)
    assert f"{m['max_sequences']:,} sequence" in r.out and "of 131,072 fit at once" in r.out


def test_max_ctx_is_capped_at_max_position_embeddings_and_says_which_binds() -> None:
    m = memory("--gpu", "h200", "--model", "llama-3.1-8b", "--ctx", "8k", "--kv", "fp8")
    assert m["max_ctx"] == 131072 and m["ctx_limit"] == "model" and m["max_ctx_memory"] > 131072


def test_reserve_overrides_the_estimate_byte_for_byte() -> None:
    base = memory("--gpu", "h100", "--model", "llama-3.1-8b", "--ctx", "32k")
    zero = memory("--gpu", "h100", "--model", "llama-3.1-8b", "--ctx", "32k", "--reserve", "0")
    assert zero["reserve_bytes"] == 0
    assert zero["available_bytes"] - base["available_bytes"] == base["reserve_bytes"]
    four = memory("--gpu", "h100", "--model", "llama-3.1-8b", "--ctx", "32k", "--reserve", "4GiB")
    assert four["reserve_bytes"] == 4 << 30


def test_gpu_memory_utilization_is_the_util_option() -> None:
    a = memory("--gpu", "h100", "--model", "llama-3.1-8b", "--gpu-memory-utilization", "0.5")
    b = memory("--gpu", "h100", "--model", "llama-3.1-8b", "--util", "0.5")
    assert a == b and a["utilization"] == 0.5


def test_max_num_batched_tokens_sizes_the_sliding_window_layers() -> None:
    small = memory("--gpu", "h200", "--model", "gemma-3-27b", "--ctx", "128k", "--max-num-batched-tokens", "1024")
    big = memory("--gpu", "h200", "--model", "gemma-3-27b", "--ctx", "128k", "--max-num-batched-tokens", "16384")
    # vLLM counts whole blocks per group: 52 sliding layers are 6 groups of 10 layer slots (8 padding), each
    # holding cdiv(min(window - 1 + batched, ctx), 16) + 1 blocks (vllm_planning.group_blocks)
    per_slot_token = 2 * 60 * 16 * 128 * 2
    assert big["kv_bytes"] - small["kv_bytes"] == per_slot_token * (16384 - 1024)


def test_bad_memory_options_exit_2() -> None:
    r = run_kb("query", "--gpu", "h100", "--model", "llama-3.1-8b", "--weights", "fp6", env=ENV)
    assert r.code == 2 and "--weights: unknown weight format 'fp6'" in r.err
    r = run_kb("query", "--gpu", "h100", "--model", "llama-3.1-8b", "--reserve", "lots", env=ENV)
    assert r.code == 2 and "not a memory size" in r.err


def test_parse_size_and_weights() -> None:
    assert parse_size("4GiB") == 4 << 30 and parse_size("2.5GB") == 2_500_000_000 and parse_size("1500") == 1500
    assert parse_weights("FP8") == "fp8" and parse_weights("bfloat16") == "bf16" and parse_weights(None) is None
    with pytest.raises(UsageError):
        parse_size("-1GB")


def test_a_kv_cache_that_does_not_fit_names_what_would_make_it_fit() -> None:
    import subprocess

    def answer(*extra: str) -> str:
        args = ["kb", "query", "--gpu", "h100", "--gpus", "2", "--model", "llama-3.1-70b", "--ctx", "128k",
                "--kv", "fp8", *extra]
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout

    no = answer()
    assert "does not fit" in no and "to fit:" in no and "--weights fp8" in no and "--gpus 4 (" in no
    for option in (["--weights", "fp8"], ["--gpus", "4"]):  # each option it names does make it fit
        assert "memory: fits" in answer(*option) and "to fit:" not in answer(*option)
