"""SGLang's token pool (kbtool/solve/engines/sglang/pool.py): bytes per token as SGLang's pool configurators count them
(sglang 0.5.23 model_executor/pool_configurator.py), the budget `pre-load free x mem_fraction_static - weights`,
whole pages, and its start-up error when the weights leave nothing."""

from __future__ import annotations

import pytest

from kbtool.query_cli import image
from kbtool.solve.engines.sglang import pool as sglang_pool
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


@pytest.fixture(scope="module")
def img():  # type: ignore[no-untyped-def]
    return image()


@pytest.mark.parametrize("model,kv,tp,cell", [
    ("llama-3.1-8b", "bf16", 1, 8 * 256 * 32 * 2),      # 128 KiB/token (docs/sglang-resolution.md §6)
    ("llama-3.1-8b", "fp8_e4m3", 1, 8 * 256 * 32),
    ("llama-3.1-8b", "bf16", 2, 4 * 256 * 32 * 2),      # KV heads split over TP ranks
    ("llama-3.1-8b", "bf16", 16, 1 * 256 * 32 * 2),     # fewer KV heads than ranks: one replicated per rank
    ("deepseek-v3", "bf16", 1, 576 * 61 * 2),           # MLA: one latent per layer, 70,272 B
    ("deepseek-v3", "bf16", 8, 576 * 61 * 2),           # ... on every rank, not divided by TP
])
def test_bytes_per_token_are_sglangs(img, model: str, kv: str, tp: int, cell: int) -> None:  # type: ignore[no-untyped-def]
    got, _full, _swa, _left = sglang_pool.cell_bytes(img.model(model), kv, tp)
    assert got == cell


def test_sliding_window_layers_count_at_the_swa_ratio_except_gemma(img) -> None:  # type: ignore[no-untyped-def]
    oss = img.model("gpt-oss-20b")
    cell, full, swa, _ = sglang_pool.cell_bytes(oss, "bf16", 1)
    per = 8 * (64 + 64) * 2
    assert (full, swa) == (12, 12) and cell == pytest.approx(12 * per + 0.8 * 12 * per)
    gemma = img.model("gemma-3-27b")
    g_cell, _, _, _ = sglang_pool.cell_bytes(gemma, "bf16", 1)
    assert g_cell == sum(g.count * g.kv_heads * 2 * (g.head_dim or gemma.head_dim) * 2 for g in gemma.layers)


