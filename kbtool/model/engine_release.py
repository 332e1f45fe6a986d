"""Engine release: the serving defaults one release of a serving engine resolves when the user leaves a setting
out, per accelerator where the engine reads the device (vLLM's batch sizes follow the GPU's memory and name).

Each value cites where the release sets it (an index into `sources`: the engine's file at that release) and the
record names the evidence of the engine's own config resolution that recorded it (the `vllm-engine-config` probe
for vLLM); tests/solve/engines/vllm/test_engine_release.py replays every recorded point against this record.
The kind is engine-neutral: SGLang's page size, mem_fraction_static and chunked-prefill size fit the same shape.
vLLM records also carry `planning` (how the release plans its KV cache: kbtool/solve/engines/vllm/planning.py) and,
where it was read, `accounting` (how it sizes the reserve before the pool: kbtool/solve/engines/vllm/pool.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import BoolFact, Fact, NumFact, Record, Ref, Strict, Version


class BatchTier(Strict):
    """One branch of the engine's per-device batch defaults; the first tier whose conditions hold applies."""

    min_memory_gib: float | None = Field(
        default=None, ge=0, description="Applies where the device's total memory is at least this many GiB (2^30 B)")
    not_device_names: list[str] = Field(
        default_factory=list, description="Not where the lower-cased device name contains one of these (e.g. a100)")
    not_cc: list[str] = Field(default_factory=list, description="Not on these compute capabilities (e.g. '12.1')")
    max_num_batched_tokens: int = Field(ge=1, description="Default max_num_batched_tokens for the serve entry point")
    max_num_seqs: int = Field(ge=1, description="Default max_num_seqs for the serve entry point")
    source: int = Field(ge=0, description="Index into the record's sources: where the release sets this tier")


class Margins(Strict):
    """The extensible KV cache's sizing margins (a release that sizes the cache after warm-up)."""

    floor_bytes: int = Field(ge=0, description="Smallest margin kept free beside the KV cache, in bytes")
    fraction: float = Field(ge=0, le=1, description="Margin as a fraction of the transient peak, if larger")
    non_torch_reserve_bytes: int = Field(ge=0, description="Part of the margin kept for non-torch allocations")
    source: int = Field(ge=0, description="Index into the record's sources")


class StartupCheck(Strict):
    """One check the release runs on its resolved settings, whose failure stops it: while it builds its config,
    before anything loads ("max_num_batched_tokens>=max_num_seqs"), or once its KV cache is sized, as the model
    runner settles its CUDA-graph mode ("max_num_seqs<=mamba_blocks"). The test itself is kb's replay of the
    engine module's, keyed by `check`; its words and its place are the release's own."""

    check: Literal["max_num_batched_tokens>=max_num_seqs", "max_num_seqs<=mamba_blocks"] = Field(
        description="Which check: max_num_batched_tokens>=max_num_seqs, the resolved max_num_batched_tokens must be "
        "at least the resolved max_num_seqs; max_num_seqs<=mamba_blocks, with full CUDA graphs a model with Mamba "
        "(or other recurrent-state) layers needs one KV cache block per decode sequence, so max_num_seqs must not "
        "exceed the cache's num_blocks")
    raises: str = Field(description="The exception the user sees, as the release raises it (e.g. pydantic's "
                        "ValidationError for SchedulerConfig, wrapping the ValueError)")
    message: str = Field(description="The release's message, with {field} where it formats a resolved value")
    source: int = Field(ge=0, description="Index into the record's sources: where the release makes the check")


