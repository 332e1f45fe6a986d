"""vLLM's own accounting of its KV pool, as vLLM 0.24.0 does it (and where other releases differ: Accounting, from
their engine-release records), and the two numbers it prints at start-up.

What vLLM sizes (vllm/v1/worker/gpu_worker.py:456-493 in the 0.24.0 wheel): available KV memory = utilization x
the device's memory - (weights + the torch peak of a profile run + non-torch memory) - the CUDA-graph estimate where
it is applied. The parts kb cannot read off a config are estimated here, each from what vLLM's code does:

- the profile run's peak (V1: gpu_model_runner.py:6060-6101 in the 0.24.0 wheel; V2: v1/worker/gpu/model_runner.py
  :652-667 in 0.24.0, :673-688 in 0.26.0): a forward pass of max_num_batched_tokens tokens, then a dummy sampler over
  max_num_seqs rows of logits. The V1 model runner runs the full sampler (fp32 logits, penalties, top-k/top-p with a
  sort of fp32 values and int64 indices): about 15 bytes per logit element, and that step sets the peak. The V2
  runner (the default for the architectures DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES lists, vllm/config/vllm.py:68-77)
  frees the forward's intermediates before it samples, so its peak is the larger of the two steps
  (v2_activation_bytes), each read off the code.
- non-torch memory: 0.2246 GiB in every H200 boot (CUDA context, cuBLAS workspaces); used for every GPU.
- CUDA graphs: the V1 runner profiles graph memory before the pool and subtracts it (the release's own boots' mean,
  scaled to the capture sizes, where its record has one: 0.24.0, 0.26.0; where its estimator is 0.26.0's arithmetic
  and it has no graphs boot, 0.26.0's mean, said so: 0.25.0-0.33.0, `accounting.graph_estimate_from`; else kb's
  1 GiB); the V2 runner returns 0 up to 0.28.0 (gpu/model_runner.py:684-686 in 0.24.0) and captures its graphs after
  the pool is sized; from 0.29.0 it estimates them with its own arithmetic (v1/worker/gpu/cudagraph_utils.py), which
  kb does not model (1 GiB, `accounting.graph_estimate_runners`).

The KV cache groups (vllm/v1/core/kv_cache_utils.py:1180-1225, 1344-1395, 919-937, 1788-1798): layers of one
attention type form one group; with several types the group size is the smallest type's layer count (the largest
when it is under 1.5x the smallest), each type is padded to whole groups ("Add N padding layers"), and every group
shares one pool of blocks of one page size; layer i of a type goes to group i mod n (kv_cache_utils.py:1223-1226),
so a padded type's last groups hold a layer fewer. Mamba layers (vllm_mamba): the attention block is widened
until one attention page holds a layer's state, and the state page is padded to it. A sparse-MLA model (DeepSeek-
V3.2, GLM-5) keeps an indexer key cache beside each latent: one UniformTypeKVCacheSpecs group whose block holds
both pages of every layer (_sparse_groups). What a request holds per group,
num_blocks, "GPU KV cache size", "Maximum concurrency" and the start-up check are each release's planning
(vllm_planning), replayed against vLLM's own code at every point the vllm-kv-planning probe recorded
(tests/solve/test_vllm_planning.py); `specs` gives that probe the per-layer specs kb derives here.
"""

from __future__ import annotations

import copy
import math

from kbtool.errors import KbError
from kbtool.solve.engines.vllm import mamba as vllm_mamba
from kbtool.solve.engines.vllm import planning as vllm_planning
from kbtool.solve.engines.vllm.defaults import capture_max
from kbtool.solve.engines.vllm.planning import Group, Planning, Point
from kbtool.solve.weights import experts_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.model import Model
    from kbtool.solve.engines.vllm.encoder_pass import Pass as EncoderPass
    from kbtool.solve.image import ModelV

GIB = 1 << 30
NON_TORCH_BYTES = int(0.2246 * GIB)
ACT_BYTES = 2  # an activation element in the model dtype (bf16/fp16)
# torch's cuBLAS workspace on sm90, taken through the caching allocator at the first cuBLAS matmul of the process
# (so inside the profile run's peak) and kept: pytorch/pytorch aten/src/ATen/cuda/CublasHandlePool.cpp,
# parseChosenWorkspaceSize (sm90 default 4096 * 8 * 1024 bytes) and getNewWorkspace (CUDACachingAllocator; read
# through code search, commit not pinned). The boots show it: Llama-3.1-8B 0.875 GiB against its AWQ int4
# checkpoint's 0.8438 GiB (Marlin kernels, no cuBLAS in the forward).
CUBLAS_WORKSPACE_BYTES = 32 << 20
# [T, H] hidden-size tensors alive at the MLP's peak, from each model's decoder layer (vllm/model_executor/models/,
# the same in the 0.24.0 and 0.26.0 wheels): the layer's input hidden states and residual, still held by the model's
# layer loop, and the MLP's input, 3 where the norms run in place (RMSNorm, fused_add_rms_norm.maybe_inplace,
# layers/layernorm.py:88); GemmaRMSNorm's fused add is out of place (layernorm.py:157 in 0.24.0, :160 in 0.26.0),
# so a Gemma layer also holds a new residual: 4. An MLP that keeps its gate/up output while down_proj writes its
# output (qwen2.py:110-113, gemma2.py:88-91, gemma3.py:89-92, deepseek_v2.py:270-273 in 0.26.0) adds that output: +1;
# Llama's and Mistral's rebind `x` and free it first (llama.py:115-118, mistral.py:70-73), so their peak is at the
# activation, with gate/up still alive.
INPLACE_NORM_MLP_FREES = frozenset({"LlamaForCausalLM", "MistralForCausalLM"})  # 3
GEMMA_NORM = frozenset({"Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"})  # 5
HIDDEN_LIVE_DEFAULT = 4  # the Qwen2 MLP with in-place norms (Qwen2, Qwen3, DeepSeek-V2, most others)
# compute_logits soft-caps the logits out of place (layers/logits_processor.py:66-69 in 0.24.0, :76-79 in 0.26.0):
# two logit tensors alive; Gemma 2 passes config.final_logit_softcapping (gemma2.py:344-345), 30.0 in its checkpoints
LOGIT_SOFTCAP = frozenset({"Gemma2ForCausalLM"})
GRAPH_ESTIMATE_BYTES = GIB  # no boot of the release logs its estimate: kb's round figure
NON_GATED_MOE = frozenset({"NemotronHForCausalLM"})  # relu2 experts (models/nemotron_h.py, is_non_gated_moe)
KV_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8": 1}
ATTENTION_TYPES = ("full", "sliding", "chunked", "mla")


