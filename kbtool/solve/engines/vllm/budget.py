"""vLLM's memory budget on one GPU: capacity x utilization - weights - reserve = the KV pool (design.md §4).

- Capacity: the bytes the driver reports (the accelerator's `memory_bytes`), never marketing GB.
- Weights at the deployed dtype, per GPU (tensor parallel splits them evenly). Bytes per parameter, scales
  included: bf16/fp16 2, fp32 4, fp8 1 (one fp32 scale per 128 x 128 block adds 0.02%, left out), int8 1,
  int4 0.5 + one fp16 scale per group of 128 = 0.515625 (AWQ/GPTQ's default group; a record's
  `quant_group_size` overrides), nvfp4 0.5 + one fp8 E4M3 scale per 16 values = 0.5625 (NVIDIA, "Introducing
  NVFP4"), mxfp4 0.5 + one E8M0 scale per 32 values = 0.53125 (OCP Microscaling Formats v1.0). Embeddings,
  lm_head and the groups a checkpoint leaves unquantized stay at the unquantized dtype.
- Reserve: what vLLM takes off besides the weights (the peak of its profile run, non-torch memory, and the
  CUDA-graph estimate where its model runner applies one), estimated as kbtool/solve/engines/vllm/pool.py says from
  vLLM 0.24.0's code and held to real boots; `--reserve` overrides it.
- The pool as vLLM reports it ("GPU KV cache size", "Maximum concurrency"): vllm_pool.report, from its KV cache
  groups (sliding-window groups hold window - 1 + max_num_batched_tokens tokens, padding layers included).
"""

from __future__ import annotations

import math

from kbtool.solve.engines.vllm import encoder_pass as vllm_encoder_pass
from kbtool.solve.engines.vllm import parallel as vllm_parallel
from kbtool.solve.engines.vllm import planning as vllm_planning
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.engines.vllm import rope as vllm_rope
from kbtool.solve.engines.vllm.kvcache import UNBOUNDED_CTX, KvModel, kv_model, max_context
from kbtool.solve.weights import (
    WEIGHT_BYTES,
    Fit,
    bytes_per_param,
    expert_bias_params,
    expert_bytes,
    expert_shape,
    weight_bytes,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from kbtool.model import Model
    from kbtool.solve.engines.vllm.spec import Draft
    from kbtool.solve.image import ModelV

GIB = 1 << 30


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f} GB"


def mxfp4_kept_scales(model: Model | ModelV, weights: str | None, acct: vllm_pool.Accounting,
                      sm: str | None) -> tuple[int, str]:
    """The expert block scales an MXFP4 MoE checkpoint holds twice once a release that keeps them
    (`acct.mxfp4_scales_kept`) has loaded it on a Hopper GPU, and their words; (0, "") elsewhere.

    On sm90 vLLM picks its OAI Triton MXFP4 MoE backend for gpt-oss (fused_moe/oracle/mxfp4.py:304-323 in 0.24.0:
    the TRTLLM and AITER backends before it are Blackwell or ROCm only; the Triton experts run on 9.0 <= sm <
    11.0, experts/gpt_oss_triton_kernels_moe.py:37-49). Its conversion swizzles weights and scales into new
    tensors and deletes the old weights only (oracle/mxfp4.py:1125-1148 in 0.24.0 ee0da84ab, 721-745 in 0.19.1
    b1388b1fb): the checkpoint's scales stay registered on the layer while the precision configs hold the
    swizzled copy (quantization/mxfp4.py:351-355). 0.25.0 deletes them too (oracle/mxfp4.py:1150-1156,
    dd10e03f9). One E8M0 scale byte per 32 expert values."""
    if not acct.mxfp4_scales_kept or sm != "sm90" or (weights or model.weight_dtype) != "mxfp4":
        return 0, ""
    groups = model.parameter_groups
    experts = int((dict(groups.items()) if groups is not None else {}).get("experts") or 0)
    if not experts:
        return 0, ""
    kept = experts // 32
    return kept, (f" + expert scales kept twice {kept / 1e9:,.2f} GB ({experts / 1e9:,.2f}B / 32 B: vLLM "
                  f"{acct.release} keeps the checkpoint's MXFP4 scales beside their swizzled copy on Hopper)")


