"""vLLM's CUDA-graph estimate, taken off the KV budget before the pool is sized (v1/worker/gpu_worker.py:444-493 in
the 0.24.0 wheel, git ee0da84ab): what kb subtracts per release and capture sizes (kbtool/solve/engines/vllm/pool.py
graph_bytes, issue 44)."""

from __future__ import annotations

from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.store.records import load_tree
from tests.util import ROOT


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
