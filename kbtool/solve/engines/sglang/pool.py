"""SGLang's KV token pool on one GPU, as its start-up sizes it (docs/sglang-resolution.md §6, sglang 0.5.23).

- Budget (mem_cache/kv_cache_configurator.py:2990-3060, `_profile_available_bytes`): the memory free after the
  weights load, less the slack `pre-load free memory x (1 - mem_fraction_static)`; so the pool is
  `pre x mem_fraction_static - weights`. The pre-load free memory is the GPU's capacity less the CUDA context
  and what torch holds before the load (`CONTEXT_BYTES`, measured: the SGLang 0.5.17 boots on the H200,
  records/evidence/2026-12-02-nvidia-h200-sxm-sglang-boot.yaml, print 139.13 GiB free before the load of a
  139.80 GiB device). tests/solve/test_sglang_boots.py holds this pool to every recorded boot (within 0.5%;
  what the load takes beyond the parameter count is most of the gap). A budget <= 0 is SGLang's "Loaded
  weights leave no GPU memory for the KV cache" error.
- Bytes per token (`cell_size`, model_executor/pool_configurator.py:340-536): K and V of every attention layer
  of this rank, `kv_heads_per_rank x (head_dim + v_head_dim) x element size` (kv heads replicated when fewer
  than the TP ranks); MLA keeps one latent per layer, `(kv_lora_rank + qk_rope_head_dim) x element size`, on
  every rank. Models with sliding-window and full layers use the hybrid pool (pool_configurator.py:656-917):
  a token counts all full layers plus `swa_full_tokens_ratio` (0.8) of the sliding layers, and the
  "#tokens" SGLang prints counts the full side; Gemma-2/3 turn the hybrid pool off
  (model_overrides/gemma2_gemma3.py) and every layer holds every token.
- max_total_num_tokens = budget // cell_size, rounded down to a whole page (pool_configurator.py:637-647), then
  capped by --max-total-tokens; max_running_requests = min(clamp(tokens / context_len x 512, 2048, 4096),
  tokens // 2) unless given (kv_cache_configurator.py:3119-3132).
`memory_for` is the memory block of an answer under SGLang: its resolved mem_fraction_static and page size
(kbtool/solve/engines/sglang/resolve.py) sizing this pool for the model on the GPU.
Linear-attention and Mamba state, DSA's indexer cache and speculative drafts have pools of their own that this
model leaves out; the answer says so.
"""

from __future__ import annotations

import math

