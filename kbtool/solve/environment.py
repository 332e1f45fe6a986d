"""The environment a query is judged in (design.md §4): the variables the query, the accelerator and the model
give, per accelerator (`base_env`, with the `assumed:` line's words for every default taken) and per phase
(`phase_env`: head dims, the score matrix a materialising kernel would allocate). The solver
(kbtool/solve/solver.py) applies the claims in it."""

from __future__ import annotations

from kbtool.errors import UsageError
from kbtool.solve.engines import registry as engines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.context import Ctx
    from kbtool.solve.image import AcceleratorV, ModelV

MLA_LAYOUTS = ("mla", "sparse-mla")
MLA_ONLY = frozenset(MLA_LAYOUTS)


def model_layout(model: ModelV) -> dict[str, Any]:
    """Attention layout variables the model decides."""
    types = {g.type for g in model.layers}
    if "mla" in types:
        attention = "mla"
    else:
        kvh = min(g.kv_heads for g in model.layers if g.kv_heads) if any(g.kv_heads for g in model.layers) else None
        attention = "gqa" if kvh is None else "mqa" if kvh == 1 else "mha" if kvh == model.num_heads else "gqa"
    windows = [g.window for g in model.layers if g.type == "sliding" and g.window]
    return {"attention": attention, "sliding_window": max(windows) if windows else (1 if "sliding" in types else 0)}


def backend_layout(env: dict[str, Any]) -> str | None:
    """The attention layout an engine's backends are judged for: an MLA model with a sparse indexer is sparse MLA
    to the engines, which offer it only their sparse backends. vLLM builds its MLA layers with use_sparse = the
    config has index_topk (0.34.0 model_executor/models/deepseek_v2.py:1138 and :1210, layers/mla.py:136, the
    selector asked at layers/attention/mla_attention.py:533-539), and its dense MLA backends refuse that ("sparse
    not supported"); engines/vllm/selection.answer_for asks vLLM's lists the same way. The kernels they call still
    compute MLA (FLASH_ATTN_MLA_SPARSE calls FA-3 with the top-k indices as its block table, 0.34.0
    v1/attention/backends/mla/flashattn_mla_sparse.py:245-258), so kernels keep the model's layout."""
    lay = env.get("attention")
    return "sparse-mla" if lay == "mla" and env.get("sparse") else lay


def phase_dims(model: ModelV, phase: str) -> tuple[int, int]:
    """(head_dim, head_dim_v) a kernel sees: MLA decode runs absorbed on the latent (576/512 for DeepSeek); a
    model whose attention layers differ in head size is checked at its widest."""
    mla = next((g for g in model.layers if g.type == "mla"), None)
    if mla is not None and phase == "decode":
        assert mla.kv_lora_rank is not None and mla.rope_dim is not None
        return mla.kv_lora_rank + mla.rope_dim, mla.kv_lora_rank
    if mla is None:  # a kernel serves every attention layer: the widest heads decide (Gemma 4's full layers: 512)
        dims = [(g.head_dim or model.head_dim, g.head_dim_v or g.head_dim or model.head_dim)
                for g in model.layers if g.type in ("full", "sliding", "chunked")]
        if dims:
            return max(dims)
    attn = next((g for g in model.layers if g.head_dim), None)
    hd = model.head_dim
    hv = (attn.head_dim_v or attn.head_dim or hd) if attn is not None else hd
    return hd, hv