class Accounting:
    """What one vLLM release does when it sizes the pool, where releases differ: its engine-release record's
    `accounting:` (each field described in kbtool/model/engine_release.py Accounting, each value citing the
    release's code), read on the releases where it was; a release without one takes the newest at or below it
    that has one, and the answer says whose line sized the reserve (`release`).

    - `v2`: the architectures the release's V2 model runner serves by default ("all", or a set), from the same
      record's `defaults.model_runner` and `defaults.model_runner_v2_architectures`: the fallback where no
      runner is passed (an answer takes the runner of the asked release's record, defaults.Defaults.runner).
    - `graphs`: which runners' CUDA-graph estimate is subtracted before the pool is sized, unless eager ("none",
      "V1", "all").
    - `v2_sampler`: bytes per logit element alive in the V2 runner's profiled sampler step (SAMPLER_BYTES by
      `accounting.v2_sampler`): "full" V1_SAMPLER_BYTES (the full sampler); "logits" 6, the model-dtype logits
      compute_logits returned, still held by _dummy_sampler_run, beside the fp32 copy the sampler works on (0.24.0
      v1/worker/gpu/sample/sampler.py:156-157); "in-place" 2, the model-dtype logits mutated in place (0.26.0
      sampler.py:162-168: no copy without logprobs, which the profile run does not ask for).
    - `mxfp4_scales_kept`: its OAI Triton MXFP4 MoE path keeps the checkpoint's expert scales beside their
      swizzled copy (budget.mxfp4_kept_scales counts them).
    - `mxfp4_scale_align` (rows, scale groups per row) and `mxfp4_bias_fp32`: how the same path on Hopper pads the
      expert block scales it swizzles and holds the expert biases (budget.mxfp4_hopper_layout counts them).
    - `encoder_pass`: which model runners' profile run first encodes the largest dummy multimodal batch and keeps
      its outputs through the text forward ("none", "V1", "all"; encoder_pass.py); `encoder_pass_where` cites the
      release's code, None where the value is carried from another release.
    - `recheck`: with the extensible KV cache the start-up check runs again after warm-up, on the block count the
      cache was sized to from measured memory (0.34.0 v1/core/kv_cache_planning.py:1827-1861), worded for it.

    graphs "measured" (0.34.0): with the extensible KV cache the V2 runner's graph estimate is 0
    (v1/worker/gpu/model_runner.py:1121-1125), so the capacity the first start-up check plans on holds no graphs
    (gpu_worker.py:742-780); the graphs captured after warm-up are in the memory measured after them
    (v1/worker/extensible_kv_cache.py:592-618), so they come off the cache it sizes (budget.fit). Without that
    cache it is "all".

    How "GPU KV cache size" is computed is the planning line's (planning.Planning.tokens).
    """

    __slots__ = ("asked", "capture_rule", "encoder_pass", "encoder_pass_where", "graph_estimate", "graph_from",
                 "graph_runners", "graphs", "mxfp4_bias_fp32", "mxfp4_scale_align", "mxfp4_scales_kept", "recheck",
                 "release", "v2", "v2_sampler")

    def __init__(self, release: str, row: dict[str, Any], others: dict[str, Any] | None = None) -> None:
        acct, d = row.get("accounting") or {}, row["defaults"]
        missing = [f for f in ("graphs", "v2_sampler") if f not in acct]
        if missing:
            raise KbError(f"engine-release {row.get('id') or release}: `accounting` lacks {', '.join(missing)}",
                          fix=f"add them to records/engine-releases/vllm-{release}.yaml (`kb validate` names the "
                          "line)")
        self.release, self.graphs = release, str(acct["graphs"][0])
        self.v2_sampler = SAMPLER_BYTES[acct["v2_sampler"][0]]
        self.mxfp4_scales_kept = bool((acct.get("mxfp4_scales_kept") or (False,))[0])
        rows, groups = ((acct.get(f"mxfp4_scale_{k}_align") or (None,))[0] for k in ("rows", "groups"))
        self.mxfp4_scale_align = (int(rows), int(groups)) if rows and groups else None
        self.mxfp4_bias_fp32 = bool((acct.get("mxfp4_bias_fp32") or (False,))[0])
        self.recheck = bool((acct.get("recheck_after_warmup") or (False,))[0])
        # which runners' profile run encodes the dummy multimodal batch first (encoder_pass.py); absent: 0.24.0's
        # line, not read in this release
        enc = acct.get("encoder_pass")
        self.encoder_pass = str(enc[0]) if enc else "V1"
        self.encoder_pass_where = str(enc[1]) if enc and enc[1] else None  # its citation; None: not read
        # the CUDA-graph estimate: the line's own boots' mean; else, where its estimator is another release's
        # arithmetic (`graph_estimate_from`, citing this release's code), that release's mean; else None (1 GiB)
        est, self.graph_from = (acct.get("graph_estimate_gib") or (None,))[0], release
        carried = (acct.get("graph_estimate_from") or (None,))[0]
        if est is None and carried is not None:
            src = ((others or {}).get(str(carried)) or {}).get("accounting") or {}
            est, self.graph_from = (src.get("graph_estimate_gib") or (None,))[0], str(carried)
            if est is None:
                raise KbError(f"engine-release {row.get('id') or release}: `accounting.graph_estimate_from` names "
                              f"vLLM {carried}, whose record has no `accounting.graph_estimate_gib`",
                              fix="name a release whose boots logged the estimate (records/engine-releases)")
        self.graph_estimate = round(float(est) * GIB) if est is not None else None
        runners = acct.get("graph_estimate_runners")
        self.graph_runners = str(runners[0]) if runners else "all"  # whose estimator that arithmetic is
        self.asked = release  # the release the answer is for (accounting() sets it where it carries this line)
        self.capture_rule: dict[str, Any] = d  # the release's defaults, which defaults.capture_max reads
        listed: list[str] = (d.get("model_runner_v2_architectures") or ([], ""))[0]
        self.v2: frozenset[str] | str = "all" if d["model_runner"][0] == "V2" else frozenset(listed)


V1_SAMPLER_BYTES = 15.04  # per logit element: fp32 logits + the top-k/top-p sort (values fp32, indices int64)
SAMPLER_BYTES = {"full": V1_SAMPLER_BYTES, "logits": ACT_BYTES + 4.0, "in-place": float(ACT_BYTES)}  # Accounting