class Defaults(Strict):
    """What the release resolves where the user gives no flag (each a fact citing its source)."""

    block_size: Fact[int] = Field(description="KV cache block (page) size in tokens, before a backend forces one")
    gpu_memory_utilization: NumFact = Field(description="Fraction of device memory the instance may use")
    async_scheduling: BoolFact = Field(description="Async scheduling on (one more batch in flight)")
    chunked_prefill: BoolFact = Field(description="Chunked prefill on for generative models")
    prefix_caching: BoolFact = Field(description="Prefix caching on for attention-only generative models")
    hybrid_prefix_caching: BoolFact = Field(description="Prefix caching on for hybrid Mamba / linear-attention models")
    hybrid_state_cache: Fact[str] = Field(
        description="How hybrid models keep their state with those defaults (vLLM's mamba_cache_mode: none, align)")
    hybrid_block_at_config: BoolFact | None = Field(
        default=None, description="The config itself widens a hybrid model's attention block to hold a state page "
        "(later releases do it when the backend is chosen)")
    model_runner: Fact[Literal["V1", "V2"]] = Field(description="The model runner the release uses by default")
    model_runner_v2_architectures: Fact[list[str]] | None = Field(
        default=None, description="Where given, the architectures that get the V2 runner; `model_runner` is the "
        "others'")
    model_runner_v2_dense: BoolFact | None = Field(
        default=None, description="The V2 runner also for every model that is neither MoE nor hybrid")
    model_runner_v2_listed_unquantized: BoolFact | None = Field(
        default=None, description="A listed architecture gets the V2 runner only where the model is neither MoE "
        "nor quantized")
    cudagraph_mode: Fact[str] = Field(description="The CUDA-graph mode it resolves")
    cudagraph_capture_ceiling: Fact[int] = Field(
        description="Largest CUDA-graph capture size before max_num_seqs x 2 and max_num_batched_tokens cap it")
    cudagraph_capture_ceiling_sm100: Fact[int] | None = Field(
        default=None, description="The same on the cc 10.x family, where the release raises it")
    cudagraph_prefill_capture_sm100: Fact[int] | None = Field(
        default=None, description="On the cc 10.x family, the largest prefill CUDA graph (in tokens, capped by "
        "max_num_batched_tokens), where the release captures prefill graphs there by default")
    cudagraph_capture_by_architecture: Fact[dict[str, int]] | None = Field(
        default=None, description="Architectures whose config sets the largest decode capture size itself (then "
        "capped by max_num_batched_tokens only; not on cc 10.x where a prefill capture size is recorded)")
    kv_cache_dtype_auto: Fact[str] = Field(description="What --kv-cache-dtype auto stores: 'model' (the model dtype)")
    extensible_kv_cache: BoolFact = Field(description="KV cache sized after warm-up from measured memory")


class Planning(Strict):
    """vLLM: how the release plans its KV cache from the memory left for it, and its start-up check, where releases
    differ (kbtool/solve/engines/vllm/planning.py replays the planning with these; the vllm-kv-planning probe's
    recorded points hold each release to its line). Whether hybrid models get prefix caching, and so Mamba state
    mode "align", is `defaults.hybrid_prefix_caching`."""

    in_flight: Fact[Literal["batched", "batches"]] = Field(
        description="The tokens a sliding-window or chunked-local request holds beside its window: 'batched' "
        "(max_num_batched_tokens) or 'batches' (max_concurrent_batches x max_num_batched_tokens)")
    null_block: BoolFact = Field(
        description="The start-up check plans against the memory less the one block the block pool keeps (null)")
    checkpoints: BoolFact = Field(
        description="Mamba prefill checkpoint pages count in a request's state pages in mode 'align' (MambaSpec)")
    mamba2_checkpoints: BoolFact = Field(
        description="A Mamba-2 layer exports one prefill checkpoint page (false where `checkpoints` is)")
    gdn_checkpoints: BoolFact = Field(
        description="A GDN layer exports one prefill checkpoint page where FlashInfer's GDN prefill runs (false "
        "where `checkpoints` is)")
    sliding_v: BoolFact = Field(
        description="A sliding-window layer's page holds V at its own head size (SlidingWindowSpec.head_size_v); "
        "false: V is sized as K")
    tokens: Fact[Literal["concurrency", "blocks per group"]] = Field(
        description="How the logged 'GPU KV cache size' is computed: 'concurrency' (int(maximum concurrency x "
        "max_model_len)) or 'blocks per group' (num_blocks // groups x block)")
    hint: Fact[Literal["short", "utilization", "extensible"]] = Field(
        description="How the start-up refusal is worded: 'short' (\"models's max seq len\" and the short "
        "gpu_memory_utilization hint), 'utilization' (the hint that names the CPU backend), 'extensible' (the "
        "extensible KV cache's hint, worded for a utilization below 1.0 and for a check after warm-up as the "
        "release words them)")


