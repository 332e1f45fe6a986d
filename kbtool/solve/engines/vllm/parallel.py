"""What tensor and pipeline parallelism add to the memory vLLM takes off before the KV pool, per release: what each
release's code fixes, from its engine-release record's `parallel:` line (kbtool/model/engine_release.py Parallel; each
value cites the release's code), and what only a GPU shows (NCCL's own buffers), estimated from a public figure and
said to be estimated (NCCL_COMM_BYTES). The lines below are the wheels' as those records cite them
(vllm-project/vllm; 0.24.0 = ee0da84ab, 0.26.0 = ffd46bfab, 0.33.0 = 4ba787ec9, 0.34.0 = 62d4bc3c7; paths under vllm/).

When a buffer is allocated decides whether the pool sees it. Every release read builds its process groups
(init_worker_distributed_environment) before it takes the memory snapshot its profile is measured from
(v1/worker/gpu_worker.py:322 and :341 in 0.24.0, :369/:388 in 0.26.0, :504/:541 in 0.33.0, :506/:549 in 0.34.0),
its budget is the device's total memory x utilization (v1/worker/utils.py:410 in 0.24.0, :430, :724, :743), not the
memory free at that snapshot, and its profile counts the non-torch memory that grows after the snapshot
(utils/mem_utils.py:306, :321 in 0.34.0). So what the groups allocate at start-up does not come off the KV budget:
it has to fit, with the CUDA context, in the (1 - utilization) share of the GPU (request_memory raises "Free memory
on device ... is less than desired GPU memory utilization" otherwise). The exception is 0.34.0's extensible KV
cache, sized after warm-up as min(budget - non-KV use, free memory + committed cache - margin)
(v1/worker/extensible_kv_cache.py:592-617): at its default utilization 1.0 the second term binds and everything
allocated before the snapshot comes off the cache (budget.fit adds `before` to the margin's binding part).

Allocated at start-up, per GPU, by a tensor-parallel group of tp > 1 GPUs (`start_up`):
- custom all-reduce (CustomAllreduce, tp in _SUPPORTED_WORLD_SIZES: 2, 4, 6, 8, and 16 from 0.33.0; kb assumes the
  GPUs have P2P access, and NVLink where tp > 2, else vLLM turns it off): a cudaMalloc'd, IPC-shared signal and
  scratch buffer of ops.meta_size() + max_size bytes (the signal block, a few KiB in the C++ code, is not counted
  here), an IPC input buffer of max_size bytes (from 0.33.0 max(max_size, 2 MiB all-gather, 16 MiB reduce-scatter)),
  and an 8 MiB rank_data tensor. max_size is 8 MiB, lowered to CUSTOM_ALL_REDUCE_MAX_SIZES[cc][tp] where the
  symmetric-memory all-reduce is on (sm90: 512 KiB at tp 6, 256 KiB at tp 8).
- the torch symmetric-memory all-reduce (VLLM_ALLREDUCE_USE_SYMM_MEM, on by default): a buffer of
  SYMM_MEM_ALL_REDUCE_MAX_SIZES[cc][tp] bytes (sm90: 64 MiB at tp 2, 32 MiB at 4, 64 MiB at 6 and 8), allocated
  before vLLM checks for multicast, so it stays where multicast is off; none on a GPU the table does not list.
- one NCCL communicator for each process group of more than one GPU (pynccl's ncclCommInitRank and its one-element
  warm-up all-reduce): the tensor-parallel group, the pipeline group, and for a MoE model the expert-parallel group
  (tp x dp GPUs; "Don't create EP group for dense models"). Its size is NCCL's, not vLLM's: NCCL_COMM_BYTES.
- quick all-reduce is built on ROCm only; FlashInfer's all-reduce (VLLM_ALLREDUCE_USE_FLASHINFER, on by default
  from 0.33.0) builds its workspace at the first all-reduce it takes, for FI_ALLREDUCE_FUSION_MAX_SIZE_MB bytes (sm90:
  64 MiB at tp 2, 2 at 4, 0.5 at 8; compilation/passes/fusion/allreduce_rms_fusion.py:104-109); its layout is
  FlashInfer's code, not read: not counted.

Allocated after the snapshot (while the weights load or the profile runs), so counted by every release:
- 0.24.0 gathers the logits through torch.distributed on the group's NCCL process group
  (distributed/device_communicators/base_device_communicator.py:198; its CudaCommunicator has no all_gather of its
  own), whose communicator torch creates at that first call: a second NCCL communicator, after the snapshot. From
  0.26.0 CudaCommunicator.all_gather goes through pynccl (cuda_communicator.py:341 in 0.26.0, :460 in 0.33.0, :487 in
  0.34.0), whose communicator exists already.
- NCCL connections it sets up lazily for an algorithm first used there (the profile's all-reduces of
  max_num_batched_tokens x hidden size exceed the custom and symmetric-memory limits and go through NCCL): not
  estimated; no public log of these releases shows them (0.24.0 logs the profile's breakdown at debug level only,
  v1/worker/gpu_worker.py:512 and :731).

No release read sets an NCCL environment variable for `vllm serve` (NCCL_NVLS_ENABLE=0 only in batch-invariant mode,
model_executor/layers/batch_invariant.py:961 in 0.24.0).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MIB = 1 << 20
# One NCCL communicator's device memory, per GPU: not in vLLM's code. Estimated from a vLLM contributor's figure,
# "When NCCL_MAX_NCHANNELS=16, an NCCL group typically occupies 100MB" (vllm-project/vllm#18242, description,
# 2025-05), never measured by kb.
NCCL_COMM_BYTES = 100 * 10**6
NCCL_SOURCE = "vllm-project/vllm#18242: ~100 MB per NCCL group at 16 channels"
FIELDS = ("groups_before_snapshot", "custom_allreduce_world_sizes", "custom_allreduce_max_bytes",
          "custom_allreduce_input_floor_bytes", "custom_allreduce_rank_data_bytes", "custom_allreduce_max_kib",
          "symm_mem_max_kib", "symm_mem_default", "logits_gather", "extensible_counts_start_up")


class Line:
    """One release's `parallel:` line (its engine-release record, kbtool/model/engine_release.py Parallel): each
    field's value, and where its groups are built (the source of `groups_before_snapshot`)."""

    __slots__ = ("release", "values", "where")

    def __init__(self, release: str, row: dict[str, Any]) -> None:
        facts = row["parallel"]
        self.release = release
        self.values = {k: v[0] for k, v in facts.items()}
        self.where = (facts.get("groups_before_snapshot") or (None, None))[1] or ""


