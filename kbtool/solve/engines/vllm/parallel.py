"""What tensor and pipeline parallelism add to the memory vLLM takes off before the KV pool, per release: what each
release's code fixes, read off it, and what only a GPU shows (NCCL's own buffers), estimated from public figures and
said to be estimated. Lines are the wheels' (vllm-project/vllm; 0.24.0 = ee0da84ab, 0.26.0 = ffd46bfab, 0.33.0 =
4ba787ec9, 0.34.0 = 62d4bc3c7, the commits records/engine-releases cite); paths under vllm/.

When a buffer is allocated decides whether the pool sees it. Every release read builds its process groups
(init_worker_distributed_environment) before it takes the memory snapshot its profile is measured from
(v1/worker/gpu_worker.py:322 and :341 in 0.24.0, :369/:388 in 0.26.0, :504/:541 in 0.33.0, :506/:549 in 0.34.0),
its budget is the device's total memory x utilization (v1/worker/utils.py:411 in 0.24.0, :431, :725, :743), not the
memory free at that snapshot, and its profile counts the non-torch memory that grows after the snapshot
(utils/mem_utils.py:306, :321 in 0.34.0). So what the groups allocate at start-up does not come off the KV budget:
it has to fit, with the CUDA context, in the (1 - utilization) share of the GPU (request_memory raises "Free memory
on device ... is less than desired GPU memory utilization" otherwise). The exception is 0.34.0's extensible KV
cache, sized after warm-up as min(budget - non-KV use, free memory + committed cache - margin)
(v1/worker/extensible_kv_cache.py:592-617): at its default utilization 1.0 the second term binds and everything
allocated before the snapshot comes off the cache (budget.fit adds `before` to the margin's binding part).

Allocated at start-up, per GPU, by a tensor-parallel group of tp > 1 GPUs (`_start_up`):
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

Allocated during the profile run, so counted by every release (`_profile`):
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

from kbtool.solve.conditions import compare_versions

MIB = 1 << 20
# One NCCL communicator's device memory, per GPU: not in vLLM's code. Estimated from a vLLM contributor's figure,
# "When NCCL_MAX_NCHANNELS=16, an NCCL group typically occupies 100MB" (vllm-project/vllm#18242, description,
# 2025-05), never measured by kb.
NCCL_COMM_BYTES = 100 * 10**6
NCCL_SOURCE = "vllm-project/vllm#18242: ~100 MB per NCCL group at 16 channels"
READ = ("0.24.0", "0.26.0", "0.33.0", "0.34.0")  # the releases whose code this module was read against
# CUSTOM_ALL_REDUCE_MAX_SIZES and SYMM_MEM_ALL_REDUCE_MAX_SIZES (distributed/device_communicators/all_reduce_utils.py
# :31 and :52 in 0.24.0 and 0.26.0, :31 and :58 in 0.33.0 and 0.34.0; the same values, 10.7 added in 0.33.0), in KiB
CA_MAX_KIB = {"9.0": {2: 65536, 4: 32768, 6: 512, 8: 256}, "10.0": {2: 2048, 4: 2048, 6: 1024, 8: 1024},
              "10.3": {2: 4096, 4: 4096, 6: 8192, 8: 4096}, "10.7": {2: 4096, 4: 4096, 6: 8192, 8: 4096}}
SYMM_MAX_KIB = {"9.0": {2: 65536, 4: 32768, 6: 65536, 8: 65536}, "10.0": {2: 8192, 4: 32768, 6: 131072, 8: 131072},
                "10.3": {2: 4096, 4: 32768, 6: 32768, 8: 65536}, "10.7": {2: 4096, 4: 32768, 6: 32768, 8: 65536}}
CA_DEFAULT = 8 * MIB  # CustomAllreduce(max_size=8192 * 1024)
RANK_DATA = 8 * MIB  # torch.empty(8 * 1024 * 1024, dtype=torch.uint8)


class Line:
    """One release's code, as read: where its snapshot and budget are, the custom all-reduce's world sizes and input
    buffer, whether the logits' all-gather creates a communicator during the profile, whether the extensible cache
    counts what was allocated before the snapshot, and the lines that say so."""

    __slots__ = ("ca_sizes", "extensible", "gather_new_comm", "legacy_floor", "lines", "release", "snapshot",
                 "table_10_7")

    def __init__(self, release: str, lines: str, *, ca_sizes: tuple[int, ...], legacy_floor: int,
                 gather_new_comm: bool, extensible: bool, table_10_7: bool) -> None:
        self.release, self.lines, self.ca_sizes, self.legacy_floor = release, lines, ca_sizes, legacy_floor
        self.snapshot = lines.split(";")[0].removeprefix("v1/worker/gpu_worker.py:")  # "322, :341"
        self.gather_new_comm, self.extensible, self.table_10_7 = gather_new_comm, extensible, table_10_7


LINES = {
    "0.24.0": Line("0.24.0", "v1/worker/gpu_worker.py:322, :341; custom_all_reduce.py:59, :131, :174, :178, :185; "
                   "symm_mem.py:91; pynccl.py:137-144; base_device_communicator.py:198",
                   ca_sizes=(2, 4, 6, 8), legacy_floor=0, gather_new_comm=True, extensible=False, table_10_7=False),
    "0.26.0": Line("0.26.0", "v1/worker/gpu_worker.py:369, :388; custom_all_reduce.py:59, :131, :174, :178, :185; "
                   "symm_mem.py:91; pynccl.py:137-144; cuda_communicator.py:341",
                   ca_sizes=(2, 4, 6, 8), legacy_floor=0, gather_new_comm=False, extensible=False, table_10_7=False),
    "0.33.0": Line("0.33.0", "v1/worker/gpu_worker.py:504, :541; custom_all_reduce.py:138, :246, :296, :303, :317; "
                   "symm_mem.py:92; pynccl.py:180-190; cuda_communicator.py:460",
                   ca_sizes=(2, 4, 6, 8, 16), legacy_floor=16 * MIB, gather_new_comm=False, extensible=False,
                   table_10_7=True),
    "0.34.0": Line("0.34.0", "v1/worker/gpu_worker.py:506, :549; custom_all_reduce.py:138, :247, :297, :304, :318; "
                   "symm_mem.py:92; pynccl.py:180-190; cuda_communicator.py:487; "
                   "v1/worker/extensible_kv_cache.py:592-617",
                   ca_sizes=(2, 4, 6, 8, 16), legacy_floor=16 * MIB, gather_new_comm=False, extensible=True,
                   table_10_7=True),
}


def line(release: str | None) -> Line:
    """The newest release read at or below `release` (None: the oldest read, the release kb's boots measured)."""
    if release is None:
        return LINES[READ[0]]
    at_or_below = [r for r in READ if compare_versions(r, release) <= 0]
    return LINES[at_or_below[-1] if at_or_below else READ[0]]


def capability(sm: str | None) -> str | None:
    """'sm90' -> '9.0', 'sm103' -> '10.3' (vLLM's capability string); None where kb does not know the GPU's sm."""
    digits = (sm or "").removeprefix("sm")
    return f"{digits[:-1]}.{digits[-1]}" if digits.isdigit() and len(digits) >= 2 else None


class Parallel:
    """What tensor/pipeline parallelism adds, per GPU: `counted` (allocated during the profile run, so off the KV
    budget in every release), `before` (allocated before the snapshot: off the pool only where the extensible cache
    sizes itself from free memory, `extensible`), each with how much of it is estimated rather than fixed by code
    (`estimated`), and the words."""

    __slots__ = ("before", "counted", "estimated", "extensible", "release", "words")

    def __init__(self, counted: int, before: int, estimated: int, words: str, release: str,
                 extensible: bool) -> None:
        self.counted, self.before, self.estimated, self.words = counted, before, estimated, words
        self.release, self.extensible = release, extensible


def _start_up(ln: Line, tp: int, cc: str | None) -> list[tuple[str, int]]:
    """The buffers vLLM's code fixes for a tensor-parallel group of `tp` GPUs, each (what, bytes)."""
    out: list[tuple[str, int]] = []
    if tp < 2:
        return out
    tables = {k: v for k, v in SYMM_MAX_KIB.items() if k != "10.7" or ln.table_10_7}
    symm = tables.get(cc or "", {}).get(tp)
    if symm:
        out.append(("symmetric-memory all-reduce buffer", symm << 10))
    if tp in ln.ca_sizes:
        size = CA_DEFAULT
        cap = {k: v for k, v in CA_MAX_KIB.items() if k != "10.7" or ln.table_10_7}.get(cc or "", {}).get(tp)
        if symm and cap:  # lowered only where the symmetric-memory all-reduce is on
            size = min(size, cap << 10)
        out += [("custom all-reduce scratch", size), ("custom all-reduce input buffer", max(size, ln.legacy_floor)),
                ("custom all-reduce rank_data", RANK_DATA)]
    return out


def parallel(release: str | None, tp: int, pp: int = 1, *, sm: str | None = None, moe: bool = False,
             extensible: bool = False) -> Parallel | None:
    """What `tp` x `pp` parallelism adds under vLLM `release` (None where both are 1); `extensible`: the release's
    extensible KV cache is on (it sizes the pool from the free memory, so what was allocated before the snapshot
    counts)."""
    if tp <= 1 and pp <= 1:
        return None
    if release and compare_versions(release, READ[0]) < 0:  # code not read: nothing added, and the answer says so
        where = f"tensor parallel {tp}" + (f" x pipeline {pp}" if pp > 1 else "")
        return Parallel(0, 0, 0, f"{where}: vLLM {release}'s process groups not read (kb read {', '.join(READ)}): "
                        "nothing added for them, estimated", release, False)
    ln = line(release)
    cc = capability(sm)
    fixed = _start_up(ln, tp, cc)
    comms = (tp > 1) + (pp > 1) + (moe and tp > 1)
    before = sum(b for _, b in fixed) + comms * NCCL_COMM_BYTES
    counted = NCCL_COMM_BYTES if ln.gather_new_comm and tp > 1 else 0
    of = f"vLLM {ln.release}" + (f" (read for {release})" if release and release != ln.release else "")
    where = f"tensor parallel {tp}" + (f" x pipeline {pp}" if pp > 1 else "")
    parts = ", ".join(f"{w} {b / MIB:g} MiB" for w, b in fixed)
    groups = " + ".join(g for g, on in (("tp", tp > 1), ("pp", pp > 1), ("ep", moe and tp > 1)) if on)
    start = (f"{parts}, " if parts else "") + f"{comms} NCCL communicator{'s' if comms != 1 else ''} ({groups})"
    on_extensible = extensible and ln.extensible
    cite = f"vLLM {ln.release} v1/worker/gpu_worker.py:{ln.snapshot}"
    if on_extensible:
        words = (f"{where}: {of} allocates {start} before its memory snapshot ({cite}), and its extensible KV cache "
                 f"sizes itself from the free memory, so they come off the pool: {before / 1e9:,.2f} GB")
    else:
        words = (f"{where}: {of} allocates {start} before its memory snapshot ({cite}), so they do not come off "
                 "the KV budget (total memory x utilization)")
    if counted:
        words += (f"; its logits' all-gather creates one more NCCL communicator during the profile run "
                  f"(torch.distributed's process group, base_device_communicator.py:198): {counted / 1e9:,.2f} GB")
    estimated = (comms * NCCL_COMM_BYTES if on_extensible else 0) + counted
    words += (f"; NCCL's communicator memory estimated ({NCCL_SOURCE}), not measured by kb, and the NCCL buffers it "
              "sets up lazily in the profile run not modelled")
    return Parallel(counted, before if on_extensible else 0, estimated, words, ln.release, on_extensible)