class Accounting(Strict):
    """vLLM: how the release sizes the memory it takes off before the KV pool, where releases differ
    (kbtool/solve/engines/vllm/pool.py). A release without this section is sized as the newest release at or
    below it that has one (the answer says whose line sized the reserve). Which model runner a model gets is
    `defaults.model_runner` and `defaults.model_runner_v2_architectures`."""

    graphs: Fact[Literal["none", "V1", "all", "measured"]] = Field(
        description="Which model runners' CUDA-graph memory estimate is subtracted before the pool is sized "
        "(unless eager): 'none' (logged only), 'V1' (the V2 runner's estimate is 0), 'all', 'measured' (with the "
        "extensible KV cache the runner estimates 0 before the pool, so the start-up check's capacity holds no "
        "graphs, and the graphs it captures after warm-up come off the cache it sizes from measured memory; "
        "without that cache, 'all')")
    v2_sampler: Fact[Literal["logits", "in-place", "full"]] = Field(
        description="What the V2 runner's profile run holds when it samples: 'logits' (the model-dtype logits and "
        "an fp32 copy, no top-k/top-p), 'in-place' (the model-dtype logits only, mutated in place) or 'full' (the "
        "V1 runner's full sampler)")
    mxfp4_scales_kept: BoolFact | None = Field(
        default=None, description="Its OAI Triton MXFP4 MoE path (the one a Hopper GPU takes) keeps the "
        "checkpoint's expert block scales on the layer beside the swizzled copy it builds, so the loaded weights "
        "hold those scales twice (one byte per 32 expert values); absent: false")
    mxfp4_scale_rows_align: NumFact | None = Field(
        default=None, description="On a Hopper GPU its OAI Triton MXFP4 MoE path swizzles each expert's block-scale "
        "matrix into triton_kernels' Hopper scale layout, which pads the matrix's rows (the projection's outputs) "
        "to a multiple of this (2 x num_warps x 2 x 8); absent: the padding is not modelled")
    mxfp4_scale_groups_align: NumFact | None = Field(
        default=None, description="... and its scale groups per row (inputs / 32) to a multiple of this (the layout's "
        "own 2, or 4 where vLLM pads them first); absent: the padding is not modelled")
    mxfp4_bias_fp32: BoolFact | None = Field(
        default=None, description="The same path converts the experts' biases to float32 for its kernels, so they "
        "are held at 4 B per value; absent: at the checkpoint's dtype")
    recheck_after_warmup: BoolFact | None = Field(
        default=None, description="With the extensible KV cache the start-up check runs twice: on the capacity "
        "reserved before warm-up, then on the block count measured after warm-up and graph capture (less the null "
        "block), worded for that second check; absent: false")
    graph_estimate_gib: NumFact | None = Field(
        default=None, description="The CUDA-graph memory estimate vLLM logged on this release's own recorded boots "
        "(graphs on, the runner whose estimate it subtracts), their mean in GiB: what kb takes off where `graphs` "
        "subtracts an estimate; absent: 1 GiB, kb's round figure")
    graph_estimate_from: Fact[str] | None = Field(
        default=None, description="Where this release has no graphs boot of its own and its CUDA-graph estimator is "
        "another recorded release's arithmetic (the source cites this release's code): that release, whose "
        "`graph_estimate_gib` kb scales to the capture sizes and names in the answer ('per-graph size measured on vLLM "
        "R boots; no graphs boot of release X'); absent: the line's own `graph_estimate_gib`, else 1 GiB")
    graph_estimate_runners: Fact[Literal["V1", "all"]] | None = Field(
        default=None, description="Which model runners' estimator is the arithmetic `graph_estimate_gib` or "
        "`graph_estimate_from` was measured with: 'V1' (the V2 runner's estimator differs: kb keeps 1 GiB for it and "
        "says it is not modelled), 'all'; absent: every runner `graphs` subtracts")
    encoder_pass: Fact[Literal["none", "V1", "all"]] | None = Field(
        default=None, description="Which model runners' profile run first encodes the largest dummy batch of a "
        "multimodal model's encoder budget and keeps the outputs through the text forward and sampler (unless "
        "--skip-mm-profiling): 'none', 'V1' (the V2 runner's profile run has no encoder pass), 'all'; absent: 'V1', "
        "the line of vLLM 0.24.0, marked not read")
    measured: BoolFact | None = Field(
        default=None, description="kb's reserve constants were read against recorded boots of this release; a "
        "query that names no release is sized as this release (one vLLM record says true)")


class Speculative(Strict):
    """vLLM: what the release's MTP speculative draft (`--speculative-config '{"method": "mtp", ...}'`) does to GPU
    memory, where it was read (kbtool/solve/engines/vllm/spec.py sizes it with these). A release without this line
    leaves every speculative draft unmodelled: the answer is conditional and names the flag."""

    mtp_methods: Fact[list[str]] = Field(
        description="The speculative methods the release takes as its MTP draft: 'mtp' and the model-specific names "
        "(MTPModelTypes in config/speculative.py) it warns are deprecated and replaces with 'mtp'")
    mtp_architectures: Fact[list[str]] = Field(
        description="Target architectures whose config the release turns into an MTP draft of the checkpoint's own "
        "MTP layers (SpeculativeConfig.hf_config_override), and that kb sizes (the model record's `mtp_layers`, "
        "`mtp_parameters`); another architecture's MTP draft stays unmodelled")
    state_blocks: BoolFact = Field(
        description="A Mamba/GDN layer holds num_speculative_tokens more state pages per request (MambaSpec "
        "num_speculative_blocks, set from num_speculative_tokens by the Mamba layer's get_kv_cache_spec)")
    shares_embeddings: BoolFact = Field(
        description="The MTP draft takes the target's lm_head (and its embedding where identical or absent) instead "
        "of loading its own: only the MTP layers' weights add to the model's")
    capture_decode_len: BoolFact = Field(
        description="The default CUDA-graph capture ceiling is max_num_seqs x (1 + num_speculative_tokens) x 2 "
        "(the decode query length times two) instead of max_num_seqs x 2")