def accounting(release: str | None, rows: dict[str, Any] | None = None) -> Accounting:
    """The accounting of `release`: the newest recorded line at or below it (older than all: the oldest; None: the
    release kb's reserve constants were measured on, MEASURED). `rows`: vLLM's engine-release rows of the query
    image (defaults.rows); None: the records tree's (records.recorded), each line built once."""
    from kbtool.solve.engines.vllm import records

    if rows is not None:
        rel = records.line_release(release, rows, "accounting")
        return _asked(Accounting(rel, rows[rel], rows), release)
    rows = records.recorded()
    rel = records.line_release(release, rows, "accounting")
    if rel not in _LINES:
        _LINES[rel] = Accounting(rel, rows[rel], rows)
    return _asked(_LINES[rel], release)


def _asked(line: Accounting, release: str | None) -> Accounting:
    """`line` for an answer about `release` (a release it is carried to): a copy whose `asked` names it, so the
    answer says whose boots a carried CUDA-graph estimate was measured on."""
    if not release or release == line.release:
        return line
    out = copy.copy(line)
    out.asked = release
    return out


_LINES: dict[str, Accounting] = {}


def __getattr__(name: str) -> Accounting:
    """MEASURED: the line the recorded boots measured (the record whose `accounting.measured` is true), used where
    no release is given."""
    if name == "MEASURED":
        return accounting(None)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def runner(model: Model | ModelV, acct: Accounting | None = None) -> str:
    """'V2' or 'V1': which model runner this vLLM release uses by default for this architecture."""
    acct = acct or accounting(None)
    return "V2" if acct.v2 == "all" or getattr(model, "architecture", None) in acct.v2 else "V1"


def moe_workspace_bytes(model: Model | ModelV, batched_tokens: int, tp: int = 1) -> int:
    """The fused-MoE scratch buffer vLLM keeps for the whole run (0 for a dense model).

    vLLM 0.24.0's modular MoE kernel takes its scratch space from the worker's workspace manager
    (fused_moe/modular_kernel.py:1093-1100, v1/worker/workspace.py:92-117), which grows to the largest request and
    never shrinks, so the profile run's forward leaves it allocated while the sampler runs. Its size, in the
    activation dtype, for M batched tokens, top-k experts, expert width I (per TP rank) and hidden size K: the Triton
    experts (experts/triton_moe.py:181-196) hold max(M*topk*max(I, K), M*K) + M*topk*max(2I, K) elements (gated
    MLP; I + I when not gated); gpt-oss's mxfp4 experts (experts/gpt_oss_triton_kernels_moe.py:671-686) hold M*K +
    M*topk*I.
    """
    ex = experts_of(model)
    active, shared = int(ex.get("active") or 0), int(ex.get("shared") or 0)
    width, hidden = getattr(model, "intermediate_size", None), getattr(model, "hidden_size", None)
    if not active or not width or not hidden:
        return 0
    inter = math.ceil(width / (active + shared) / tp)  # kb's intermediate_size is the active MLP width
    m, k = batched_tokens, int(hidden)
    if getattr(model, "weight_dtype", None) == "mxfp4":
        elems = m * k + m * active * inter
    else:
        n = inter if getattr(model, "architecture", None) in NON_GATED_MOE else 2 * inter
        elems = max(m * active * max(inter, k), m * k) + m * active * max(n, k)
    return int(elems) * 2


def activation_bytes(model: Model | ModelV, batched_tokens: int, max_num_seqs: int, tp: int = 1,
                     acct: Accounting | None = None, run: str | None = None, *,
                     mm: EncoderPass | None = None, act_bytes: int = ACT_BYTES, spec: bool = False) -> tuple[int, str]:
    """The torch peak of vLLM's profile run (an estimate), and how it was computed; `run`: the model runner the
    release's record gives this model (defaults.Defaults.runner), else the accounting line's; `mm`: the encoder pass
    the release's profile run makes first (encoder_pass.py), whose outputs stay alive through the text steps;
    `act_bytes`: an activation element in the model dtype vLLM runs (4 under --dtype float32); `spec`: a
    speculative draft is configured (the V1 runner's profile then runs its rejection sampler too)."""
    act, how = _text_activation_bytes(model, batched_tokens, max_num_seqs, tp, acct, run, act_bytes, spec)
    if mm is None:
        return act, how
    peak = mm.profile_peak(act)
    sets = "the encoder pass sets it" if mm.peak > act + mm.outputs else "the text steps with the outputs set it"
    return peak, (f"max({mm.words}; text steps {how} = {act / 1e9:,.2f} GB + the kept outputs): {sets}")


def _text_activation_bytes(model: Model | ModelV, batched_tokens: int, max_num_seqs: int, tp: int,
                           acct: Accounting | None, run: str | None, act_bytes: int = ACT_BYTES,
                           spec: bool = False) -> tuple[int, str]:
    acct = acct or accounting(None)
    vocab = model.vocab_size or 128_000
    moe = moe_workspace_bytes(model, batched_tokens, tp)
    moe_words = f" + MoE workspace {moe / 1e9:,.2f} GB" if moe else ""
    if (run or runner(model, acct)) == "V2":
        return v2_activation_bytes(model, batched_tokens, max_num_seqs, tp, acct, moe, act_bytes)
    # V1's profile run is the same forward over max_num_batched_tokens, then the sampler over max_num_seqs rows: the
    # larger sets the peak. At vLLM's default 1,024 rows the sampler does for every recorded model; at 1 or 32 rows
    # the forward did (Qwen3-30B-A3B on 0.26.0: 0.87 GiB logged, evidence 2026-12-07-nvidia-h100-sxm-vllm-boot-4/-5)
    # With a speculative draft the dummy sampler run ends with the rejection sampler over fresh logits of
    # num_reqs + one draft token per request rows, 2 x max_num_seqs (gpu_model_runner.py _dummy_sampler_run:
    # 0.19.1 :5621, 0.21.0 :5788, 0.24.0 :6139, 0.26.0 :6264, 0.33.0 :5957), sized here with the sampler's own
    # constant per element: the Qwen3.5-9B MTP boot on 0.26.0 logged 7.34 GiB against 3.55 GiB without the draft
    # (kb: 7.10 GiB)
    rows = 2 * max_num_seqs if spec else max_num_seqs
    samp = int(rows * vocab * V1_SAMPLER_BYTES + moe)
    fwd, fwd_words = forward_bytes(model, batched_tokens, tp, moe, act_bytes)
    words = (f"sampler {max_num_seqs} x {vocab:,} x 15 B" if not spec else
             f"rejection sampler (speculative draft) 2 x {max_num_seqs} x {vocab:,} x 15 B") + moe_words
    if fwd > samp:
        return fwd, f"V1 runner: max(forward: {fwd_words} = {fwd / 1e9:,.2f} GB, {words} = {samp / 1e9:,.2f} GB)"
    return samp, f"V1 runner: {words}"


