"""vLLM under tensor/pipeline parallel (issue 44): what each release's process groups allocate, and whether the KV pool
sees it (kbtool/solve/engines/vllm/parallel.py). Lines are the wheels' (vllm-project/vllm, paths under vllm/; 0.24.0 =
ee0da84ab, 0.26.0 = ffd46bfab, 0.33.0 = 4ba787ec9, 0.34.0 = 62d4bc3c7).

Before this, kb took the single-GPU non-torch figure for every tensor-parallel size and said nothing of the
collectives: no start-up buffer, no communicator, no estimate named, and the answer quoted the error band of
single-GPU boots for a TP 4 question."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool import query_cli
from kbtool.solve.engines.vllm import budget, parallel, records
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve

MIB = 1 << 20
NCCL = parallel.NCCL_COMM_BYTES


@pytest.fixture(scope="module")
def img() -> Any:
    return query_cli.image()


def test_custom_all_reduce_and_symmetric_memory_buffers_follow_each_release() -> None:
    """custom_all_reduce.py:59 (max_size=8192 * 1024), :131 (lowered to CUSTOM_ALL_REDUCE_MAX_SIZES where symmetric
    memory is on), :174 and :178 (scratch and input buffer of max_size), :185 (8 MiB rank_data) in 0.24.0; 0.33.0's
    input buffer is max(max_size, 2 MiB, 16 MiB) (custom_all_reduce.py:303); symm_mem.py:91 allocates
    SYMM_MEM_ALL_REDUCE_MAX_SIZES[cc][tp] (all_reduce_utils.py:52-70 in 0.24.0: sm90 32 MiB at tp 4, 64 MiB at 8)."""
    def sizes(rel: str, tp: int, sm: str | None) -> dict[str, int]:
        ln = parallel.line(rel)
        assert ln is not None
        return dict(parallel.start_up(ln, tp, parallel.capability(sm)))

    assert sizes("0.24.0", 4, "sm90") == {"symmetric-memory all-reduce buffer": 32 * MIB,
                                          "custom all-reduce scratch": 8 * MIB,
                                          "custom all-reduce input buffer": 8 * MIB,
                                          "custom all-reduce rank_data": 8 * MIB}
    tp8 = sizes("0.24.0", 8, "sm90")  # CUSTOM_ALL_REDUCE_MAX_SIZES["9.0"][8] = 256 KiB
    assert tp8["custom all-reduce scratch"] == tp8["custom all-reduce input buffer"] == 256 << 10
    assert tp8["symmetric-memory all-reduce buffer"] == 64 * MIB
    assert sizes("0.33.0", 8, "sm90")["custom all-reduce input buffer"] == 16 * MIB
    # an sm the symmetric-memory table does not list: no buffer, the custom all-reduce keeps 8 MiB
    assert sizes("0.26.0", 2, "sm120") == {"custom all-reduce scratch": 8 * MIB,
                                           "custom all-reduce input buffer": 8 * MIB,
                                           "custom all-reduce rank_data": 8 * MIB}
    # tp 16 only from 0.33.0 (_SUPPORTED_WORLD_SIZES, custom_all_reduce.py:52 in 0.24.0, :118 in 0.33.0)
    assert "custom all-reduce scratch" not in sizes("0.26.0", 16, "sm90")
    assert "custom all-reduce scratch" in sizes("0.34.0", 16, "sm90")


def test_start_up_buffers_stay_out_of_the_utilization_budget() -> None:
    """The groups are built before the snapshot (v1/worker/gpu_worker.py:369 and :388 in 0.26.0, :504/:541 in 0.33.0)
    and the budget is total memory x utilization (v1/worker/utils.py:431 in 0.26.0): nothing comes off the pool."""
    for rel in ("0.26.0", "0.33.0"):
        p = parallel.parallel(rel, 4, sm="sm90")
        assert p is not None and p.counted == 0 and p.before == 0
        assert "do not come off the KV budget" in p.words and "estimated" in p.words
    assert parallel.parallel("0.26.0", 1) is None


def test_024_logits_all_gather_creates_a_communicator_during_the_profile() -> None:
    """0.24.0 gathers the logits through torch.distributed on the device group
    (distributed/device_communicators/base_device_communicator.py:198; no CudaCommunicator.all_gather), whose NCCL
    communicator torch creates at that first call, inside the profile; 0.26.0 goes through pynccl
    (cuda_communicator.py:341), created before the snapshot."""
    p = parallel.parallel("0.24.0", 2, sm="sm90")
    assert p is not None and p.counted == NCCL and p.estimated == NCCL
    assert parallel.parallel("0.26.0", 2, sm="sm90").counted == 0  # type: ignore[union-attr]
    # a release between the ones read takes the newest read at or below it, and says so
    assert "(read for 0.25.0)" in parallel.parallel("0.25.0", 2, sm="sm90").words  # type: ignore[union-attr]


def test_034_extensible_cache_counts_the_start_up_buffers() -> None:
    """0.34.0 sizes the extensible cache as min(budget - non-KV use, free + committed - margin)
    (v1/worker/extensible_kv_cache.py:592-617): at utilization 1.0 what was allocated before the snapshot
    (gpu_worker.py:506, :549) is not free, so it comes off the pool. TP 4 on sm90: symmetric memory 32 MiB, custom
    all-reduce 8 + 16 + 8 MiB, the tp group's NCCL communicator (estimated); a MoE model's ep group adds one, a
    pipeline group one more."""
    p = parallel.parallel("0.34.0", 4, sm="sm90", extensible=True)
    assert p is not None and p.before == 64 * MIB + NCCL and p.counted == 0
    moe = parallel.parallel("0.34.0", 4, 2, sm="sm90", moe=True, extensible=True)
    assert moe is not None and moe.before == 64 * MIB + 3 * NCCL
    off = parallel.parallel("0.34.0", 4, sm="sm90", extensible=False)  # the cache turned off: the budget rule
    assert off is not None and off.before == 0


def test_fit_takes_the_parallel_terms(img: Any) -> None:
    """budget.fit: 0.24.0 TP 2 reserves the profile-time communicator beyond pool.reserve; 0.34.0 TP 4 at
    utilization 1.0 with the extensible margins takes margin + the start-up buffers."""
    model = img.model("llama-3.1-70b")
    cap = 85_520_809_984
    kw: dict[str, Any] = {"batched_tokens": 8192, "max_num_seqs": 1024, "sm": "sm90"}
    acct = vllm_pool.accounting("0.24.0")
    f = budget.fit(model, "bf16", cap, 32768, tp=2, utilization=0.92, release="0.24.0", acct=acct, **kw)
    res, _ = vllm_pool.reserve(model, 8192, 1024, tp=2, acct=acct)
    assert f.reserve_bytes == res + NCCL
    assert "estimated" in f.formula
    margins = records.recorded()["0.34.0"]["margins"]
    acct = vllm_pool.accounting("0.34.0")
    f = budget.fit(model, "bf16", cap, 32768, tp=4, utilization=1.0, release="0.34.0", acct=acct, margins=margins,
                   **kw)
    res, _ = vllm_pool.reserve(model, 8192, 1024, tp=4, acct=acct)
    act, _ = vllm_pool.activation_bytes(model, 8192, 1024, 4, acct)
    margin = max(int(margins["floor_bytes"]), int(act * float(margins["fraction"])))
    assert f.reserve_bytes == res + margin + 64 * MIB + NCCL


def test_tp_answer_does_not_quote_single_gpu_boots(img: Any) -> None:
    """Every recorded boot ran on one GPU: a TP 4 answer says no boot of its kind was recorded (estimated) instead of
    quoting the single-GPU boots' error band."""
    a = solve(img, build_query(gpu="h100", model="llama-3.1-70b", ctx="32k", gpus=4, engine="vllm", vllm="0.26.0"))
    assert a.memory is not None and a.memory.pool is not None
    text = a.memory.pool.report["text"]
    assert "tensor-parallel 4 dense models recorded: estimated" in text, text
    assert "boots of dense models" not in text
    assert any("non-torch memory of vLLM's process groups is estimated" in n for n in a.memory.notes), a.memory.notes
    one = solve(img, build_query(gpu="h100", model="llama-3.1-8b", ctx="32k", engine="vllm", vllm="0.26.0"))
    assert one.memory is not None and one.memory.pool is not None
    assert "boots of dense models" in one.memory.pool.report["text"]