class Parallel(Strict):
    """vLLM: what its process groups allocate under tensor and pipeline parallel, and whether the KV pool sees it
    (kbtool/solve/engines/vllm/parallel.py), where the release's code was read; a release without this section takes
    the newest release at or below it that has one, and one older than every such release is answered as not read.
    NCCL's own buffers are not in vLLM's code: kb estimates them (parallel.NCCL_COMM_BYTES) and says so."""

    groups_before_snapshot: BoolFact = Field(
        description="The worker builds its process groups (communicators and all-reduce buffers) before the memory "
        "snapshot its profile is measured from, and its budget is total memory x utilization, so what they "
        "allocate at start-up does not come off the KV budget")
    custom_allreduce_world_sizes: Fact[list[int]] = Field(
        description="Tensor-parallel sizes the custom all-reduce is built for (CustomAllreduce._SUPPORTED_WORLD_SIZES)")
    custom_allreduce_max_bytes: NumFact = Field(
        description="The custom all-reduce's default max_size: its scratch buffer and (at least) its input buffer")
    custom_allreduce_input_floor_bytes: NumFact = Field(
        description="The least size of the custom all-reduce's IPC input buffer whatever max_size is (the larger "
        "of its all-gather and reduce-scatter limits; 0 where the buffer is max_size)")
    custom_allreduce_rank_data_bytes: NumFact = Field(
        description="The custom all-reduce's rank_data tensor (pointer tuples of registered buffers)")
    custom_allreduce_max_kib: Fact[dict[str, dict[int, int]]] = Field(
        description="CUSTOM_ALL_REDUCE_MAX_SIZES in KiB by compute capability and tensor-parallel size: max_size is "
        "lowered to it where the symmetric-memory all-reduce is on")
    symm_mem_max_kib: Fact[dict[str, dict[int, int]]] = Field(
        description="SYMM_MEM_ALL_REDUCE_MAX_SIZES in KiB by compute capability and tensor-parallel size: the "
        "symmetric-memory all-reduce's buffer (none where the table has no entry)")
    symm_mem_default: BoolFact = Field(
        description="The symmetric-memory all-reduce is on by default (VLLM_ALLREDUCE_USE_SYMM_MEM)")
    logits_gather: Fact[Literal["device group", "pynccl"]] = Field(
        description="How the tensor-parallel logits are all-gathered: 'device group' (torch.distributed on the "
        "group's NCCL process group, whose communicator torch creates at that first call, inside the profile run) "
        "or 'pynccl' (vLLM's communicator, created before the snapshot)")
    extensible_counts_start_up: BoolFact = Field(
        description="The extensible KV cache sizes itself from the free memory after warm-up, so what the groups "
        "allocated before the snapshot comes off it where its headroom binds")


class EngineRelease(Record):
    kind: Literal["engine-release"] = Field(description="Record kind")
    engine: Literal["vllm", "sglang"] = Field(description="The serving engine")
    release: Version = Field(description="The engine release these defaults are of")
    entry_point: str = Field(description="The command whose defaults these are, e.g. 'vllm serve'")
    evidence: list[Ref] = Field(
        default_factory=list, description="Evidence of the engine's own config resolution (and, for `planning`, "
        "its own KV-cache planning) that recorded them")
    defaults: Defaults = Field(description="Release-wide defaults")
    batch: list[BatchTier] = Field(
        min_length=1, description="Per-device batch defaults, in the engine's order; the first that holds applies")
    extensible_margins: Margins | None = Field(
        default=None, description="The extensible KV cache's margins, where the release has one")
    startup_checks: list[StartupCheck] = Field(
        default_factory=list, description="Checks of the resolved settings that stop the release at start-up")
    planning: Planning | None = Field(
        default=None, description="vLLM: how the release plans its KV cache and words its start-up refusal; a "
        "record without one takes the newest at or below it that has one (every shipped vLLM record has one: "
        "tests/solve/engines/vllm/test_records.py)")
    accounting: Accounting | None = Field(
        default=None, description="vLLM: how the release sizes what it takes off before the KV pool, where it was "
        "read; a release without one borrows the newest at or below it that has one")
    speculative: Speculative | None = Field(
        default=None, description="vLLM: what the release's MTP speculative draft does to memory, where it was read; "
        "a release without one leaves speculative drafts unmodelled")
    parallel: Parallel | None = Field(
        default=None, description="vLLM: what its process groups allocate under tensor/pipeline parallel and "
        "whether the KV pool sees it, where it was read; a release without one borrows the newest at or below it "
        "that has one")

    def refs(self) -> list[tuple[str, str]]:
        return [("evidence", e) for e in self.evidence]