def v2_activation_bytes(model: Model | ModelV, batched_tokens: int, max_num_seqs: int, tp: int, acct: Accounting,
                        moe: int = 0, act_bytes: int = ACT_BYTES) -> tuple[int, str]:
    """The V2 runner's profile peak: the larger of its two steps, since profile_run frees the forward's
    intermediates, all but hidden_states [T, H] and the rows it samples [R, H], before it runs the sampler (0.26.0
    v1/worker/gpu/model_runner.py:673-688 and :654-665; 0.24.0 :652-667 and :633-644). T = max_num_batched_tokens,
    R = max_num_seqs, H hidden size, I the MLP width per tensor-parallel rank, V the vocabulary. Lines are the
    wheels' (vllm 0.24.0 = git ee0da84ab, 0.26.0 = ffd46bfab, as records/engine-releases cite them).

    - forward, at the MLP of a decoder layer: gate/up [T, 2I] and the activation's [T, I] in the model dtype, plus
      the [T, H] tensors alive there (hidden_live), plus torch's cuBLAS workspace where the MLP runs through cuBLAS
      (unquantized weights; int4 and fp8 checkpoints run Marlin / CUTLASS kernels). An fp8 checkpoint quantizes the
      down projection's input first: an fp8 copy of [T, I] and its fp32 scales per group of 128
      (layers/quantization/utils/fp8_utils.py:605-631 in 0.26.0). A MoE model adds the fused-MoE workspace
      (moe_workspace_bytes), kept from its first MoE layer on.
    - sampler: [T, H] + [R, H] hidden states, the logits [R, V] at the release's bytes per element
      (Accounting.v2_sampler; at least two model-dtype copies where compute_logits soft-caps them, LOGIT_SOFTCAP),
      and the cuBLAS workspace (the lm_head is unquantized); the full sampler ("full", 0.33.0) is V1's step as kb
      sizes it, R x V x V1_SAMPLER_BYTES, a constant read against V1 boots with the hidden states in it.

    Each model-dtype element is `act_bytes` (4 under --dtype float32: the 0.26.0 boot of Qwen3-8B in float32 peaked
    at twice its bf16 forward); the logits' one model-dtype copy with it, the fp32 copy of "logits" stays 4 B.

    Not modelled: with CUDA graphs (no --enforce-eager) the profile forward is the first call of the
    torch.compile'd model, compiled there by Inductor (`need_eager` only skips graph replay, model_runner.py:
    1192-1200, 1358-1361), and its peak rises by an amount the code does not give (Qwen3-8B 0.84 -> 1.29 GiB,
    Gemma-3-12B 1.03 -> 1.99 GiB, DeepSeek-V2-Lite none: tests/probe/test_vllm_boot_memory.py)."""
    arch = getattr(model, "architecture", None)
    hidden = int(model.hidden_size or 4096)
    vocab = model.vocab_size or 128_000
    t, r = batched_tokens, max_num_seqs
    fwd, fwd_words = forward_bytes(model, batched_tokens, tp, moe, act_bytes)
    full = acct.v2_sampler == V1_SAMPLER_BYTES  # "full": the V1 runner's sampler, whose constant holds all of it
    per = acct.v2_sampler if full else acct.v2_sampler + act_bytes - ACT_BYTES  # one model-dtype copy in each
    per = max(per, 2.0 * act_bytes) if arch in LOGIT_SOFTCAP else per
    samp = r * vocab * per + (0 if full else act_bytes * (t + r) * hidden + CUBLAS_WORKSPACE_BYTES)
    words = (f"V2 runner: max(forward: {fwd_words} = {fwd / 1e9:,.2f} GB, sampler: logits {r} x "
             f"{vocab:,} x {per:g} B + hidden states = {samp / 1e9:,.2f} GB)")
    return int(max(fwd, samp)), words