def mxfp4_hopper_layout(model: Model | ModelV, weights: str | None, acct: vllm_pool.Accounting, sm: str | None,
                        tp: int = 1) -> tuple[int, str]:
    """What the OAI Triton MXFP4 MoE path (the one a Hopper GPU takes, see mxfp4_kept_scales) holds beyond the
    checkpoint's bytes once it has swizzled the experts, over all `tp` ranks, and its words; (0, "") elsewhere or
    where the release's record does not say.

    - Scale padding (`acct.mxfp4_scale_align`): each expert's block-scale matrix, rows = the projection's outputs
      (gate/up 2 x width, down hidden) and one E8M0 byte per 32 inputs, is padded to whole swizzle tiles by
      triton_kernels' HopperMXScaleLayout (layout_details/hopper_scale.py:25-29: rows to 2 x 8 warps x 2 x 8 = 256,
      the _swizzle_mxfp4 default num_warps=8 in quantization/utils/mxfp4_utils.py:36) after vLLM 0.26.0 on pads the
      groups to a multiple of 4 (mxfp4_utils.py:90-95 at ffd46bfab); gpt-oss-120b: 2 x 128 x 36 x ~23.4 KB.
    - Biases (`acct.mxfp4_bias_fp32`): the path converts the experts' biases to float32 (oracle/mxfp4.py:1139-1142
      at ffd46bfab), 2 B per value above the checkpoint's bf16 (weights.expert_bias_params counts those)."""
    if sm != "sm90" or (weights or model.weight_dtype) != "mxfp4" or (not acct.mxfp4_scale_align
                                                                      and not acct.mxfp4_bias_fp32):
        return 0, ""
    shape = expert_shape(model)
    if shape is None:
        return 0, ""
    layers, routed, width, hidden = shape
    out, words = 0, []
    if acct.mxfp4_scale_align:
        rows, groups = acct.mxfp4_scale_align
        w = math.ceil(width / tp)  # FusedMoE splits each expert's width over the tensor-parallel ranks

        def up(x: int, m: int) -> int:
            return -(-x // m) * m

        per_expert = (up(2 * w, rows) * up(hidden // 32, groups) - 2 * w * (hidden // 32)
                      + up(hidden, rows) * up(w // 32, groups) - hidden * (w // 32))
        pad = layers * routed * per_expert * tp
        if pad:
            out += pad
            words.append(f"expert scales padded to the Hopper swizzle tiles {pad / 1e9:,.2f} GB (rows to {rows}, "
                         f"scale groups to {groups})")
    bias = expert_bias_params(model)
    if acct.mxfp4_bias_fp32 and bias:
        extra = int(bias * (4 - WEIGHT_BYTES[model.unquantized_dtype or "bf16"]))
        out += extra
        words.append(f"expert biases held as fp32 {extra / 1e9:,.2f} GB more")
    if not out:
        return 0, ""
    return out, f" + {' + '.join(words)} (vLLM {acct.release}'s Triton MXFP4 path on Hopper)"


def encoder_pass(model: Model | ModelV, acct: vllm_pool.Accounting, run: str, settings: dict[str, Any],
                 batched_tokens: int, max_num_seqs: int, max_model_len: int | None, tp: int,
                 text_only: str | None) -> tuple[vllm_encoder_pass.Pass | None, list[str]]:
    """The encoder pass `acct`'s release makes in its profile run for this model on runner `run`, and the notes
    that say what is not sized; (None, []) for a text-only model or deployment."""
    if text_only or not getattr(model, "encoders", None):
        return None, []
    if not vllm_encoder_pass.applies(acct.encoder_pass, run, settings):
        return None, []
    mm, why = vllm_encoder_pass.encoder_pass(model, settings, batched_tokens, max_num_seqs, max_model_len, tp=tp,
                                             workspace=vllm_pool.CUBLAS_WORKSPACE_BYTES)
    notes = [why] if why else []
    if mm is not None:
        notes.append("the start-up encoder pass is estimated from vLLM's module code (the tower's activations, "
                     "the dummy pixels and the kept outputs; the attention kernel's workspace is not counted)"
                     + ("" if acct.encoder_pass_where else f"; that vLLM {acct.release} makes it on the {run} runner "
                        "is not read in its code (carried from vLLM 0.24.0)"))
    return mm, notes


def state_blocks(report: vllm_pool.Report, max_num_seqs: int, graphs_mode: str | None, capacity: int | None,
                 release: str, rows: Mapping[str, Any] | None, refuse: bool = True) -> None:
    """The model runner's check of a Mamba-style model's state blocks against max_num_seqs once the KV cache is
    sized (vllm_planning.state_blocks_check, where `release`'s record has it): marks `report` as refused with the
    release's text (`refuse` False: keeps the text as a warning only, for an answer that names no engine). The
    blocks it compares are the cache's num_blocks; where the extensible KV cache is on, the capacity the runner is
    given before warm-up (gpu/model_runner.py:644-662 and :792-799 in 0.34.0)."""
    from kbtool.solve.engines.vllm import records

    got = records.lines(dict(rows)) if rows is not None else records.recorded()
    row = got[records.line_release(release, got, "planning")]
    blocks = capacity // vllm_planning.bytes_per_block(report.groups) if capacity is not None else report.num_blocks
    recurrent, full = any(g.kind == "mamba" for g in report.groups), "FULL" in (graphs_mode or "")
    checks = row.get("checks") or []
    failed = vllm_planning.state_blocks_check(blocks, max_num_seqs, recurrent, full, checks)
    if recurrent and full and any(c[0] == "max_num_seqs<=mamba_blocks" for c in checks):
        report.state_check = (blocks, max_num_seqs)
    if failed is not None and refuse:
        report.starts, report.error = False, failed[1]
    elif failed is not None:
        report.warning = failed[1]


def draft_bytes(model: Model | ModelV, weights: str | None, draft: Draft) -> tuple[int, str]:
    """The MTP draft's weights: its layers' parameters at the checkpoint's format (as the release loads the draft
    with the target's quantization, config/speculative.py "Align the quantization of draft model"), 0 where the
    record's exact checkpoint bytes already hold them (the safetensors headers list the MTP tensors too)."""
    if model.weight_bytes is not None and (weights is None or weights == model.weight_dtype == "fp32"):
        return 0, " (the MTP draft's layers are in the checkpoint's exact bytes)"
    fmt = weights or model.weight_dtype
    per = bytes_per_param(fmt, getattr(model, "quant_group_size", None))
    n = int(draft.parameters * per)
    return n, f" + MTP draft {draft.parameters / 1e9:,.2f}B params x {per:g} B ({fmt})"


def fit(model: Model | ModelV, kv_dtype: str, capacity: int, ctx: int | None, *, batch: int = 1, tp: int = 1,
        utilization: float = 0.9, weights: str | None = None, reserve: int | None = None,
        batched_tokens: int, max_num_seqs: int, mla_format: str | None = None,
        eager: bool = False, block_size: int | None = None, pp: int = 1, release: str | None = None,
        kv_cache_memory: int | None = None, formats: Mapping[str, tuple[int, str | None]] | None = None,
        sm: str | None = None, margins: Mapping[str, Any] | None = None, run: str | None = None,
        text_only: str | None = None, acct: vllm_pool.Accounting | None = None,
        plan: vllm_planning.Planning | None = None, prefix_caching: bool | None = None,
        rows: Mapping[str, Any] | None = None, mm_settings: Mapping[str, Any] | None = None, dp: int = 1,
        graphs_mode: str | None = None, engine_named: bool = True, draft: Draft | None = None) -> Fit:
    """Whether `batch` sequences of `ctx` tokens fit in the KV pool of each of `tp` GPUs, and how many do, as vLLM
    `release` sizes that pool (vllm_pool.accounting); `kv_cache_memory` (--kv-cache-memory-bytes) is the pool;
    `formats`: the KV layouts the records size (kvcache.kv_model); `sm`: the GPU's architecture (the Mamba state
    pages of a hybrid model depend on it: vllm_planning.state_mode); `margins`: the extensible KV cache's (a release
    that sizes the cache after warm-up keeps max(floor, fraction x the transient peak) free beside it where the
    utilization does not already, v1/worker/extensible_kv_cache.py:600-617 in 0.34.0; the profile run's activation
    peak stands in for that peak);
    `run`: the model runner `release` gives this model, from its record (defaults.Defaults.runner); `text_only`: the
    serve-line flag under which vLLM skips the model's encoders (mmprefix.towers_off), else they are counted;
    `acct`, `plan`: `release`'s accounting and planning lines from the query image's records (None: read from the
    records tree); `prefix_caching`: --enable-prefix-caching / --no-enable-prefix-caching as given (None: the
    release's default), which sets a hybrid model's state mode (vllm_planning.state_mode); `rows`: vLLM's
    engine-release rows of the query image, whose `parallel` lines size tensor/pipeline parallel (vllm_parallel; None:
    the records tree's); `mm_settings`: the serve line's multimodal settings (--limit-mm-per-prompt,
    --skip-mm-profiling), which size the encoder pass of the profile run (vllm_encoder_pass); `graphs_mode`: the
    CUDA-graph mode the release resolves (None under --enforce-eager), on which its check of the Mamba state blocks
    against max_num_seqs depends (state_blocks); `engine_named`: the query names vLLM (else that check only
    warns: the answer is sized with vLLM's accounting but not bound to its defaults); `draft`: the line's MTP
    speculative draft as the release builds it (spec.py): its weights, its attention layers in the KV cache
    groups, its state pages per request and its CUDA-graph capture ceiling."""
    acct = acct or vllm_pool.accounting(release)
    run = run or vllm_pool.runner(model, acct)
    kv: KvModel = kv_model(model, kv_dtype, tp, batched_tokens=batched_tokens, mla_format=mla_format, formats=formats)
    if pp > 1:  # each pipeline stage holds its share of the layers, their KV cache and their weights
        for t in kv.terms:
            t.per_token, t.fixed = t.per_token / pp, t.fixed / pp
        kv.notes.append(f"pipeline parallel {pp}: each stage holds 1/{pp} of the layers (KV and weights per GPU)")
    wtotal, whow = weight_bytes(model, weights, text_only=text_only)
    kept, khow = mxfp4_kept_scales(model, weights, acct, sm)
    tiles, thow = mxfp4_hopper_layout(model, weights, acct, sm, tp)
    wtotal, whow = wtotal + kept + tiles, whow + khow + thow
    if draft is not None:
        dbytes, dhow = draft_bytes(model, weights, draft)
        wtotal, whow = wtotal + dbytes, whow + dhow
    decode_len = draft.decode_len if draft is not None else 1
    spec = draft is not None  # the V1 runner's profile then runs its rejection sampler too (vllm_pool)
    act_bytes = 4 if weights == "fp32" else vllm_pool.ACT_BYTES  # --dtype float32: the activations too
    # each GPU builds the model's whole rope cache (vllm_rope): the load counts it, tensor parallel does not split it
    rope, rope_how = vllm_rope.cache_bytes(model, weights)
    wgpu = math.ceil(wtotal / (tp * pp)) + rope
    moe_dp = ""
    if dp > 1:
        # data parallel: vLLM shards every MoE layer's experts over all dp x tp GPUs (tensor-parallel slices of each
        # expert without --enable-expert-parallel, whole experts with it), while the rest stays per replica
        # (0.34.0 model_executor/layers/fused_moe/config.py:1143-1151 flatten_tp_across_dp_and_pcp and :1235-1263
        # make; the same in 0.24.0 at :1099-1105 and 0.26.0)
        experts = expert_bytes(model, weights) + kept + tiles
        if experts:
            wgpu = math.ceil((wtotal - experts) / (tp * pp) + experts / (tp * pp * dp)) + rope
            moe_dp = f", the experts' {_gb(experts)} over tp x dp {tp * dp} GPUs"
    extensible = bool(margins) and not kv_cache_memory
    mm, mm_notes = encoder_pass(model, acct, run, dict(mm_settings or {}), batched_tokens, max_num_seqs,
                                ctx or model.max_context, tp, text_only) if reserve is None else (None, [])
    mm_first = 0  # what the encoder pass adds to the profile peak that only the first start-up check plans on
    if reserve is None:
        # With the extensible KV cache the cache is sized after warm-up on the transient peak of its sizing steps,
        # which run no encoder (0.34.0 v1/worker/gpu/warmup.py:483-545, their requests carry mm_features=[]; the
        # peak is recorded over them, gpu_worker.py:1022-1092): the pass weighs only on the first check's capacity.
        res, rhow = vllm_pool.reserve(model, batched_tokens, max_num_seqs, tp=tp, eager=eager, acct=acct, run=run,
                                      extensible=extensible, mm=None if extensible else mm, decode_len=decode_len,
                                      act_bytes=act_bytes, spec=spec)
        if mm is not None and extensible:
            mm_first = vllm_pool.reserve(model, batched_tokens, max_num_seqs, tp=tp, eager=eager, acct=acct,
                                         run=run, extensible=extensible, mm=mm, decode_len=decode_len,
                                         act_bytes=act_bytes, spec=spec)[0] - res
            rhow += (f"; {mm.words}: {mm_first / 1e9:,.2f} GB more profile peak for the first start-up check only "
                     "(the sizing warm-up that sizes the extensible cache runs no encoder)")
    else:
        res, rhow = reserve, "given with --reserve"
    # tensor/pipeline parallel: what the release's process groups allocate, and when (vllm_parallel)
    par = vllm_parallel.parallel(release or acct.release, tp, pp, sm=sm, moe=bool(getattr(model, "experts", None)),
                                 extensible=extensible, rows=dict(rows) if rows is not None else None
                                 ) if reserve is None else None
    if par is not None:
        res += par.counted
        rhow += "; " + par.words
    usable = int(capacity * utilization)
    before = None  # the capacity a release that re-checks after warm-up plans on first (vllm_pool.report)
    if margins and reserve is None:
        # The extensible cache gets min(utilization x memory - non-KV use, headroom - margin) less the transient
        # peak (0.34.0 v1/worker/extensible_kv_cache.py:613-617): the margin takes only what the utilization
        # does not already leave free (at the default 1.0, all of it; at 0.9 of 24 GB, none).
        act, _how = vllm_pool.activation_bytes(model, batched_tokens, max_num_seqs, tp, acct, run,
                                               act_bytes=act_bytes, spec=spec)
        margin = max(int(margins["floor_bytes"]), int(act * float(margins["fraction"])))
        # what the process groups allocated before the snapshot is not free either (vllm_parallel)
        pre = par.before if par is not None else 0
        binding = max(0, margin + pre - (capacity - usable))
        if acct.recheck:
            # before warm-up: utilization x memory - weights - the profile's peak and non-torch memory, with no
            # graph estimate where the graphs are measured after capture (gpu_worker.py:771-780, 0.34.0)
            capture = vllm_pool.capture_of(acct, model, max_num_seqs, batched_tokens, decode_len)
            graphs = vllm_pool.graph_bytes(acct, run, eager, capture) if acct.graphs == "measured" else 0
            before = usable - wgpu - (res - graphs) - mm_first
            rhow += ("; not modelled: the CUDA context held before vLLM's first memory snapshot (the measured "
                     "headroom leaves it out) and any transient of the sizing warm-up above the profile run's peak")
        res += binding
        floor = margins["floor_bytes"] / 2**30
        rhow += (f"; extensible KV cache margin {margin / 1e9:,.2f} GB = max({floor:g} GiB, "
                 f"{float(margins['fraction']):g} x the activation peak)"
                 + (f" + {pre / 1e9:,.2f} GB the process groups allocated before the snapshot" if pre else "")
                 + (f", {binding / 1e9:,.2f} GB of it beyond what the utilization leaves free"
                    if binding < margin + pre else ""))
    pool = usable - wgpu - res
    given = ""
    if kv_cache_memory:  # vLLM skips profiling and returns the value as the pool (gpu_worker.py:430 in 0.24.0)
        pool = kv_cache_memory if wgpu + kv_cache_memory <= capacity else 0
        given = (" (--kv-cache-memory-bytes: vLLM skips profiling and the utilization arithmetic)" if pool else
                 " (--kv-cache-memory-bytes: the weights and this pool exceed the GPU's memory)")
    report = None
    block = block_size or kv.block
    plan = plan or vllm_planning.planning(release)
    arch = getattr(model, "architecture", None)
    mode, ckpt = vllm_planning.state_mode(plan, arch, sm, any(g.type == "linear" for g in model.layers),
                                            prefix_caching)
    # no pool at all (the weights and reserve take the memory): the answer says that, not vLLM's "No available
    # memory for the cache blocks" it would end with
    layers, tokens = (draft.layers, draft.tokens) if draft is not None else (0, 0)
    spec_blocks = tokens if draft is not None and draft.state_blocks else 0
    grouped = vllm_pool.groups(model, kv_dtype, block, tp, pp, vllm_planning.checkpoint_alignment(arch, ckpt),
                               plan.sliding_v, layers, tokens) if ctx and max(pool, before or 0) > 0 else None
    if grouped is not None and ctx:
        point = vllm_planning.Point(ctx, batched_tokens, async_scheduling=True, pp=pp,
                                    v2=run == "V2", mamba_mode=mode, checkpoint_blocks=ckpt, draft_blocks=spec_blocks)
        report = vllm_pool.report(pool, grouped, block, point, acct, plan, capacity_bytes=before,
                                  utilization=utilization, extensible=not kv_cache_memory)
        if report.starts:
            state_blocks(report, max_num_seqs, graphs_mode, before, release or acct.release, rows, engine_named)
    need = math.ceil(batch * kv.per_sequence(ctx)) if ctx else 0
    fits = None if ctx is None else (pool > 0 and need <= pool)
    mem_ctx = max_context(kv, pool, batch) if pool > 0 else 0
    engine_need = ""
    if report is not None:  # one accounting: the engine's blocks decide the fit (vllm_planning.check)
        per_block = vllm_planning.bytes_per_block(report.groups)
        need = per_block * report.per_request * batch
        fits = report.starts and report.concurrency >= batch
        engine_need = (f" = {report.per_request:,} blocks x {per_block:,} B, as vLLM {report.planning} counts a "
                       f"request's blocks")
        if batch == 1 and pool > 0:
            memory = pool - per_block if plan.null_block else pool
            # the longest context memory allows, by vLLM's own search (capped at the model's limit below)
            mem_ctx = vllm_planning.estimate_max_model_len(report.groups, report.block_size, memory, plan,
                                                           vllm_planning.Point(UNBOUNDED_CTX, batched_tokens, pp=pp,
                                                                               v2=point.v2, mamba_mode=mode,
                                                                               checkpoint_blocks=ckpt,
                                                                               draft_blocks=spec_blocks))
    model_max = model.max_context
    mctx, limit = mem_ctx, "memory"
    if model_max and mem_ctx >= model_max:
        mctx, limit = model_max, "model"
    per_tok = kv.bytes_per_token()
    growing = kv.growing()
    if pool <= 0:
        pool_tokens = 0
    elif growing:
        pool_tokens = int((pool - kv.fixed()) // growing) if pool > kv.fixed() else 0
    else:
        pool_tokens = UNBOUNDED_CTX
    seqs = None
    if ctx:
        one = kv.per_sequence(ctx)
        seqs = int(pool // one) if pool > 0 and one > 0 else 0
        if report is not None:
            seqs = int(report.concurrency) if report.starts else 0
    tp_txt = (f" / tp {tp}" if tp > 1 else "") + (f" / pp {pp}" if pp > 1 else "")
    lines = [f"KV/token = {' + '.join(t.text for t in kv.terms)}"]
    if len(kv.terms) > 1:
        lines.append(f"KV/token = {per_tok:,.0f} B" + (f" + {kv.fixed():,.0f} B/sequence" if kv.fixed() else ""))
    if ctx is not None:
        lines.append(f"KV = {need:,} B ({_gb(need)}) for ctx {ctx:,} x batch {batch}" + (engine_need or
                     f" (whole {kv.block}-token blocks)"))
    lines.append(f"budget = {capacity:,} B x {utilization:g} = {usable:,} B ({_gb(usable)})")
    lines.append(f"- weights {wgpu:,} B ({_gb(wgpu)}) = {whow}{tp_txt}{moe_dp}" + (f" + {rope_how}" if rope else ""))
    lines.append(f"- reserve {res:,} B ({_gb(res)}): {rhow}")
    lines.append(f"= KV pool {pool:,} B ({_gb(pool)})" + (f" = {pool_tokens:,} tokens" if 0 < pool_tokens <
                                                           UNBOUNDED_CTX else "") + given)
    if before is not None and before > 0:
        lines.append(f"vLLM {acct.release}'s start-up check plans first on {before:,} B ({_gb(before)}) before "
                     "warm-up (no graphs, no margin), then again on the blocks of the pool above")
    notes = list(dict.fromkeys(kv.notes)) + mm_notes
    if par is not None:  # the part of the reserve no boot measured (vllm_parallel)
        kind = f"tensor parallel {tp}" if tp > 1 else f"pipeline parallel {pp}"
        notes.append(f"{kind}: the non-torch memory of vLLM's process groups is estimated: " + (
            f"NCCL communicators {par.estimated / 1e9:,.2f} GB ({vllm_parallel.NCCL_SOURCE}), " if par.estimated
            else "") + "NCCL's lazily allocated buffers not modelled" + (
            f"; the all-reduce buffers are vLLM {par.release}'s code" if par.release else ""))
    if pool <= 0 and not kv_cache_memory:
        hint = " or quantize the weights (--weights fp8)" if (weights or model.weight_dtype) in ("bf16", "fp16",
                                                                                               "fp32") else ""
        notes.append(f"the weights and reserve exceed the usable memory; add GPUs (--gpus){hint}")
    if mem_ctx == UNBOUNDED_CTX and not model_max:
        notes.append("memory does not limit the context (no layer grows with it)")
    if ctx is not None and model_max and ctx > model_max:
        notes.append(f"ctx {ctx:,} exceeds the model's max_position_embeddings {model_max:,}")
    return Fit(engine_report=report, fits=fits, kv_bytes=need, kv_bytes_per_token=per_tok, weights_bytes=wgpu,
               weights_dtype=weights or model.weight_dtype, reserve_bytes=res, pool_bytes=pool, pool_tokens=pool_tokens,
               capacity_bytes=capacity, max_ctx=mctx, max_ctx_memory=mem_ctx, ctx_limit=limit,
               max_sequences=seqs, formula="; ".join(lines), notes=notes)