def test_a_release_older_than_the_code_read_adds_nothing_and_says_so() -> None:
    """0.19.1's process-group code was not read: no bytes are added for it, and the words say so."""
    p = parallel.parallel("0.19.1", 4, sm="sm90", extensible=True)
    assert p is not None and (p.counted, p.before) == (0, 0)
    assert "not read" in p.words and "estimated" in p.words


@pytest.mark.parametrize("release", ["0.24.0", "0.26.0", "0.33.0", "0.34.0"])
def test_each_release_read_has_its_own_parallel_line(release: str) -> None:
    """The four releases whose process-group code was read each carry every field, each citing that release's
    wheel (records/engine-releases/vllm-X.yaml `parallel:`); a release between them borrows the one below."""
    row = records.recorded()[release]
    assert set(row["parallel"]) == set(parallel.FIELDS)
    commit = {"0.24.0": "ee0da84a", "0.26.0": "ffd46bfa", "0.33.0": "4ba787ec", "0.34.0": "62d4bc3c"}[release]
    assert all(commit in str(loc) for _v, loc in row["parallel"].values())
    ln = parallel.line(release)
    assert ln is not None and ln.release == release


def test_the_verdict_counts_pipeline_stages_in_its_gpus(img: Any) -> None:
    """`-tp 2 -pp 2` runs one replica on 4 GPUs; the verdict's header said 'x2' (the tensor-parallel size alone)
    while the memory answer sized one GPU of one of two stages."""
    from kbtool.render.verdict import answer_summary

    line = "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 2 -pp 2 --max-model-len 64k"
    a = solve(img, build_query(gpu="h100", engine="vllm", vllm_args=line))
    assert answer_summary(a).startswith("nvidia-h100-sxm x4:"), answer_summary(a)
    b = solve(img, build_query(gpu="h100", engine="vllm", vllm_args=line.replace(" -pp 2", "")))
    assert answer_summary(b).startswith("nvidia-h100-sxm x2:")