def forward_bytes(model: Model | ModelV, batched_tokens: int, tp: int, moe: int = 0,
                  act_bytes: int = ACT_BYTES) -> tuple[int, str]:
    """The profile forward's peak over T = max_num_batched_tokens (v2_activation_bytes says what it holds), and how
    it was computed; `moe`: the fused-MoE workspace (moe_workspace_bytes)."""
    hidden = int(model.hidden_size or 4096)
    inter = math.ceil((model.intermediate_size or 4 * hidden) / tp)
    t = batched_tokens
    quant = getattr(model, "weight_dtype", None)
    cublas = quant in (None, "bf16", "fp16", "fp32")
    live = hidden_live(getattr(model, "architecture", None))
    cublas_bytes = CUBLAS_WORKSPACE_BYTES if cublas else 0
    moe_layers = int(experts_of(model).get("moe_layers") or 0)
    if moe and moe_layers >= sum(int(g.count) for g in getattr(model, "layers", None) or []):
        # every layer MoE: a layer's gate/up and activation intermediates are the fused-MoE workspace itself
        # (moe_workspace_bytes), allocated from the first MoE layer on, so an MLP term beside it held them twice
        # (Mixtral-8x7B -2.8% on 0.24.0's H200 boots); a model with dense layers too (DeepSeek-V2-Lite's first)
        # keeps its dense MLP term
        fwd = act_bytes * t * live * hidden + cublas_bytes + moe
        return int(fwd), (f"{live} x [{t:,}, {hidden:,}] x {act_bytes} B{' + cuBLAS workspace' if cublas else ''}"
                          f" + MoE workspace {moe / 1e9:,.2f} GB")
    fwd = act_bytes * t * (3 * inter + live * hidden) + cublas_bytes + moe
    quant_words = ""
    if quant in ("fp8", "fp8_e4m3"):
        fwd += t * inter + t * (inter // 128) * 4
        quant_words = " + fp8 copy of [T,I]"
    moe_words = f" + MoE workspace {moe / 1e9:,.2f} GB" if moe else ""
    return int(fwd), (f"MLP {t:,} x (3 x {inter:,} + {live} x {hidden:,}) x {act_bytes} B{quant_words}"
                      f"{' + cuBLAS workspace' if cublas else ''}{moe_words}")


def hidden_live(arch: str | None) -> int:
    """The [T, H] tensors alive at a decoder layer's MLP peak in vLLM's model code (the comment above
    INPLACE_NORM_MLP_FREES cites it)."""
    if arch in INPLACE_NORM_MLP_FREES:
        return 3
    return 5 if arch in GEMMA_NORM else HIDDEN_LIVE_DEFAULT


def capture_sizes(largest: int, batched_tokens: int) -> list[int]:
    """vLLM's default CUDA-graph capture sizes up to `largest`: 1, 2, 4, every 8 below 256, every 16 from 256, and
    max_num_batched_tokens where it is within (config/vllm.py:1819-1844 in 0.26.0)."""
    sizes = [i for i in (1, 2, 4) if i <= largest]
    if largest >= 8:
        sizes += range(8, min(largest + 1, 256), 8)
    if largest >= 256:
        sizes += range(256, largest + 1, 16)
    if batched_tokens <= largest:
        sizes.append(batched_tokens)
    return sorted(set(sizes))


# vLLM's CUDA-graph estimate (v1/worker/gpu_model_runner.py profile_cudagraph_memory, 6576-6742 in 0.26.0; the same
# arithmetic on CUDA from 0.24.0 to 0.33.0, test_graph_estimate.py CARRIED): per mode, the largest size's capture plus
# (n - 1) x the second largest's, FULL and PIECEWISE overlaid (the larger first capture counts once). Its terms as
# Qwen3-30B-A3B's three 0.26.0 H100 boots logged them (evidence 2026-12-07-nvidia-h100-sxm-vllm-boot-4 and -5,
# max_num_seqs 1, 32 and 1024): PIECEWISE's first capture 42 MiB at 2 tokens to 102 MiB at 512, 6 MiB per further graph;
# FULL's 2, 18 and 258 MiB at 1, 32 and 512 tokens, 2 MiB per further graph. Only their shape is used (graph_bytes): one
# model's, so it scales a release's own mean, never replaces it.
GRAPH_SHAPE_MIB = {"piecewise_first": 42.0, "piecewise_first_per_token": 0.117, "piecewise_per_graph": 6.0,
                   "full_first_per_token": 0.5, "full_per_graph": 2.0}
DEFAULT_CAPTURE = (512, 1024, 8192)  # largest size, max_num_seqs, max_num_batched_tokens of the boots the mean is of


def graph_shape(largest: int, max_num_seqs: int, batched_tokens: int) -> float:
    """vLLM's estimate in MiB for these capture sizes, with GRAPH_SHAPE_MIB's terms: PIECEWISE graphs at every size,
    FULL ones at the sizes up to max_num_seqs (v1/cudagraph_dispatcher.py:189-231 in 0.26.0)."""
    c = GRAPH_SHAPE_MIB
    pw = capture_sizes(largest, batched_tokens)
    full = [x for x in pw if x <= max_num_seqs]
    first = max(c["piecewise_first"] + c["piecewise_first_per_token"] * pw[-1],
                c["full_first_per_token"] * (full[-1] if full else 0))
    return first + c["piecewise_per_graph"] * (len(pw) - 1) + c["full_per_graph"] * max(len(full) - 1, 0)


def capture_of(acct: Accounting, model: Model | ModelV | None, max_num_seqs: int,
               batched_tokens: int, decode_len: int = 1) -> tuple[int, int, int]:
    """(largest capture size, max_num_seqs, max_num_batched_tokens), what graph_bytes scales by: the largest size as
    defaults.capture_max resolves it, without the cc 10.x prefill line. `decode_len`: a speculative decode step's
    query length (1 + num_speculative_tokens where the release sizes its capture ceiling by it, spec.Draft): the
    ceiling is max_num_seqs x decode_len x 2, and a uniform decode batch (FULL graphs) holds max_num_seqs x
    decode_len tokens."""
    seqs = max_num_seqs * decode_len
    largest = capture_max(acct.capture_rule, batched_tokens, seqs, "", getattr(model, "architecture", None))
    return largest, seqs, batched_tokens


def graph_bytes(acct: Accounting, run: str, eager: bool, capture: tuple[int, int, int] | None = None) -> int:
    """The CUDA-graph memory vLLM takes off before the KV pool is final: kb's estimate (GRAPH_ESTIMATE_BYTES) where
    the release subtracts graphs for this runner, estimated or measured after capture ("measured"); 0 eager.
    `capture` (largest size, max_num_seqs, max_num_batched_tokens): where the release's own boots give its mean,
    that mean is scaled to these capture sizes by vLLM's estimate's shape (graph_shape), never above it."""
    if eager or acct.graphs not in ("all", "measured", run):
        return 0
    if acct.graph_estimate is None or not graph_modelled(acct, run):
        return GRAPH_ESTIMATE_BYTES
    if capture is None:
        return acct.graph_estimate
    return round(acct.graph_estimate * min(1.0, graph_shape(*capture) / graph_shape(*DEFAULT_CAPTURE)))


def graph_modelled(acct: Accounting, run: str) -> bool:
    """Whether this runner's CUDA-graph estimator is the arithmetic the line's measured mean was taken with (0.29.0's
    V2 runner estimates with its own, v1/worker/gpu/cudagraph_utils.py: kb keeps 1 GiB for it)."""
    return acct.graph_estimate is not None and acct.graph_runners in ("all", run)


def graph_words(acct: Accounting, run: str = "V1") -> str:
    """How big kb takes the CUDA-graph estimate, and from what: the release's own boots' mean; another release's,
    where the asked release's estimator is that arithmetic and it has no graphs boot (said so); else 1 GiB."""
    if acct.graph_estimate is None:
        return "1 GiB, kb's estimate"
    if not graph_modelled(acct, run):
        return (f"1 GiB, kb's estimate (vLLM {acct.asked}'s {run}-runner estimator is not the V1 runner's arithmetic "
                "kb scales: not modelled)")
    if acct.graph_from == acct.asked:
        return (f"{acct.graph_estimate / GIB:.2f} GiB, the mean of vLLM {acct.asked}'s own estimate on its recorded "
                "boots")
    return (f"{acct.graph_estimate / GIB:.2f} GiB, vLLM {acct.asked}'s estimator with the per-graph size measured on "
            f"vLLM {acct.graph_from} boots; no graphs boot of release {acct.asked}")


def reserve(model: Model | ModelV, batched_tokens: int, max_num_seqs: int, *, tp: int = 1,
            eager: bool = False, acct: Accounting | None = None, run: str | None = None,
            extensible: bool = False, mm: EncoderPass | None = None, decode_len: int = 1,
            act_bytes: int = ACT_BYTES, spec: bool = False) -> tuple[int, str]:
    """What vLLM takes off the budget besides the weights: activation peak + non-torch + graphs where applied;
    `extensible`: the release's extensible KV cache is on (graphs "measured": captured after warm-up); `mm`: the
    encoder pass of the profile run (activation_bytes); `decode_len`: a speculative decode step's query length
    (capture_of); `act_bytes`, `spec`: as activation_bytes takes them."""
    acct = acct or accounting(None)
    run = run or runner(model, acct)
    act, how = activation_bytes(model, batched_tokens, max_num_seqs, tp, acct, run, mm=mm, act_bytes=act_bytes,
                                spec=spec)
    capture = capture_of(acct, model, max_num_seqs, batched_tokens, decode_len)
    graphs = graph_bytes(acct, run, eager, capture)
    words = f"{how} = {act / 1e9:,.2f} GB; non-torch {NON_TORCH_BYTES / 1e9:.2f} GB"
    if graphs and acct.graphs == "measured" and extensible:
        words += (f"; CUDA graphs {graph_words(acct, run)} (vLLM {acct.release} measures the graphs it captures after "
                  "warm-up and takes them off the extensible cache, not off the capacity its first start-up check "
                  "plans on)")
    elif graphs and graph_modelled(acct, run) and graphs < (acct.graph_estimate or 0):
        n = len(capture_sizes(capture[0], batched_tokens))
        words += (f"; CUDA graphs {graphs / GIB:.2f} GiB: {graph_words(acct, run)}, scaled to the {n} capture sizes "
                  f"up to {capture[0]} as vLLM's estimate scales on Qwen3-30B-A3B's boots ({run} runner: vLLM "
                  f"{acct.release} subtracts its estimate)")
    elif graphs:
        words += f"; CUDA graphs {graph_words(acct, run)} ({run} runner: vLLM {acct.release} subtracts its estimate)"
    elif eager:
        words += "; no CUDA-graph estimate (eager)"
    elif acct.graphs == "none":
        words += f"; no CUDA-graph estimate subtracted (vLLM {acct.release} only logs it)"
    else:
        words += f"; CUDA graphs captured after the pool ({run} runner)"
    return act + NON_TORCH_BYTES + graphs, words + f" (estimated from vLLM {acct.release}'s accounting)"


class Grouped(tuple):  # type: ignore[type-arg]
    """What groups() returns: the pair (groups, padding lines), with `block`, the attention block size vLLM
    settles on (wider than the one asked for in a Mamba hybrid)."""

    block: int

    def __new__(cls, gs: list[Group], padding: list[str], block: int) -> Grouped:
        self = super().__new__(cls, (gs, padding))
        self.block = block
        return self


class Report:
    """What vLLM prints and sizes at start-up, and whether its start-up check passes (`error`: its text)."""

    __slots__ = ("block_size", "concurrency", "error", "groups", "num_blocks", "padding", "per_request", "planning",
                 "starts", "state", "state_check", "tokens", "warning")

    def __init__(self, *, num_blocks: int, block_size: int, tokens: int, concurrency: float, groups: list[Group],
                 padding: list[str], starts: bool = True, error: str | None = None, per_request: int = 0,
                 planning: str = "", state: tuple[str, int] | None = None) -> None:
        self.num_blocks, self.block_size, self.tokens, self.concurrency = num_blocks, block_size, tokens, concurrency
        self.groups, self.padding, self.starts, self.error = groups, padding, starts, error
        self.per_request, self.planning, self.state = per_request, planning, state  # state: (Mamba mode, pages)
        # a Mamba model's state-block check (max_num_seqs against the cache's blocks under full CUDA graphs:
        # budget.state_blocks): (blocks, max_num_seqs) wherever it is made, and its text as a warning where it
        # fails and the answer names no engine
        self.state_check: tuple[int, int] | None = None
        self.warning: str | None = None

    @property
    def state_blocks(self) -> int | None:
        """The blocks of the state-block check where it refused the start (it runs only on a pool that starts)."""
        return self.state_check[0] if self.state_check is not None and not self.starts else None


def _page_bytes(g: object, kv_dtype: str, block: int, tp: int, sliding_v: bool = True) -> int | None:
    """One layer's page; `sliding_v` False: a sliding-window layer's V held at the K head size (vLLM 0.19.1's
    SlidingWindowSpec has no head_size_v, v1/kv_cache_interface.py:248-290)."""
    kind = getattr(g, "type", None)
    per = KV_BYTES.get(kv_dtype)
    if per is None:
        return None
    if kind == "mla":
        width = (getattr(g, "kv_lora_rank", None) or 512) + (getattr(g, "rope_dim", None) or 64)
        return block * width * per
    heads = max(1, (getattr(g, "kv_heads", None) or 1) // tp)
    hd = getattr(g, "head_dim", None) or 128
    hv = hd if kind == "sliding" and not sliding_v else (getattr(g, "head_dim_v", None) or hd)
    return block * heads * (hd + hv) * per


FP8_DS_MLA_BYTES = 656  # a sparse-MLA latent in FlashMLA's fp8_ds_mla layout, per token (_sparse_groups)
SPARSE_FP8 = ("fp8", "fp8_e4m3", "fp8_e5m2")

# vLLM's STR_DTYPE_TO_TORCH_DTYPE stores fp8 caches as uint8 (utils/torch_utils.py)
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "uint8", "fp8_e4m3": "uint8",
                "fp8_e5m2": "uint8"}


def indexer_head(g: object) -> int | None:
    """The head size of a sparse-MLA layer's indexer key cache in bytes (None: no indexer): vLLM's
    DeepseekV32IndexerCache holds index_head_dim fp8 values and one fp32 scale per 128 of them in uint8
    (model_executor/models/deepseek_v2.py, `head_dim=self.head_dim + self.head_dim // self.quant_block_size * 4`,
    quant_block_size 128: 0.19.1 :660-668, 0.24.0 :648-656, 0.33.0 and 0.34.0 :724-733), whatever the KV dtype."""
    ihd = getattr(g, "index_head_dim", None)
    return None if ihd is None else int(ihd) + int(ihd) // 128 * 4


def specs(model: Model | ModelV, kv_dtype: str, block: int, tp: int = 1) -> dict[str, Any] | None:
    """The per-layer KV specs vLLM builds for this model on one tensor-parallel rank, as the vllm-kv-planning probe
    hands them to vLLM's planning (probes/_vllm_kv_planning.py make_specs): the attention block (widened for Mamba
    state, vllm_mamba), the torch dtype, and per layer group its spec class's fields (KV heads per rank
    max(1, heads // tp), vllm/config/model.py get_num_kv_heads; Mamba tensors split along their TP dim and the page
    padded to the attention page; a sparse-MLA layer's indexer key cache, `indexer`: an MLAAttentionSpec of
    indexer_head bytes in uint8). None where kb does not model the layout (groups() returns None, an nvfp4
    cache)."""
    grouped = groups(model, kv_dtype, block, tp)
    if grouped is None or kv_dtype not in TORCH_DTYPES:
        return None
    block = grouped.block
    mla = any(g.type == "mla" for g in model.layers)
    out: list[dict[str, Any]] = []
    for g in model.layers:
        if g.type == "linear":
            state = [{"shape": _split(s, tp), "dtype": TORCH_DTYPES[_get(s, "dtype")]} for s in g.state or []]
            page = next(x.page_bytes for x in grouped[0] if x.kind == "mamba")
            out.append({"type": "mamba", "count": g.count, "state": state, "page_padded": page})
        elif g.type == "mla":
            latent: dict[str, Any] = {"type": "mla", "count": g.count,
                                      "head_dim": (g.kv_lora_rank or 512) + (g.rope_dim or 64)}
            if indexer_head(g):
                latent["indexer"] = {"head_dim": indexer_head(g), "dtype": "uint8"}
            out.append(latent)
        else:
            d: dict[str, Any] = {"type": g.type, "count": g.count, "kv_heads": max(1, (g.kv_heads or 1) // tp),
                                 "head_dim": g.head_dim or 128}
            if getattr(g, "head_dim_v", None) and g.head_dim_v != g.head_dim:
                d["head_dim_v"] = g.head_dim_v
            if g.type == "sliding":
                d["window"] = g.window
            if g.type == "chunked":
                d["chunk"] = g.chunk
            out.append(d)
    cache = "auto" if kv_dtype in ("bf16", "fp16", "fp32") else "fp8"
    if cache == "fp8" and any(indexer_head(g) for g in model.layers):
        cache = "fp8_ds_mla"  # FLASHMLA_SPARSE's layout for any fp8 cache (_sparse_groups)
    return {"dtype": TORCH_DTYPES[kv_dtype], "cache_dtype": cache, "block": block, "mla": mla, "layers": out}


def _get(s: Any, key: str) -> Any:
    return s[key] if isinstance(s, dict) else getattr(s, key)


def _split(s: Any, tp: int) -> list[int]:
    shape, dim = list(_get(s, "shape")), _get(s, "tp_dim")
    if dim is not None:
        shape[dim] = shape[dim] // tp
    return shape


def groups(model: Model | ModelV, kv_dtype: str, block: int, tp: int = 1, pp: int = 1,
           checkpoint_alignment: int = 1, sliding_v: bool = True, draft_layers: int = 0,
           spec_tokens: int = 0) -> Grouped | None:
    """vLLM's KV cache groups for this model (None where kb does not model them: mixed page sizes, Mamba layers
    without attention layers or with several state sizes), with the padding warnings vLLM logs and the attention
    block vLLM uses (`block`, widened for Mamba state: vllm_mamba, in steps of `checkpoint_alignment` too in state
    mode "align"); with pipeline parallel `pp`, one stage's; `sliding_v` as the release's Planning line says;
    `draft_layers`: an MTP draft's attention layers (spec.Draft), each one more layer of the model's first full or
    MLA group's type and page (vLLM registers the draft's layers beside the model's before it groups them);
    `spec_tokens`: the draft's speculative tokens, which widen each Mamba layer's conv state (kvcache.state_page)."""
    if any(indexer_head(g) for g in model.layers):
        return None if draft_layers else _sparse_groups(model, kv_dtype, block, pp)
    by_type: dict[tuple[str, int | None, int], int] = {}
    mamba = [g for g in model.layers if g.type == "linear"]
    attention = [g for g in model.layers if g.type != "linear"]
    if mamba:
        state = {vllm_mamba.layer_state_bytes(g, tp, spec_tokens) for g in mamba}
        one = _page_bytes(attention[0], kv_dtype, 1, tp) if attention else None
        if len(state) != 1 or None in state or not one:
            return None
        block = vllm_mamba.aligned_block(state.pop(), one, block,  # type: ignore[arg-type]
                                         checkpoint_alignment=checkpoint_alignment)
        padded = ("mamba", None, _page_bytes(attention[0], kv_dtype, block, tp) or 0)  # state page padded to it
    for g in model.layers:
        if g.type == "linear":
            by_type[padded] = by_type.get(padded, 0) + math.ceil(g.count / pp)
            continue
        if g.type not in ATTENTION_TYPES:
            return None
        page = _page_bytes(g, kv_dtype, block, tp, sliding_v)
        if page is None:
            return None
        key = (g.type, g.window if g.type == "sliding" else g.chunk if g.type == "chunked" else None, page)
        by_type[key] = by_type.get(key, 0) + math.ceil(g.count / pp)  # the stage with the most layers
        if draft_layers and g.type in ("full", "mla"):
            by_type[key] += draft_layers
            draft_layers = 0
    if draft_layers:  # no full or MLA layer to take the draft's type from
        return None
    pages = {k[2] for k in by_type}
    own: dict[tuple[str, int | None, int], int | None] = dict.fromkeys(by_type)
    if len(pages) != 1:
        if mamba:
            return None
        unified = unify_pages(by_type, block)
        if unified is None:
            return None
        by_type, own = unified
    counts = list(by_type.values())
    size = min(counts)
    if max(counts) < 1.5 * size:
        size = max(counts)
    out, padding = [], []
    for key, n in by_type.items():
        kind, window, page = key
        pad = size - n % size
        if pad != size:
            padding.append(f"Add {pad} padding layers, may waste at most {pad / n * 100:.2f}% KV cache memory")
        k = math.ceil(n / size)
        out += [Group(kind, math.ceil((n - i) / k), page, window, own[key]) for i in range(k)]
    return Grouped(out, padding, block)


def _sparse_groups(model: Model | ModelV, kv_dtype: str, block: int, pp: int) -> Grouped | None:
    """A sparse-MLA model's one KV cache group, as vLLM forms it: each layer registers its indexer key cache
    (DeepseekV32IndexerCache, created before the latent's MLAAttention in DeepseekV2MLAAttention) and its latent
    cache, both MLAAttentionSpec of one block size but different pages. They do not merge into one spec
    (MLAAttentionSpec.merge asserts one cache_dtype_str, the indexer has none; from 0.32.0 one cache_role too), so
    get_kv_cache_groups takes the UniformTypeKVCacheSpecs path (every layer full attention): one group of all the
    layers whose block holds every layer's page (UniformTypeKVCacheSpecs.page_size_bytes, the sum; 0.19.1
    v1/kv_cache_interface.py:375-448, v1/core/kv_cache_utils.py:1106-1122, 1248-1251; 0.33.0 v1/kv_cache_interface.py:
    1291-1389, v1/core/kv_cache_planning.py:1138-1147, 574-605). From 0.32.0 the sparse MLA backends align a
    block to the latent's row (sparse_utils.align_blocks_to_rows through v1/worker/utils.py
    customize_attention_spec) and the indexer's to its 64-token kernel block: both divide the pages at block 64,
    and the layout the engine resolves for mixed pages is layer-outer (LBNHC), so nothing is padded. An fp8 cache is
    FlashMLA's fp8_ds_mla latent (FLASHMLA_SPARSE takes any fp8 dtype as it, 0.33.0 mla_attention.py:359-376): 656
    bytes a token (512 fp8 NoPE values, 4 fp32 scales, 64 bf16 RoPE values; 0.24.0 v1/kv_cache_interface.py:385-392,
    0.33.0 mla_attention.py:1386-1388, 0.34.0 v1/attention/backend.py:1017-1018). None where kb does not model it:
    a layer of another type beside them, or another cache dtype."""
    if kv_dtype not in ("bf16", "fp16", *SPARSE_FP8) or any(g.type != "mla" or not indexer_head(g)
                                                            for g in model.layers):
        return None
    n = sum(math.ceil(g.count / pp) for g in model.layers)
    latent = {block * FP8_DS_MLA_BYTES if kv_dtype in SPARSE_FP8 else _page_bytes(g, kv_dtype, block, 1)
              for g in model.layers}
    index = {block * (indexer_head(g) or 0) for g in model.layers}
    if len(latent) != 1 or len(index) != 1:
        return None
    pages = ((index.pop(), n, "indexer key cache"), (latent.pop() or 0, n, "MLA latent"))
    return Grouped([Group("mla", 2 * n, pages[0][0], pages=pages)], [], block)


def unify_pages(by_type: dict[tuple[str, int | None, int], int], block: int) -> tuple[
        dict[tuple[str, int | None, int], int], dict[tuple[str, int | None, int], int | None]] | None:
    """Attention layers of different page sizes, as vLLM unifies them (`unify_kv_cache_spec_page_size`, 0.19.1 and
    0.24.0 v1/core/kv_cache_utils.py, 0.33.0 v1/core/kv_cache_planning.py:346-408): a layer whose page divides the
    largest gets a block that many times wider, so every page is the largest. (layer counts by the unified key,
    each key's own block or None); None where a page does not divide the largest (0.19.1 raises
    NotImplementedError there, later releases pad non-MLA pages: not modelled)."""
    top = max(k[2] for k in by_type)
    counts: dict[tuple[str, int | None, int], int] = {}
    own: dict[tuple[str, int | None, int], int | None] = {}
    for (kind, window, page), n in by_type.items():
        if top % page:
            return None
        key = (kind, window, top)
        if key in own and own[key] != (None if page == top else block * (top // page)):
            return None  # two layouts of one type that vLLM would keep apart
        own[key] = None if page == top else block * (top // page)
        counts[key] = counts.get(key, 0) + n
    return counts, own


def report(available_bytes: int, grouped: tuple[list[Group], list[str]], block: int, point: Point,
           acct: Accounting | None = None, plan: Planning | None = None, *, capacity_bytes: int | None = None,
           utilization: float | None = None, extensible: bool = True) -> Report:
    """num_blocks, "GPU KV cache size", "Maximum concurrency" and the start-up check for this pool (at the block
    groups() settled on, where `grouped` carries one), as this release plans them (vllm_planning).

    `capacity_bytes`: a release whose extensible KV cache is sized after warm-up (Accounting.recheck) plans first on
    the capacity determine_available_memory gives before warm-up, and checks it there (get_kv_cache_configs); the
    cache is then sized from measured memory (`available_bytes`), capped at that capacity, and checked again on
    those blocks less the null block, in the after-warm-up words (0.34.0 v1/core/kv_cache_planning.py:1864-1906,
    1827-1861; v1/engine/core.py:338-418). The report's blocks are the final ones. `utilization`: as given (the
    hint's wording); `extensible`: the cache is on (the hint's wording)."""
    gs, padding = grouped
    block = getattr(grouped, "block", block)
    plan = plan or vllm_planning.planning(acct.release if acct else None)
    per = vllm_planning.bytes_per_block(gs)
    num_blocks = max(0, available_bytes // per)
    if capacity_bytes is not None:
        num_blocks = min(num_blocks, max(0, capacity_bytes // per))
    per_request = vllm_planning.request_blocks(gs, block, point.max_model_len, plan, point)
    conc = num_blocks / per_request if per_request else 0.0
    tokens = num_blocks // len(gs) * block if plan.tokens == "blocks per group" else int(conc * point.max_model_len)
    first = available_bytes if capacity_bytes is None else capacity_bytes
    error = vllm_planning.check(gs, block, first, plan, point, utilization=utilization, extensible=extensible)
    if error is None and capacity_bytes is not None:
        error = vllm_planning.check(gs, block, num_blocks * per, plan, point, utilization=utilization,
                                    extensible=extensible, after_warmup=True)
    mamba = next((g for g in gs if g.kind == "mamba"), None)
    state = (point.mamba_mode, vllm_planning.group_blocks(mamba, block, point.max_model_len, plan, point)) \
        if mamba else None
    return Report(num_blocks=num_blocks, block_size=block, tokens=tokens, concurrency=conc, groups=gs,
                  padding=padding, starts=error is None, error=error, per_request=per_request,
                  planning=plan.release, state=state)