def test_tokens_are_the_budget_over_the_cell_in_whole_pages(img) -> None:  # type: ignore[no-untyped-def]
    m = img.model("llama-3.1-8b")
    cap = 150_754_820_096
    f1, p1, err = sglang_pool.fit(m, "bf16", cap, 32768, mem_fraction_static=0.83, page_size=1)
    assert err is None and p1 is not None
    budget = int((cap - sglang_pool.CONTEXT_BYTES) * 0.83) - f1.weights_bytes
    assert p1.tokens == budget // (8 * 256 * 32 * 2)
    _, p64, _ = sglang_pool.fit(m, "bf16", cap, 32768, mem_fraction_static=0.83, page_size=64)
    assert p64 is not None and p64.tokens % 64 == 0 and p1.tokens - 64 < p64.tokens <= p1.tokens
    _, capped, _ = sglang_pool.fit(m, "bf16", cap, 32768, mem_fraction_static=0.83, page_size=1,
                                   max_total_tokens=100_000)
    assert capped is not None and capped.tokens == 100_000
    assert capped.max_running_requests == min(max(min(int(100_000 / 32768 * 512), 4096), 2048), 50_000)
    line = p1.as_dict(32768)["kv_line"]
    assert line.startswith(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {p1.tokens}, K size: ")


def test_weights_beyond_the_static_share_are_sglangs_error(img) -> None:  # type: ignore[no-untyped-def]
    m = img.model("llama-3.1-70b")  # 141 GB of bf16 weights on one 80 GB H100
    f, pool, err = sglang_pool.fit(m, "bf16", 85_520_809_984, 8192, mem_fraction_static=0.83, page_size=1)
    assert pool is None and f.fits is False
    assert err is not None and err.startswith("ValueError: Loaded weights leave no GPU memory for the KV cache")


def test_sglang_float32_stores_its_auto_cache_at_4_bytes(img) -> None:  # type: ignore[no-untyped-def]
    """SGLang's kv_cache_dtype auto is the model dtype too (0.5.23 sglang/srt/mem_cache/kv_cache_dtype.py:49-59)."""
    line = "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --context-length 32768"
    half = solve(img, build_query(gpu="h100", sglang_args=line))
    full = solve(img, build_query(gpu="h100", sglang_args=line + " --dtype float32"))
    assert half.memory is not None and full.memory is not None
    assert full.memory.kv_bytes_per_token == 2 * half.memory.kv_bytes_per_token
    assert full.memory.weights_bytes == pytest.approx(2 * half.memory.weights_bytes, rel=1e-6)
    assert "dtype: torch.float32" in full.memory.engine_report["text"]


def test_the_pool_answer_names_the_override_its_releases_evidence_was_installed_with(img) -> None:  # type: ignore[no-untyped-def]
    """Issue 46: SGLang 0.5.18-0.5.22 were swept with cuda-tile left out (probes/sweep-overrides.yaml); their
    sglang-pool evidence names it, and so does the pool answer for those releases. 0.5.23 installed as pinned."""
    m = img.model("llama-3.1-8b")
    texts = {r: sglang_pool.fit(m, "bf16", 85_520_809_984, 32768, mem_fraction_static=0.83, page_size=1,
                                release=r)[1].as_dict(32768)["text"] for r in ("0.5.22", "0.5.23")}
    assert "installed with override cuda-tile ; sys_platform == 'never';" in texts["0.5.22"]
    assert "override" not in texts["0.5.23"]


@pytest.mark.parametrize("release", ["0.5.23", "0.5.17"])
def test_a_pool_shorter_than_the_assumed_context_starts_and_caps_requests(img, release: str) -> None:  # type: ignore[no-untyped-def]
    """SGLang refuses to start only on an empty pool (pool_configurator.py:95 in 0.5.23); a pool shorter than the
    context caps each request at min(context_len - 1, pool - 1) tokens, its input 5 fewer (tp_worker.py:552-572 in
    0.5.23, :407-413 and :509-521 in 0.5.17). A line that leaves the context to the model is answered by that start,
    with the cap said; asked for the model's context with --ctx, the same line does not fit it."""
    from kbtool.render.verdict import summary

    line = "python -m sglang.launch_server --model-path Qwen/Qwen2.5-0.5B-Instruct-AWQ --mem-fraction-static 0.01"
    a = solve(img, build_query(gpu="a40", engine="sglang", sglang_args=line, lib=[f"sglang={release}"]))
    d = a.decision
    tokens = a.memory.pool.tokens
    assert 0 < tokens < 32768 and a.memory.fits is False  # one request of the model's 32,768 tokens does not fit
    assert a.verdict == "yes" and d.case == "ENGINE" and a.memory.pool.starts is True
    assert d.detail["short"]["max_request"] == min(32768, tokens) - 1 == d.detail["short"]["max_input"] + 5
    assert release in d.detail["short"]["source"] and f"its pool holds {tokens:,} tokens" in summary(d)
    asked = solve(img, build_query(gpu="a40", engine="sglang", ctx="32k", sglang_args=line, lib=[f"sglang={release}"]))
    assert asked.verdict == "no" and asked.decision.case == "NO_FIT" and "short" not in asked.decision.detail
    # a pool that holds the context says nothing of a cap
    roomy = solve(img, build_query(gpu="a40", engine="sglang", sglang_args=line.replace("0.01", "0.8"),
                                   lib=[f"sglang={release}"]))
    assert roomy.verdict in ("yes", "conditional") and "short" not in roomy.decision.detail


def test_the_row_of_a_short_pool_says_it_starts_and_caps() -> None:
    """Over every accelerator, a row whose verdict is SGLang's start with a short pool says the cap, not "no fit"."""
    from tests.util import run_kb

    r = run_kb("query", "--sglang-args", "python -m sglang.launch_server --model-path "
               "Qwen/Qwen2.5-0.5B-Instruct-AWQ --mem-fraction-static 0.01", env={"COLUMNS": "200"})
    row = next(line for line in r.out.splitlines() if "nvidia-a100-80gb-pcie" in line)
    assert " yes " in row and "starts, requests capped at" in row and "no fit" not in row
