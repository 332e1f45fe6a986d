"""vLLM's CUDA-graph estimate, taken off the KV budget before the pool is sized (v1/worker/gpu_worker.py:444-493 in
the 0.24.0 wheel, git ee0da84ab): what kb subtracts per release and capture sizes (kbtool/solve/engines/vllm/pool.py
graph_bytes, issue 44)."""

from __future__ import annotations

import pytest

from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.store.records import load_tree
from tests.util import ROOT, run_kb


def _model(mid: str):  # type: ignore[no-untyped-def]
    root = ROOT / "records"
    return next(x.record for x in load_tree(root, [root / "models"]).loaded if x.record and x.record.id == mid)


def test_0_24_0_estimates_per_capture_size_not_a_flat_figure() -> None:
    """vLLM 0.24.0 measures its estimate on the GPU per capture mode: the largest size's first capture plus (n - 1)
    times the second's, FULL and PIECEWISE overlaid (v1/worker/gpu_model_runner.py:6508-6537 and 6582-6587), the
    same arithmetic kb scales 0.26.0's boots by. club-3090#612 (Qwen3.6-35B-A3B, --max-num-seqs 1) logs
    cudagraph_capture_sizes [1, 2]: vLLM captures 2 PIECEWISE graphs and 1 FULL, not the 51 + 35 of the default
    max_num_seqs its boots' mean is of, so kb's graph term there must be a fraction of that mean (it was a flat
    1 GiB on every 0.24.0 answer)."""
    acct = vllm_pool.accounting("0.24.0")
    assert acct.graph_estimate is not None and acct.graph_estimate < vllm_pool.GRAPH_ESTIMATE_BYTES
    default = vllm_pool.graph_bytes(acct, "V1", False, vllm_pool.DEFAULT_CAPTURE)
    assert default == acct.graph_estimate
    capture = vllm_pool.capture_of(acct, _model("qwen3.6-35b-a3b-nvfp4"), 1, 8192)
    assert capture[0] == 2 and vllm_pool.capture_sizes(capture[0], 8192) == [1, 2]  # the logged sizes
    small = vllm_pool.graph_bytes(acct, "V1", False, capture)
    assert 0 < small < default / 5
    assert vllm_pool.graph_bytes(acct, "V1", True, capture) == 0  # --enforce-eager: no estimate
    assert vllm_pool.graph_bytes(acct, "V2", False, capture) == 0  # 0.24.0's V2 runner returns 0


# Each recorded release from 0.25.0 to 0.33.0 and the line it takes its graph estimate from, with where its V1 runner's
# profile_cudagraph_memory sits (v1/worker/gpu_model_runner.py in that release's wheel): the same arithmetic as 0.26.0's
# (6576-6743) on CUDA, 0.25.x and 0.31.0-0.33.0 without 0.26.0's ROCm capture stream; gpu_worker.py subtracts it unless
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 (default 1). None of them has a recorded boot with graphs on.
CARRIED = {"0.25.0": "6498-6645", "0.25.1": "6498-6645", "0.27.1": "6645-6812", "0.28.0": "6780-6947",
           "0.29.0": "6733-6900", "0.30.0": "6661-6828", "0.31.0": "6606-6753", "0.32.0": "6333-6480",
           "0.33.0": "6268-6415"}


@pytest.mark.parametrize("release", sorted(CARRIED))
def test_a_release_with_0_26_0s_estimator_answers_with_its_capture_arithmetic(release: str) -> None:
    """The V1 runner of every release from 0.25.0 to 0.33.0 estimates graphs as 0.26.0's does (gpu_model_runner.py
    profile_cudagraph_memory at CARRIED[release]): kb takes the per-graph size measured on 0.26.0's boots, scales it
    to the capture sizes like 0.26.0's (not a flat 1 GiB), and the answer says whose boots it came from."""
    acct, own = vllm_pool.accounting(release), vllm_pool.accounting("0.26.0")
    assert acct.graph_from == "0.26.0" and acct.graph_estimate == own.graph_estimate
    default = vllm_pool.graph_bytes(acct, "V1", False, vllm_pool.DEFAULT_CAPTURE)
    assert default == own.graph_estimate < vllm_pool.GRAPH_ESTIMATE_BYTES
    few = vllm_pool.graph_bytes(acct, "V1", False, (2, 1, 8192))  # --max-num-seqs 1: sizes [1, 2]
    assert few == vllm_pool.graph_bytes(own, "V1", False, (2, 1, 8192)) < default / 5
    _, words = vllm_pool.reserve(_model("qwen3-30b-a3b"), 8192, 1024, acct=acct, run="V1")
    assert (f"per-graph size measured on vLLM 0.26.0 boots; no graphs boot of release {release}" in words), words


@pytest.mark.parametrize("release", ["0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"])
def test_the_v2_runners_own_estimator_keeps_the_flat_term_and_says_so(release: str) -> None:
    """From 0.29.0 the V2 runner (every model's default) estimates with its own code (v1/worker/gpu/cudagraph_utils.py
    profile_cudagraph_memory, 718-822 in 0.29.0, 922-1030 in 0.33.0): every PIECEWISE graph captured and measured,
    only FULL ones extrapolated, the two added. That is not the arithmetic 0.26.0's mean was measured with: kb keeps
    1 GiB for it and says it is unmodelled rather than carry the V1 figure."""
    acct = vllm_pool.accounting(release)
    assert acct.graph_runners == "V1"
    assert vllm_pool.graph_bytes(acct, "V2", False, (2, 1, 8192)) == vllm_pool.GRAPH_ESTIMATE_BYTES
    _, words = vllm_pool.reserve(_model("qwen3-30b-a3b"), 8192, 1024, acct=acct, run="V2")
    assert "V2-runner estimator" in words and "not modelled" in words and "0.26.0 boots" not in words


def test_the_release_records_cite_their_own_estimator() -> None:
    """Each accounting line that carries 0.26.0's estimate cites its own release's gpu_model_runner.py at the line
    profile_cudagraph_memory starts (CARRIED) and its own commit, not 0.26.0's."""
    from kbtool.solve.engines.vllm import records

    rows = records.recorded()
    for release in ("0.25.0", "0.28.0", "0.29.0", "0.33.0"):
        value, where = rows[release]["accounting"]["graph_estimate_from"]
        assert value == "0.26.0", release
        assert where.endswith(f"vllm/v1/worker/gpu_model_runner.py:{CARRIED[release].split('-')[0]}"), where
        assert rows["0.26.0"]["accounting"]["graph_estimate_gib"][1] != where


def test_a_query_names_the_release_its_per_graph_size_came_from() -> None:
    """End to end: Qwen3-30B-A3B (MoE: V1 runner on 0.28.0) answers with 0.26.0's per-graph size, said so."""
    r = run_kb("query", "--gpu", "h100", "--model", "qwen3-30b-a3b", "--ctx", "8k", "--engine", "vllm", "--vllm",
               "0.28.0", "--explain")
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    # the explain view sets each `;`-separated part of the reserve on its own line
    assert "CUDA graphs 0.62 GiB, vLLM 0.28.0's estimator with the per-graph size measured on vLLM 0.26.0 boots" in text
    assert "no graphs boot of release 0.28.0" in text