from kbtool.solve.engines.results import Pool as EnginePool
from kbtool.solve.engines.sglang import reqtable
from kbtool.solve.engines.sglang.args import attn_dp as attn_dp_width
from kbtool.solve.engines.sglang.plan import Cell, plan
from kbtool.solve.parts import Memory
from kbtool.solve.weights import Fit, fp32_loaded_as, tower_bytes, weight_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GIB = 1 << 30
# CUDA context + torch's own allocations before the weights load: 139.80 - 139.13 GiB on the H200 boots
CONTEXT_BYTES = 687 << 20
# releases with recorded boots: the pool is held to them by tests/solve/test_sglang_boots.py
BOOTED = {"0.5.17": "records/evidence/2026-12-02-nvidia-h200-sxm-sglang-boot.yaml"}
SWA_FULL_TOKENS_RATIO = 0.8  # --swa-full-tokens-ratio's fallback (arg_groups/fields, docs §7)
ELEMENT = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8_e4m3": 1, "fp8_e5m2": 1, "nvfp4": 1}
# sglang/srt/configs/model_config.py is_hybrid_swa_model (0.5.23 :2651-2690): the architectures SGLang gives a
# separate sliding-window pool; every other model's sliding layers hold every token (Gemma-2/3, Mistral, ...)
HYBRID_SWA = frozenset({"Llama4ForConditionalGeneration", "GptOssForCausalLM", "GraniteSWAForCausalLM",
                        "GraniteMoeSWAForCausalLM", "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM",
                        "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "Step3p5ForCausalLM"})


# SGLang 0.5.23 configs/model_config.py:2391 multimodal_model_archs (80 names; is_multimodal_model)
MULTIMODAL = frozenset({
    "CLIPModel", "Cohere2VisionForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration",
    "DeepseekVL2ForCausalLM", "Ernie4_5_VLMoeForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration",
    "Gemma3ForConditionalGeneration", "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration",
    "EmbeddingGemma2Model", "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration", "Glm5NextForConditionalGeneration",
    "GlmOcrForConditionalGeneration", "GlmAsrForConditionalGeneration", "GlmImageForConditionalGeneration",
    "Grok1VForCausalLM", "Grok1AForCausalLM", "LlavaLlamaForCausalLM", "Llama4ForConditionalGeneration",
    "LlavaMistralForCausalLM", "LlavaQwenForCausalLM", "LlavaForConditionalGeneration", "LlavaVidForCausalLM",
    "Lfm2VlForConditionalGeneration", "LightOnOCRForConditionalGeneration", "MiMoV2ASRForCausalLM", "MiniCPMO",
    "MiniCPMV", "Mistral3ForConditionalGeneration", "MultiModalityCausalLM", "MllamaForConditionalGeneration",
    "MossVLForConditionalGeneration", "NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3",
    "NemotronH_Omni_Reasoning_V3", "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "PixtralForConditionalGeneration", "Qwen2AudioForConditionalGeneration", "Qwen2VLForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "Qwen3ASRForConditionalGeneration", "Qwen3OmniMoeForConditionalGeneration", "KimiVLForConditionalGeneration",
    "LocateAnythingForConditionalGeneration", "InternVLChatModel", "InternS1ForConditionalGeneration",
    "InternS1ProForConditionalGeneration", "Phi4MMForCausalLM", "VoxtralForConditionalGeneration",
    "WhisperForConditionalGeneration", "Step3VLForConditionalGeneration", "POINTSV15ChatModel",
    "DotsVLMForCausalLM", "Dots3NoteForCausalLM", "DotsOCRForCausalLM", "Sarashina2VisionForCausalLM",
    "NVILAForConditionalGeneration", "NVILALiteForConditionalGeneration", "DeepseekOCRForCausalLM",
    "UnlimitedOCRForCausalLM", "JetVLMForConditionalGeneration", "PaddleOCRVLForConditionalGeneration",
    "MiDashengLMModel", "StepVLForConditionalGeneration", "Step3p7ForConditionalGeneration",
    "KimiK25ForConditionalGeneration", "BailingMMNativeForConditionalGeneration",
    "BailingMM2NativeForConditionalGeneration", "BailingMoeV3VLForConditionalGeneration"
})
# ... less the ones whose multimodal part is off unless --enable-multimodal (model_config.py:690-717)
MULTIMODAL_OFF = frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                            "Step3VLForConditionalGeneration", "InklingForConditionalGeneration"})
VLM_CACHE_MB = 100  # SGLANG_VLM_CACHE_SIZE_MB's default (0.5.23 environ.py:1598)
MM_FEATURE_CACHE_MB = 1024  # SGLANG_MM_FEATURE_CACHE_MB's default (0.5.20 environ.py:1360, 0.5.23 :1622)
QWEN3_VL = frozenset({"Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"})


def multimodal_reserve_gib(model: Any, release: str | None, *, cc: float | None = None, gpu_mib: float | None = None,
                           max_running_requests: int | None = None) -> float:
    """What SGLang takes out of the KV budget for a multimodal model's embedding cache: from 0.5.18
    (kv_cache_configurator.py:130-146 mm_runtime_reservation_gb, environ.py:1146 SGLANG_VLM_CACHE_SIZE_MB; 0.5.23
    kv_cache_configurator.py:202-220) it reserves SGLANG_VLM_CACHE_SIZE_MB; 0.5.17 does not. From 0.5.20 Qwen3-VL on
    a Hopper GPU of 60 GiB or more turns the embedding cache off and sends features over cuda_ipc, whose pool is
    reserved instead: SGLANG_MM_FEATURE_CACHE_MB, 3 GiB from --max-running-requests 400 (0.5.20
    model_overrides/qwen3_vl.py:88-141, kv_cache_configurator.py:142-160). A launch keeps the environment the
    resolution set; the sglang-pool probe restored it before sizing (tests/solve/test_sglang_pool_replay.py)."""
    from kbtool.solve.conditions import compare_versions

    arch = getattr(model, "architecture", None)
    if not release or compare_versions(release, "0.5.18") < 0 or arch not in MULTIMODAL or arch in MULTIMODAL_OFF:
        return 0.0
    if hopper_qwen3_vl(arch, release, cc, gpu_mib):
        return (3 * 1024 if (max_running_requests or 0) >= 400 else MM_FEATURE_CACHE_MB) / 1024
    return VLM_CACHE_MB / 1024