def model_features(model: ModelV, gpus: int) -> dict[str, Any]:
    """The attention features and head counts the model record gives (per GPU under tensor parallel)."""
    out: dict[str, Any] = {"sinks": bool(model.sinks), "softcap": model.softcap or 0, "alibi": bool(model.alibi),
                           "sparse": bool(model.sparse), "num_heads": max(1, model.num_heads // gpus)}
    kvh = [g.kv_heads for g in model.layers if g.kv_heads]
    if kvh:
        out["kv_heads"] = max(1, -(-min(kvh) // gpus))
    mla = next((g for g in model.layers if g.type == "mla"), None)
    if mla is not None and mla.kv_lora_rank is not None:
        rope = mla.rope_dim or 0
        nope = getattr(mla, "qk_nope_head_dim", None) or (mla.head_dim or model.head_dim) - rope
        out.update(kv_lora_rank=mla.kv_lora_rank, qk_rope_head_dim=rope, qk_nope_head_dim=nope,
                   v_head_dim=mla.head_dim_v or mla.head_dim or model.head_dim)
    return out


def check_tensor_parallel(model: ModelV, gpus: int, flag: str) -> None:
    """Refuse a tensor-parallel size the engines refuse: vLLM's ModelConfig.verify_with_parallel_config (and
    SGLang's ModelConfig) require the attention heads to divide over the GPUs, and vLLM's QKVParallelLinear
    splits KV heads evenly or replicates them evenly (kv % tp == 0 below the KV head count, tp % kv == 0 above)."""
    if gpus <= 1:
        return
    if model.num_heads % gpus:
        raise UsageError(f"{flag} {gpus}: {model.id}'s {model.num_heads} attention heads do not divide over {gpus} "
                         "GPUs; the engines refuse it (attention heads must be divisible by the tensor-parallel size)",
                         fix=f"use a tensor-parallel size that divides {model.num_heads}")
    for g in model.layers:
        kv = g.kv_heads
        if kv and ((gpus < kv and kv % gpus) or (gpus >= kv and gpus % kv)):
            raise UsageError(f"{flag} {gpus}: {model.id}'s {kv} KV heads can neither be split nor replicated evenly "
                             f"over {gpus} GPUs; the engines refuse it",
                             fix=f"use a size that divides or is a multiple of {kv}")


def base_env(cx: Ctx, acc: AcceleratorV) -> tuple[dict[str, Any], dict[str, Any]]:
    q = cx.q
    typical = q.assume == "typical"
    env: dict[str, Any] = {"gpu": acc.id, "vendor": acc.vendor, "engine": q.engine}
    assumed: dict[str, Any] = {}
    if cx.phase_note:
        assumed["phase"] = cx.phase_note
    origin = cx.img.model_origin(q.model) if q.model else None  # how --model was read (kbtool/solve/modelref.py)
    if origin:
        assumed["model"] = origin
    if q.release_note:
        assumed[q.engine] = q.release_note
    if acc.architecture in cx.img.cc:
        env["sm"] = acc.architecture
        cc = cx.img.cc[acc.architecture]
        if cc:
            env["cc"] = float(cc)
    for k, v in (("ctx", q.ctx), ("batch", q.batch), ("block_size", q.block_size)):
        if v is not None:
            env[k] = v
    env.update(q.libs)
    for lib, ver in q.libs.items():  # a release no evidence ran: say which probed releases bracket it
        note = unprobed(cx.img.probed.get(lib, []), lib, str(ver))
        if note:
            assumed[f"{lib} evidence"] = note
    kv, dtype = q.kv, q.dtype
    if dtype is None:
        old_gpu = env.get("vendor") == "nvidia" and 0 < float(env.get("cc") or 0) < 8.0
        # vLLM's --dtype auto (vllm/config/model.py _resolve_auto_dtype) takes the checkpoint's torch_dtype, bf16
        # for an fp32 checkpoint, and fp16 where the GPU has no bf16 (cc < 8.0)
        ckpt = getattr(cx.model, "unquantized_dtype", None) if cx.model is not None else None
        dtype = "fp16" if kv == "fp16" or old_gpu or ckpt == "fp16" else "bf16"
        unread = cx.model is not None and cx.model.dtype_unread and not old_gpu and kv != "fp16"
        assumed["dtype"] = ("fp16 (no bf16 below sm80; the engines' --dtype auto picks fp16)" if old_gpu else
                            f"{dtype} (the base model's; this checkpoint's torch_dtype is not read, and AWQ/GPTQ "
                            "exports are often float16)" if unread else
                            f"{dtype} (the checkpoint's torch_dtype, as the engines' --dtype auto)" if ckpt == "fp16"
                            else dtype)
    if kv is None:
        # kv_cache_dtype auto stores the cache in the model's dtype, fp32 included (vLLM 0.33.0
        # vllm/utils/torch_utils.py:519-525 kv_cache_dtype_str_to_dtype returns model_config.dtype)
        kv = dtype if dtype in ("bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2") else "bf16"
        assumed["kv"] = f"{kv} (the q dtype)"
    env["dtype"], env["kv_dtype"] = dtype, kv
    env["kv_dtype_differs"] = kv != dtype
    if cx.model is not None:
        env.update(model_layout(cx.model))
        check_tensor_parallel(cx.model, q.gpus, getattr(q, "gpus_flag", "--gpus"))
        env.update(model_features(cx.model, q.gpus))
    if q.attention:
        env["attention"] = q.attention
    if typical:
        from kbtool.solve import profile

        for lib, ver in profile.newest_releases(cx.img).items():
            if lib not in env:
                env[lib] = ver
                assumed[lib] = f"{ver} (newest recorded)"
        if "cuda" not in env and acc.vendor == "nvidia" and cx.img.cuda:
            env["cuda"] = assumed["cuda"] = cx.img.cuda
        if "batch" not in env:
            env["batch"] = assumed["batch"] = profile.BATCH
        # vLLM forces the MLA backends' own block sizes (64, 128, 32 x n): there the block size is what the
        # backend needs (chosen per gate below), not the engine's default
        eng = engines.get(cx.q.engine)
        block = eng.default_block_size(cx.img, q) if eng is not None else None
        if "block_size" not in env and block and env.get("attention") not in MLA_ONLY:
            env["block_size"] = assumed["block_size"] = block
        if eng is None and acc.vendor == "nvidia" and "trtllm_kernels" not in env and any(
                "trtllm_kernels" in c.reads for k in cx.kernels for c in cx.img.claims(k.id)):
            # FlashInfer's TRT-LLM cubins (flashinfer-cubin, or the first-use download): kb assumes them as it does
            # under an engine, so a kernel-only answer does not leave trtllm-gen unknown on Blackwell
            env["trtllm_kernels"] = True
            assumed["trtllm_kernels"] = "True (flashinfer-cubin installed or NVIDIA's artifactory reachable)"
        if cx.model is None:
            for k, v in profile.NO_FEATURES.items():
                env.setdefault(k, v)
            if _mla_only(cx):  # the kernels asked implement MLA alone: a dense profile would only refuse them
                assumed["model"] = (f"none: {', '.join(k.id for k in cx.kernels)} implements MLA only; give --model "
                                    "with an MLA model (deepseek-v3, ...) for its head dims")
            else:
                if "attention" not in env:
                    env["attention"] = "gqa"
                assumed["model"] = "none: dense gqa, no sinks, sliding window, softcap or ALiBi"
                if q.head_dim is None:
                    assumed["head_dim"] = profile.HEAD_DIM
    return env, assumed


def phase_env(cx: Ctx, env: dict[str, Any], phase: str) -> dict[str, Any]:
    e = dict(env, phase=phase)
    q = cx.q
    if q.head_dim is not None:
        e["head_dim"], e["head_dim_v"] = q.head_dim, q.head_dim_v or q.head_dim
    elif cx.model is not None:
        e["head_dim"], e["head_dim_v"] = phase_dims(cx.model, phase)
    elif q.assume == "typical" and not _mla_only(cx):
        from kbtool.solve.profile import HEAD_DIM

        e["head_dim"] = e["head_dim_v"] = HEAD_DIM
    _workspace(e, phase, cx.memory_left)
    return e


def _workspace(e: dict[str, Any], phase: str, left: int | None) -> None:
    """The score matrix a materialising kernel allocates here (batch x heads x q_len x kv_len x 4 bytes) and
    whether it fits in the memory left; with the heads unknown, one head is a lower bound that can still say no."""
    ctx, batch = e.get("ctx"), e.get("batch")
    if ctx is None or batch is None or left is None:
        return
    q_len = ctx if phase == "prefill" else 1
    per_head = batch * q_len * ctx * 4
    heads = e.get("num_heads")
    e["memory_left_bytes"] = left
    if heads is not None:
        e["score_matrix_bytes"] = per_head * heads
        e["score_matrix_fits"] = per_head * heads <= left
    elif per_head > left:
        e["score_matrix_bytes"] = per_head
        e["score_matrix_fits"] = False


def _mla_only(cx: Ctx) -> bool:
    """The query names its kernels (--kernel) and every one implements MLA alone."""
    return bool(cx.q.kernels) and bool(cx.kernels) and all(set(k.attention) <= MLA_ONLY for k in cx.kernels)


def unprobed(probed: list[str], lib: str, version: str) -> str | None:
    """For `--lib LIB=VERSION` that no evidence ran: the probed releases around it (claims scoped to the
    release still apply; probe verdicts of other releases do not)."""
    from kbtool.solve.conditions import compare_versions
    from kbtool.solve.engines import registry

    if not probed or version in probed or lib in registry.ENGINES:  # an engine names its own releases
        return None
    below = [v for v in probed if compare_versions(v, version) < 0]
    above = [v for v in probed if compare_versions(v, version) > 0]
    if below and above:
        return f"{version} not probed: between {below[-1]} and {above[0]} (probed); its claims' own scopes only"
    side = f"after the newest probed {below[-1]}" if below else f"before the oldest probed {above[0]}"
    return f"{version} not probed: {side}; its claims' own scopes only"