def line(release: str | None, rows: dict[str, Any] | None = None) -> Line | None:
    """The `parallel:` line `release` takes: the newest recorded at or below it (None: the release kb's boots
    measured); None where no record has one or `release` is older than every record that has one (not read)."""
    from kbtool.solve.conditions import compare_versions
    from kbtool.solve.engines.vllm import records

    rows = records.lines(rows) if rows is not None else records.recorded()
    have = [r for r, row in rows.items() if row.get("parallel")]
    if not have:
        return None
    rel = records.line_release(release, rows, "parallel")
    if release and compare_versions(release, rel) < 0:
        return None
    return Line(rel, rows[rel])


def capability(sm: str | None) -> str | None:
    """'sm90' -> '9.0', 'sm103' -> '10.3' (vLLM's capability string); None where kb does not know the GPU's sm."""
    digits = (sm or "").removeprefix("sm")
    return f"{digits[:-1]}.{digits[-1]}" if digits.isdigit() and len(digits) >= 2 else None


class Parallel:
    """What tensor/pipeline parallelism adds, per GPU: `counted` (allocated during the profile run, so off the KV
    budget), `before` (allocated before the snapshot: off the pool only where the extensible cache sizes itself from
    free memory, `extensible`), how much of it is estimated rather than fixed by code (`estimated`), and the
    words."""

    __slots__ = ("before", "counted", "estimated", "extensible", "release", "words")

    def __init__(self, counted: int, before: int, estimated: int, words: str, release: str,
                 extensible: bool) -> None:
        self.counted, self.before, self.estimated, self.words = counted, before, estimated, words
        self.release, self.extensible = release, extensible


def _table(values: dict[str, Any], name: str, cc: str | None, tp: int) -> int:
    """A size in bytes from one of the line's KiB tables by capability and tensor-parallel size (0: no entry)."""
    row = (values.get(name) or {}).get(cc or "") or {}
    return int(row.get(tp) or row.get(str(tp)) or 0) << 10