def hopper_qwen3_vl(arch: str | None, release: str, cc: float | None, gpu_mib: float | None) -> bool:
    """SGLang's profiled Qwen3-VL serving path: from 0.5.20, on compute capability 9.x with 60 GiB or more
    (qwen3_vl.py:23-34 large_hopper_qwen3_vl_model_type)."""
    from kbtool.solve.conditions import compare_versions

    return (arch in QWEN3_VL and compare_versions(release, "0.5.20") >= 0 and cc is not None and 9.0 <= cc < 10.0
            and (gpu_mib or 0) >= 60 * 1024)


class Pool:
    """What SGLang prints for this pool (memory_pool.py:2073-2098 and the scheduler's line)."""

    def __init__(self, *, tokens: int, cell_bytes: float, budget_bytes: int, mem_fraction_static: float,
                 page_size: int, max_running_requests: int, mla: bool, kv_dtype: str, full_layers: int,
                 swa_layers: int, left_out: list[str], state_slots: int | None = None,
                 swa_tokens: int | None = None, release: str | None = None, table_bytes: int = 0) -> None:
        self.tokens, self.cell_bytes, self.budget_bytes = tokens, cell_bytes, budget_bytes
        self.mem_fraction_static, self.page_size = mem_fraction_static, page_size
        self.max_running_requests, self.mla, self.kv_dtype = max_running_requests, mla, kv_dtype
        self.full_layers, self.swa_layers, self.left_out = full_layers, swa_layers, left_out
        self.state_slots, self.swa_tokens, self.release = state_slots, swa_tokens, release
        self.table_bytes = table_bytes  # SGLang's request-to-token table beside the pool (reqtable.py)

    def as_dict(self, ctx: int | None) -> dict[str, Any]:
        gb = GIB  # SGLang prints GB as bytes / 2**30 (memory_pool.py); the boots' K + V sizes add up so
        kv = self.tokens * self.cell_bytes
        torch_dtype = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp8_e4m3": "torch.float8_e4m3fn",
                       "fp8_e5m2": "torch.float8_e5m2", "fp32": "torch.float32"}.get(self.kv_dtype, self.kv_dtype)
        if self.mla:
            line = f"KV Cache is allocated. dtype: {torch_dtype}, #tokens: {self.tokens}, KV size: {kv / gb:.2f} GB"
        else:
            line = (f"KV Cache is allocated. dtype: {torch_dtype}, #tokens: {self.tokens}, K size: "
                    f"{kv / 2 / gb:.2f} GB, V size: {kv / 2 / gb:.2f} GB")
        out: dict[str, Any] = {
            "max_total_num_tokens": self.tokens, "cell_bytes": round(self.cell_bytes, 1),
            "mem_fraction_static": self.mem_fraction_static, "page_size": self.page_size,
            "max_running_requests": self.max_running_requests, "kv_line": line, "basis": "estimated",
        }
        if ctx:
            out["requests_at_ctx"] = round(self.tokens / ctx, 2)
        if self.swa_layers and self.full_layers:
            out["swa_full_tokens_ratio"] = SWA_FULL_TOKENS_RATIO
        if self.left_out:
            out["left_out"] = list(self.left_out)
        if self.state_slots is not None:
            out["max_mamba_cache_size"] = self.state_slots
        if self.swa_tokens is not None:
            out["swa_max_total_num_tokens"] = self.swa_tokens
        from kbtool.solve.installs import override_note

        at = f"; {self.tokens / ctx:.2f} requests of {ctx:,} tokens" if ctx else ""
        if self.release in BOOTED:
            held = f"within 0.5% of SGLang {self.release}'s pool in every recorded boot ({BOOTED[self.release]})"
        else:
            held = f"no boot of SGLang {self.release or 'this release'} recorded: estimated"
        out["text"] = (f"SGLang will report: {line}; max_total_num_tokens={self.tokens}, "
                       f"max_running_requests={self.max_running_requests}"
                       + (f", max_mamba_cache_size={self.state_slots}" if self.state_slots is not None else "")
                       + f"{at} (SGLang's own pool planning, held to it at every point the sglang-pool probe recorded"
                       f"{override_note('sglang', self.release, 'sglang-pool')};"
                       f" the CUDA context taken as {CONTEXT_BYTES / GIB:.2f} GiB, as measured on the H200, and the "
                       f"weights as kb counts them; {held}"
                       + (f"; not modelled: {', '.join(self.left_out)}" if self.left_out else "") + ")")
        return out


def cell_bytes(model: Any, kv_dtype: str, tp: int) -> tuple[float, int, int, list[str]]:
    """(bytes per token of max_total_num_tokens, full layers, sliding layers, pools left out) for one rank."""
    c, nfull, nswa, left = cell_of(model, kv_dtype, tp)
    return c.bytes, nfull, nswa, left


def _state_bytes(model: Any, tp: int, ssm_dtype: str) -> int:
    """SGLang's mamba_cache_per_req: every linear-attention layer's conv state in the model dtype and its temporal
    (SSM / recurrent) state in --mamba-ssm-dtype (float32 unless given), split over TP on the recorded dimension."""
    total = 0
    for g in model.layers:
        if g.type != "linear":
            continue
        per = 0
        for st in g.state or []:
            n = 1
            for i, d in enumerate(st["shape"]):
                n *= d // tp if i == st.get("tp_dim") and d % tp == 0 else d
            per += n * (2 if st["name"] == "conv" else ELEMENT.get(ssm_dtype, 4))
        total += g.count * per
    return total


def cell_of(model: Any, kv_dtype: str, tp: int, *, ssm_dtype: str = "fp32", mamba_slots: int = 5,
            swa_ratio: float = SWA_FULL_TOKENS_RATIO,
            dsa_backends: tuple[str | None, str | None] = (None, None)) -> tuple[Cell, int, int, list[str]]:
    """SGLang's pool cell for one rank (pool_configurator.py DefaultPoolConfigurator._compute_cell_size, HybridSWA
    :656-803): K and V of every attention layer, kv heads per rank replicated below one; MLA one latent per layer
    plus DSA's fp8 index key and its scales; Mamba / linear-attention hybrids only the full-attention layers, their
    state per request apart; the hybrid sliding-window pool only for SGLang's hybrid-SWA architectures
    (model_config.py is_hybrid_swa_model), every other model holding every token in every layer."""
    elt = ELEMENT.get(kv_dtype, 2)
    hybrid = model.architecture in HYBRID_SWA
    full = swa = 0
    nfull = nswa = 0
    window = None
    left: list[str] = []
    for g in model.layers:
        if g.type == "mla":
            lora, rope = g.kv_lora_rank or 512, g.rope_dim or 64
            per = (lora + rope) * elt
            raw = "trtllm" in dsa_backends or dsa_backends == ("tilelang", "tilelang")
            if g.index_head_dim and kv_dtype == "fp8_e4m3" and not raw:
                # DSA's scaled fp8 rows (kv_cache_configurator.py calculate_mla_kv_cache_dim): the fp8 latent, an
                # fp32 scale per 128, the rope part kept in bf16
                per = lora + lora // 128 * 4 + rope * 2
            if g.index_head_dim:
                per += g.index_head_dim + g.index_head_dim // 128 * 4  # uint8 index key + fp32 scale per 128
            full += g.count * per
            nfull += g.count
            continue
        if g.type == "linear":
            continue
        heads = max(1, (g.kv_heads or 1) // tp)  # ModelConfig.get_num_kv_heads: replicated below one per rank
        per = heads * ((g.head_dim or model.head_dim) + (g.head_dim_v or g.head_dim or model.head_dim)) * elt
        if g.type in ("sliding", "chunked") and hybrid:
            swa += g.count * per
            nswa += g.count
            window = g.window or g.chunk
        else:
            full += g.count * per
            nfull += g.count
    state = _state_bytes(model, tp, ssm_dtype)
    if nfull and nswa:
        return (Cell(bytes=full + swa_ratio * swa, full_bytes=full, swa_bytes=swa, swa_ratio=swa_ratio,
                     window=window, state_per_request=state, mamba_slots_per_request=mamba_slots),
                nfull, nswa, left)
    return Cell(bytes=full + swa, state_per_request=state, mamba_slots_per_request=mamba_slots), nfull, nswa, left


def fit(model: Any, kv_dtype: str, capacity: int, ctx: int | None, *, mem_fraction_static: float, page_size: int,
        batch: int = 1, tp: int = 1, weights: str | None = None, max_total_tokens: int | None = None,
        max_running_requests: int | None = None, mamba_slots: int = 5,
        dsa_backends: tuple[str | None, str | None] = (None, None),
        reserve_gib: float = 0.0, release: str | None = None,
        draft_tokens: int = 0, attn_dp: int = 1) -> tuple[Fit, Pool | None, str | None]:
    """(kb's memory fit, SGLang's pool, SGLang's start-up error or None) for one GPU of `tp`: the pool as plan.py
    plans it, then the request-to-token table SGLang allocates beside it (reqtable.py), which must fit in what the
    pool's budget leaves of the memory free after the load. With attention DP (`attn_dp` groups, args.attn_dp) the
    cell holds the KV heads of one attention-TP rank, tp // attn_dp: SGLang sizes it with get_parallel().attn_tp_size
    (0.5.23 model_executor/pool_configurator.py:356 and :492, attn_tp_size = tp_size // attn_dp_size // attn_cp_size
    at runtime_context.py:73-76; 0.5.17 pool_configurator.py:197, layers/dp_attention.py:320-321)."""
    wtotal, whow = weight_bytes(model, weights)
    wgpu = math.ceil(wtotal / tp)
    pre = capacity - CONTEXT_BYTES
    attn_tp = max(1, tp // max(1, attn_dp))
    c, nfull, nswa, left = cell_of(model, kv_dtype, attn_tp, mamba_slots=mamba_slots, dsa_backends=dsa_backends)
    cell = c.bytes
    context_len = ctx or model.max_context or 4096
    p = plan(c, page_size=page_size, mem_fraction_static=mem_fraction_static, pre_gib=pre / GIB,
             available_gib=(pre - wgpu) / GIB, context_len=context_len, max_running_requests=max_running_requests,
             max_total_tokens=max_total_tokens, reserve_gib=reserve_gib)
    budget = p.rest_bytes
    error = f"{p.error}: {p.message}" if p.error else None
    table_line, table_bytes = None, 0
    if p.error is None:  # the table, built before the pool (kv_cache_configurator.py _init_pools; reqtable.py)
        t = reqtable.table(p.max_running_requests, context_len, draft_tokens)
        free = pre - wgpu
        room = free - budget - ((p.state_slots + 1) * c.state_per_request if p.state_slots is not None else 0)
        refused = reqtable.refusal(t, free_bytes=free, room_bytes=room, mem_fraction_static=mem_fraction_static)
        table_bytes = t.bytes
        if refused is not None:
            error = f"{refused[0]}: {refused[1]}"
        table_line = (f"req_to_token = {t.shape()} = {t.bytes:,} B, allocated before the pool out of the {room:,} B "
                      "the budget leaves outside it" + ("" if refused is None else ": it does not fit"))
    pool = None
    tokens = p.tokens
    if error is None:
        pool = Pool(tokens=tokens, cell_bytes=cell, budget_bytes=budget, mem_fraction_static=mem_fraction_static,
                    page_size=page_size, max_running_requests=p.max_running_requests,
                    mla=any(g.type == "mla" for g in model.layers), kv_dtype=kv_dtype, full_layers=nfull,
                    swa_layers=nswa, left_out=left, state_slots=p.state_slots, swa_tokens=p.swa_tokens,
                    release=release, table_bytes=table_bytes)
    need_bytes = math.ceil(batch * ctx * cell) if ctx else 0
    fits = None if ctx is None else (pool is not None and batch * ctx <= tokens)
    seqs = (tokens // ctx if ctx else None) if pool is not None else (0 if ctx else None)
    max_ctx = tokens // max(1, batch)
    limit = "memory"
    if model.max_context and max_ctx >= model.max_context:
        max_ctx, limit = model.max_context, "model"
    tp_txt = f" / tp {tp}" if tp > 1 else ""
    dp_txt = f", KV heads of one attention-TP rank: tp {tp} / attention DP {attn_dp}" if attn_tp != tp else ""
    lines = [f"cell = {cell:,.0f} B per token ({nfull} full-attention layers"
             + (f" + {SWA_FULL_TOKENS_RATIO:g} x {nswa} sliding-window layers" if nfull and nswa else
                (f", {nswa} sliding-window layers holding every token" if nswa else "")) + f", {kv_dtype}{dp_txt})",
             f"pre-load free = {capacity:,} B - {CONTEXT_BYTES:,} B CUDA context (estimate) = {pre:,} B",
             f"budget = pre-load free x mem_fraction_static {mem_fraction_static:g} - weights {wgpu:,} B "
             f"({whow}{tp_txt}) = {budget:,} B",
             f"max_total_num_tokens = budget // cell, whole pages of {page_size} = {tokens:,}"]
    if table_line:
        lines.append(table_line)
    notes = [f"not modelled: {x}" for x in left]
    return (Fit(fits=fits, kv_bytes=need_bytes, kv_bytes_per_token=cell, weights_bytes=wgpu,
                weights_dtype=weights or model.weight_dtype, reserve_bytes=capacity - int(pre * mem_fraction_static),
                pool_bytes=max(budget, 0), pool_tokens=tokens, capacity_bytes=capacity, max_ctx=max_ctx,
                max_ctx_memory=tokens // max(1, batch), ctx_limit=limit, max_sequences=seqs,
                formula="; ".join(lines), notes=notes, engine_report=pool), pool, error)


def memory_for(eng: Any, cx: Any, acc: Any, env: dict[str, Any], assumed: dict[str, Any], *,
               release: str | None = None, notes: list[str] | None = None) -> Memory | None:
    """The memory block under the query's SGLang release, or under recorded `release` (a neighbour of an unrecorded
    one: its notes go to `notes`, and no changes that make it fit are planned)."""
    q, model = cx.q, cx.model
    if model is None:
        return None
    rel = release or q.release
    said = cx.notes if notes is None else notes
    capacity = acc.capacity_bytes()
    if capacity is None:
        said.append(f"{acc.id} has no memory capacity recorded; the KV fit is not computed")
        return None
    r = eng.resolution(cx, acc, env, release) if rel else {}
    if r.get("error"):
        said.append(f"SGLang refuses this line before it sizes memory: {r['message']}")
        return None
    args = q.settings if q.engine == eng.name else {}
    msf = args.get("mem_fraction_static") or r.get("mem_fraction_static")
    if msf is None:
        said.append("SGLang's mem_fraction_static is not resolved for this GPU; the pool is not sized")
        return None
    if args.get("mem_fraction_static") is None:
        assumed["mem_fraction_static"] = f"{msf} (SGLang's own, from this GPU's memory and the model)"
    kv = _kv(r.get("kv_cache_dtype"), env, model)
    ctx = q.ctx or model.max_context
    if q.ctx is None and ctx:
        assumed["ctx"] = f"{ctx} (the model's max context, for the memory check only)"
    batch = q.batch or 1
    page = int(r.get("page_size") or 1)
    # SGLang's --dtype auto loads a float32 checkpoint as float16, bfloat16 for Gemma models
    # (sglang/srt/configs/model_config.py:2304 _get_and_verify_dtype, 0.5.23)
    gemma = str(getattr(model, "architecture", None) or "").lower().startswith("gemma")
    weights = fp32_loaded_as(model, q.weights, q.dtype, "bf16" if gemma else "fp16")
    if getattr(model, "encoders", None):  # SGLang 0.5.23 builds the towers unconditionally (gemma3_mm.py:185)
        assumed["vision tower"] = f"{tower_bytes(model, weights)[0] / 1e9:,.2f} GB in the weights (SGLang loads it)"
    if weights != q.weights:
        how = "float32" if weights == "fp32" else "auto"
        said.append(f"{model.weight_dtype} checkpoint: SGLang's --dtype {how} loads it as {weights} "
                        "(sglang/srt/configs/model_config.py _get_and_verify_dtype)")
    f, pool, error = fit(model, kv, capacity, ctx, mem_fraction_static=float(msf), page_size=page, batch=batch,
                         tp=q.gpus, weights=weights, max_total_tokens=args.get("max_total_tokens"),
                         max_running_requests=args.get("max_running_requests"), mamba_slots=mamba_slots(args),
                         dsa_backends=(r.get("dsa_prefill_backend"), r.get("dsa_decode_backend")),
                         reserve_gib=multimodal_reserve_gib(model, rel, cc=env.get("cc"),
                                                            gpu_mib=capacity / 2**20,
                                                            max_running_requests=args.get("max_running_requests")),
                         release=rel, draft_tokens=int(args.get("speculative_num_draft_tokens") or 0),
                         attn_dp=attn_dp_width(args))
    table_refused = bool(error and error.startswith(reqtable.OOM))
    to_fit = _to_fit(cx, acc, env, f, kv, ctx, batch, page, args, table_refused) \
        if f.fits is False and release is None else []
    report: dict[str, Any] = pool.as_dict(ctx) if pool is not None else {"basis": "estimated"}
    if error:
        report["error"] = error
    cap_note = "driver-reported bytes" if acc.driver_memory else "marketed GB x 1e9 (no driver figure recorded)"
    mem = Memory(fits=f.fits, kv_bytes=f.kv_bytes, kv_bytes_per_token=f.kv_bytes_per_token,
                 weights_bytes=f.weights_bytes, available_bytes=f.pool_bytes, capacity_bytes=f.capacity_bytes,
                 max_ctx=f.max_ctx, formula=f.formula, notes=[*f.notes, f"capacity: {cap_note}"],
                 weights_dtype=f.weights_dtype, reserve_bytes=f.reserve_bytes, pool_tokens=f.pool_tokens,
                 max_sequences=f.max_sequences, max_ctx_memory=f.max_ctx_memory, ctx_limit=f.ctx_limit,
                 utilization=float(msf), engine_report=report, to_fit=to_fit,
                 gpus_to_fit=next((int(o["change"].split()[1]) for o in to_fit if o["change"].startswith("--gpus")),
                                  None))
    short = short_pool(pool.tokens if pool is not None else None, ctx, asked=q.ctx is not None or batch > 1,
                       error=error, release=rel)
    if short:
        report["short"] = short
    mem.pool = EnginePool(engine=eng.name, label=f"SGLang {rel}", release=rel,
                          tokens=pool.tokens if pool is not None else None,
                          concurrency=round(pool.tokens / ctx, 2) if pool is not None and ctx else None,
                          starts=False if error else True if short else None, error=error, report=report)
    return mem


SHORT_SOURCE = {"0.5.23": "sglang/srt/managers/tp_worker.py:552-572 in 0.5.23",
                "0.5.17": "sglang/srt/managers/tp_worker.py:407-413 and 509-521 in 0.5.17"}
"""Where each recorded release caps a request at the pool (read in its wheel); 0.5.23 also logs a warning."""


def short_pool(tokens: int | None, context_len: int | None, *, asked: bool, error: str | None,
               release: str | None = None) -> dict[str, Any] | None:
    """Where SGLang starts with a pool shorter than the context: its start-up check refuses only an empty pool
    ("Not enough memory", model_executor/pool_configurator.py:95 in 0.5.23); a pool of fewer tokens than
    context_len only logs a warning and caps a request at min(context_len - 1, pool - 1) tokens, its input 5
    fewer (managers/tp_worker.py:555-572), refusing a longer input or truncating it under --allow-auto-truncate
    (managers/utils.py:265-285); 0.5.17 caps the same way without the warning (SHORT_SOURCE). For a line that asks
    no context (the model's own is assumed) the verdict is then SGLang's start, with this limit said; None where the
    pool holds the context, is empty, or a context or batch was asked (the question is then whether that fits)."""
    if asked or error or not tokens or tokens <= 0 or not context_len or tokens >= context_len:
        return None
    longest = min(context_len - 1, tokens - 1)
    return {"pool_tokens": tokens, "context_len": context_len, "max_request": longest, "max_input": longest - 5,
            "longer": "refused, or cut with --allow-auto-truncate",
            "source": SHORT_SOURCE.get(release or "", SHORT_SOURCE["0.5.23"])}


def mamba_slots(args: dict[str, Any]) -> int:
    """State slots per request SGLang keeps for Mamba / linear-attention models (kv_cache_configurator.py
    _calculate_mamba_ratio: 1 without the radix cache, else 3, plus 2 for the extra-buffer strategy with overlap
    scheduling, which `auto` resolves to)."""
    if args.get("disable_radix_cache"):
        return 1
    return 3 if args.get("mamba_radix_cache_strategy") == "no_buffer" else 5


LOW = ("bf16", "fp16", "fp32")  # what fp8 would halve (KV) or shrink (weights)


def _to_fit(cx: Any, acc: Any, env: dict[str, Any], f: Fit, kv: str, ctx: int | None, batch: int,
            page: int, args: dict[str, Any], table_refused: bool = False) -> list[dict[str, Any]]:
    """The changes that make SGLang's pool hold the request, each planned again by the same pool (fit, plan.py)
    with SGLang's mem_fraction_static for the changed line: a shorter --context-length, an fp8 KV cache, fp8
    weights, or more GPUs (--tp-size, doubling up to 64). Where SGLang's request-to-token table does not fit
    (reqtable.py), the longest --context-length at which it starts and the most --max-running-requests it starts
    with come first, as SGLang's flags. [{"change", "max_sequences", "max_ctx"}]."""
    from kbtool.solve.engines.sglang import facts as sf
    from kbtool.solve.engines.sglang import resolve as sr
    from kbtool.solve.engines.sglang.serverargs import args_for

    q, model = cx.q, cx.model
    capacity = acc.capacity_bytes()

    draft = int(args.get("speculative_num_draft_tokens") or 0)
    width = attn_dp_width(args)  # the attention-DP groups stay as the line sets them

    def on(gpus: int, kv_as: str | None = None, weights_as: str | None = None, ctx_as: int | None = None,
           requests: int | None = None) -> Fit:
        line = dict(args_for(q, model), tp_size=gpus)
        if ctx_as:
            line["context_length"] = ctx_as
        msf = args.get("mem_fraction_static")
        if msf is None:
            plat = sf.platform_facts(acc, env.get("cc"), env.get("cuda") or cx.img.cuda)
            r = sr.resolve(cx.img, q.release or "", plat, sf.model_facts_from_record(model), line)
            msf = r.get("mem_fraction_static")
        if msf is None:
            return f
        got, _pool, _err = fit(model, kv_as or kv, capacity, ctx_as or ctx, mem_fraction_static=float(msf),
                               page_size=page, batch=batch, tp=gpus, weights=weights_as or q.weights,
                               max_total_tokens=args.get("max_total_tokens"),
                               max_running_requests=requests or args.get("max_running_requests"),
                               mamba_slots=mamba_slots(args), draft_tokens=draft,
                               attn_dp=width if gpus % width == 0 else 1,
                               reserve_gib=multimodal_reserve_gib(model, q.release, cc=env.get("cc"),
                                                                  gpu_mib=capacity / 2**20,
                                                                  max_running_requests=requests or args.get(
                                                                      "max_running_requests")))
        return got

    def offer(change: str, g: Fit) -> dict[str, Any]:
        return {"change": change, "max_sequences": g.max_sequences, "max_ctx": g.max_ctx}

    out: list[dict[str, Any]] = []
    if table_refused and ctx:
        out += _table_fixes(on, f, ctx, q.gpus, offer)
    elif f.ctx_limit == "memory" and f.max_ctx and ctx and f.max_ctx < ctx:
        g = on(q.gpus, ctx_as=f.max_ctx)
        if g.fits:
            out.append(offer(f"--ctx {f.max_ctx}", g))
    if kv in LOW:
        g = on(q.gpus, kv_as="fp8_e4m3")
        if g.fits:
            out.append(offer("--kv fp8", g))
    if f.weights_dtype in LOW:
        g = on(q.gpus, weights_as="fp8")
        if g.fits:
            out.append(offer("--weights fp8", g))
    p = q.gpus * 2
    while p <= 64:
        g = on(p)
        if g.fits:
            out.append(offer(f"--gpus {p}", g))
            break
        p *= 2
    return out


def _table_bytes(g: Fit) -> int | None:
    """The request-to-token table of a planned line (the Pool fit() hands back as the Fit's engine_report), None
    where SGLang refused it before the pool."""
    return g.engine_report.table_bytes if isinstance(g.engine_report, Pool) else None


def _table_fixes(on: Any, f: Fit, ctx: int, gpus: int, offer: Any) -> list[dict[str, Any]]:
    """Where the request-to-token table stops SGLang: the longest --context-length at which it starts and its pool
    holds the request, and the most --max-running-requests its table fits with (with the longest context the pool
    holds where the asked one is longer), each found by planning the changed line again (fit)."""
    out: list[dict[str, Any]] = []
    lo, hi = 0, min(ctx - 1, f.max_ctx_memory or ctx - 1)  # fits at `lo`; the pool binds beyond max_ctx_memory
    while lo < hi:  # the table grows with the context (its rows shrink only until 2,048 + 1: plan.py)
        mid = (lo + hi + 1) // 2
        if on(gpus, ctx_as=mid).fits:
            lo = mid
        else:
            hi = mid - 1
    if lo:
        g = on(gpus, ctx_as=lo)
        out.append(dict(offer(f"--context-length {lo}", g), req_to_token_bytes=_table_bytes(g)))
    at = ctx if f.max_ctx_memory >= ctx else f.max_ctx_memory
    base = on(gpus, ctx_as=at, requests=1)
    if base.fits:
        lo, hi = 1, max(1, int(base.pool_tokens) // 2)  # SGLang caps it at max_total_num_tokens // 2
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if on(gpus, ctx_as=at, requests=mid).fits:
                lo = mid
            else:
                hi = mid - 1
        g = on(gpus, ctx_as=at, requests=lo)
        change = f"--max-running-requests {lo}" if at == ctx else f"--context-length {at} --max-running-requests {lo}"
        o = offer(change, g)
        o["max_sequences"] = min(lo, g.max_sequences or 0)
        o["req_to_token_bytes"] = _table_bytes(g)
        out.append(o)
    return out


def _kv(resolved: str | None, env: dict[str, Any], model: Any) -> str:
    """The KV dtype SGLang stores: its resolved --kv-cache-dtype, auto being the model's dtype."""
    from kbtool.solve.engines.sglang.serverargs import KV_OF

    if resolved and resolved != "auto":
        return KV_OF.get(resolved, env.get("kv_dtype") or "bf16")
    if env.get("dtype") == "fp32":  # --dtype float32: auto stores the model dtype (0.5.23
        return "fp32"  # mem_cache/kv_cache_dtype.py:49-59)
    dtype = model.unquantized_dtype if model.weight_dtype not in ("bf16", "fp16", "fp32") else model.weight_dtype
    return "bf16" if dtype == "fp32" else (dtype or "bf16")