def start_up(ln: Line, tp: int, cc: str | None) -> list[tuple[str, int]]:
    """The buffers the release's code fixes for a tensor-parallel group of `tp` GPUs, each (what, bytes)."""
    v = ln.values
    out: list[tuple[str, int]] = []
    if tp < 2:
        return out
    symm = _table(v, "symm_mem_max_kib", cc, tp) if v.get("symm_mem_default") else 0
    if symm:
        out.append(("symmetric-memory all-reduce buffer", symm))
    if tp in (v.get("custom_allreduce_world_sizes") or []):
        size = int(v["custom_allreduce_max_bytes"])
        cap = _table(v, "custom_allreduce_max_kib", cc, tp)
        if symm and cap:  # lowered only where the symmetric-memory all-reduce is on
            size = min(size, cap)
        out += [("custom all-reduce scratch", size),
                ("custom all-reduce input buffer", max(size, int(v.get("custom_allreduce_input_floor_bytes") or 0))),
                ("custom all-reduce rank_data", int(v["custom_allreduce_rank_data_bytes"]))]
    return out


def parallel(release: str | None, tp: int, pp: int = 1, *, sm: str | None = None, moe: bool = False,
             extensible: bool = False, rows: dict[str, Any] | None = None) -> Parallel | None:
    """What `tp` x `pp` parallelism adds under vLLM `release` (None where both are 1); `extensible`: the release's
    extensible KV cache is on; `rows`: vLLM's engine-release rows of the query image (None: the records tree's)."""
    if tp <= 1 and pp <= 1:
        return None
    where = f"tensor parallel {tp}" + (f" x pipeline {pp}" if pp > 1 else "")
    ln = line(release, rows)
    if ln is None:  # code not read: nothing added, and the answer says so
        return Parallel(0, 0, 0, f"{where}: vLLM {release}'s process groups not read (no `parallel` line at or below "
                        "it): nothing added for them, estimated", release or "", False)
    v = ln.values
    fixed = start_up(ln, tp, capability(sm))
    comms = (tp > 1) + (pp > 1) + (moe and tp > 1)
    before = sum(b for _, b in fixed) + comms * NCCL_COMM_BYTES
    counted = NCCL_COMM_BYTES if v.get("logits_gather") == "device group" and tp > 1 else 0
    of = f"vLLM {ln.release}" + (f" (read for {release})" if release and release != ln.release else "")
    parts = ", ".join(f"{w} {b / MIB:g} MiB" for w, b in fixed)
    groups = " + ".join(g for g, on in (("tp", tp > 1), ("pp", pp > 1), ("ep", moe and tp > 1)) if on)
    start = (f"{parts}, " if parts else "") + f"{comms} NCCL communicator{'s' if comms != 1 else ''} ({groups})"
    cite = f"vLLM {ln.release} " + (ln.where.split(" ", 1)[-1].removeprefix("vllm/") if ln.where else "record")
    on_extensible = extensible and bool(v.get("extensible_counts_start_up"))
    if on_extensible:
        words = (f"{where}: {of} allocates {start} before its memory snapshot ({cite}), and its extensible KV cache "
                 f"sizes itself from the free memory, so they come off the pool: {before / 1e9:,.2f} GB")
    elif v.get("groups_before_snapshot"):
        words = (f"{where}: {of} allocates {start} before its memory snapshot ({cite}), so they do not come off "
                 "the KV budget (total memory x utilization)")
    else:
        words = f"{where}: {of} allocates {start} after its memory snapshot ({cite}): they come off the KV budget"
        counted += before
    if v.get("logits_gather") == "device group" and tp > 1:
        words += ("; its logits' all-gather creates one more NCCL communicator during the profile run "
                  f"(torch.distributed's process group): {NCCL_COMM_BYTES / 1e9:,.2f} GB")
    estimated = (comms * NCCL_COMM_BYTES if on_extensible or not v.get("groups_before_snapshot") else 0) + (
        NCCL_COMM_BYTES if v.get("logits_gather") == "device group" and tp > 1 else 0)
    words += (f"; NCCL's communicator memory estimated ({NCCL_SOURCE}), not measured by kb, and the NCCL buffers it "
              "sets up lazily in the profile run not modelled")
    return Parallel(counted, before if on_extensible else 0, estimated, words, ln.release, on_extensible)
