"""A Hugging Face config.json -> the data of a `model` record (pure mapping; validation is the caller's).

Reads configs as they are published: the text model at the top level or nested under `text_config`; MHA, GQA
and MQA; `head_dim` or hidden_size / heads; sliding windows (`sliding_window` with `layer_types`,
`sliding_window_pattern`, `max_window_layers` or per-layer patterns); chunked local attention (Llama 4);
MLA (`kv_lora_rank`, `qk_rope_head_dim`, `qk_nope_head_dim`, `v_head_dim`) and DeepSeek's sparse-attention
indexer (`index_head_dim`, `index_n_heads`); hybrid linear attention (Gated DeltaNet through `layer_types` or
`full_attention_interval`, Mamba-2 through `hybrid_override_pattern`) with the state shapes vLLM keeps
(vllm/model_executor/layers/mamba/mamba_utils.py); attention sinks; `max_position_embeddings` and RoPE scaling;
`quantization_config` and `torch_dtype` for the weights; MoE expert counts. The parameter count is derived
from the shapes (embeddings, attention, MLP, experts; multi-token-prediction layers left out) and the record
says so; a multimodal config's vision tower is counted apart, in `encoders` (kbtool/model/encoder.py). A field
the mapping needs and the config lacks raises ConfigError naming it.
"""

from __future__ import annotations

import math
from typing import Any

from kbtool.model.encoder import vision_encoder
from kbtool.model.hfcfg import DTYPES, Cfg, ConfigError, int_field, model_dtype, whole
from kbtool.model.hfquant import mixed_layers, mixed_weights, weights

__all__ = ["ConfigError", "to_record"]  # ConfigError: where callers have always imported it from

LAYER_TYPES = {"full_attention": "full", "attention": "full", "global": "full", "sliding_attention": "sliding",
               "local": "sliding", "chunked_attention": "chunked", "linear_attention": "linear",
               "mamba": "mamba", "mamba2": "mamba"}


def check_heads(c: Cfg) -> None:
    """Refuse impossible attention shapes before they are used or written: query heads, KV heads and head dim
    positive whole numbers, KV heads at most the query heads and dividing them (transformers' GQA grouping,
    vLLM's and SGLang's too), rope_scaling.factor a finite positive number."""
    heads = whole(c, "num_attention_heads", c.need("num_attention_heads", "the query heads"))
    kv = c.get("num_key_value_heads")
    if kv is not None:
        kv = whole(c, "num_key_value_heads", kv)
        path = "text_config.num_key_value_heads" if c.nested and "num_key_value_heads" in c.text \
            else "num_key_value_heads"
        if kv > heads or heads % kv:
            raise ConfigError(f"{c.where}: {path} is {kv}, which does not divide num_attention_heads {heads}"
                              + (" (more KV heads than query heads)" if kv > heads else ""),
                              fix="KV heads must divide the query heads (GQA groups query heads over KV heads)")
    for key in ("head_dim", "attention_head_dim", "hidden_size", "num_hidden_layers", "vocab_size",
                "max_position_embeddings", "intermediate_size", "sliding_window"):
        v = c.get(key)
        if v is not None and not (key == "sliding_window" and v is False):
            whole(c, key, v)
    _check_shapes(c)
    rs = c.get("rope_scaling") or c.get("rope_parameters")
    if rs is not None and not isinstance(rs, dict):
        raise ConfigError(f"{c.where}: rope_scaling is {type(rs).__name__}, not an object", fix="fix rope_scaling")
    factor = rs.get("factor") if isinstance(rs, dict) else None
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, int | float)
                               or not math.isfinite(factor) or factor <= 0):
        raise ConfigError(f"{c.where}: rope_scaling.factor is {factor!r}, not a finite positive number",
                          fix="give the RoPE scaling factor as a finite number")
    q = c.top.get("quantization_config") or c.get("quantization_config")
    if q is not None and not isinstance(q, dict):
        raise ConfigError(f"{c.where}: quantization_config is {type(q).__name__}, not an object",
                          fix="give quantization_config as an object, or remove it")


def _check_shapes(c: Cfg) -> None:
    """Fields the importer reads as text or as objects have that shape: `model_type: 5` or `block_configs: [5]`
    ended in "AttributeError: 'int' object has no attribute ..." as the user's message."""
    for key in ("model_type",):
        v = c.get(key)
        if v is not None and not isinstance(v, str):
            raise ConfigError(f"{c.where}: {key} is {repr(v)[:40]}, not a string",
                              fix=f"give {key} as the transformers name, e.g. \"llama\"")
    blocks = c.get("block_configs")
    if blocks is None:
        return
    if not isinstance(blocks, list):
        raise ConfigError(f"{c.where}: block_configs is {type(blocks).__name__}, not a list of blocks",
                          fix="give block_configs as a list of objects (one per layer), or remove it")
    for i, b in enumerate(blocks):
        if not isinstance(b, dict):
            raise ConfigError(f"{c.where}: block_configs[{i}] is {repr(b)[:40]}, not an object",
                              fix="give each block as an object with `attention` and `ffn`")
        for part in ("attention", "ffn"):
            if b.get(part) is not None and not isinstance(b[part], dict):
                raise ConfigError(f"{c.where}: block_configs[{i}].{part} is {repr(b[part])[:40]}, not an object",
                                  fix=f"give `{part}` as an object, e.g. {{\"no_op\": false}}")


INTERNVL = frozenset({"InternVLChatModel", "InternVLForConditionalGeneration"})


def _check_unmodelled(c: Cfg) -> None:
    """Refuse a layout the mapping would size wrongly rather than answer from it: DeepSeek-V4's compressed
    attention (`compress_ratios`: per layer, KV kept for 1 token in 4 or in 128 beside the sliding window) read as
    plain sliding-window layers would undercount its KV cache by orders of magnitude at long context; Llama 3.2
    Vision's cross-attention layers (mllama `cross_attention_layers`: their K/V come from the image's tiles, not the
    text, and its vision tower is not counted) read as self-attention layers would size both wrongly; InternVL's
    InternViT tower (InternViT-300M or InternViT-6B, beside the language model in `llm_config`) is one kb does not
    count, so the weights would be the language model's alone."""
    ratios = c.get("compress_ratios")
    if isinstance(ratios, list) and any(r for r in ratios if isinstance(r, (int, float))):
        raise ConfigError(f"{c.where}: compress_ratios (compressed attention, model_type "
                          f"'{c.get('model_type')}') is a KV layout kb does not model; its KV cache would be "
                          "sized as sliding-window layers only", fix="no workaround in kb yet: the model's KV "
                          "bytes per token need a compressed-attention layer kind (see CONTRIBUTING, Add a model)")
    cross = c.get("cross_attention_layers")
    if isinstance(cross, list) and cross:
        raise ConfigError(f"{c.where}: cross_attention_layers ({len(cross)} cross-attention layers, model_type "
                          f"'{c.top.get('model_type') or c.get('model_type')}') is a layout kb does not model: "
                          "their KV cache holds the image's tokens, not the text's, and the vision tower "
                          "is not counted", fix="no workaround in kb yet: a cross-attention layer kind and the "
                          "Mllama vision tower need modelling first (see CONTRIBUTING, Add a model)")
    arch = c.top.get("architectures")
    arch = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else None
    if arch in INTERNVL and isinstance(c.top.get("vision_config"), dict):
        raise ConfigError(f"{c.where}: {arch}'s vision tower (InternViT, vision_config) is one kb does not count; "
                          "the weights would be the language model's alone", fix="no workaround in kb yet: the "
                          "InternViT tower needs a function in kbtool/model/encoder.py (see CONTRIBUTING, Add a "
                          "model)")


# ---- layers -------------------------------------------------------------------------------------


def layer_kinds(c: Cfg) -> list[str]:
    """One of full, sliding, chunked, linear (Gated DeltaNet), mamba or none (no token mixer) per layer."""
    pattern = c.get("hybrid_override_pattern")
    if isinstance(pattern, str):  # Nemotron-H: M mamba, * attention, - MLP, E MoE
        return ["mamba" if ch == "M" else "full" if ch == "*" else "none" for ch in pattern]
    blocks = c.get("block_configs")
    if isinstance(blocks, list):  # DeciLM / Nemotron-NAS: per-block attention
        out = []
        for b in blocks:
            a = b.get("attention", {}) if isinstance(b, dict) else {}
            if a.get("no_op") or a.get("replace_with_linear"):
                out.append("none")
            else:
                out.append("sliding" if a.get("window_length") else "full")
        return out
    n = int_field(c, "num_hidden_layers", "the number of layers")
    types = c.get("layer_types")
    if isinstance(types, list) and types:
        kinds = []
        for t in types[:n]:
            k = LAYER_TYPES.get(str(t))
            if k is None:
                raise ConfigError(f"{c.where}: layer_types holds '{t}', a layer type the importer does not know",
                                  fix=f"known: {', '.join(LAYER_TYPES)}")
            kinds.append(k)
        if len(kinds) < n:
            raise ConfigError(f"{c.where}: layer_types lists {len(kinds)} layers, num_hidden_layers is {n}",
                              fix="give one layer type per layer")
        return kinds
    hyb = c.get("hybrid_layer_pattern")
    if isinstance(hyb, list) and len(hyb) >= n:  # MiMo-V2: 1 = sliding window, 0 = full
        return ["sliding" if x else "full" for x in hyb[:n]]
    interval = c.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0:  # Qwen3-Next: every interval-th layer is full
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(n)]
    if c.get("attention_chunk_size") and str(c.get("model_type", "")).startswith("llama4"):
        nope = c.get("no_rope_layers")  # 1 = RoPE layer (chunked local attention), 0 = NoPE (global)
        if not isinstance(nope, list) or len(nope) < n:
            step = c.get("no_rope_layer_interval", 4)
            nope = [int((i + 1) % step != 0) for i in range(n)]
        return ["chunked" if nope[i] else "full" for i in range(n)]
    window = c.get("sliding_window") or c.get("sliding_window_size")
    if not window or c.get("use_sliding_window") is False:
        return ["full"] * n
    pat = c.get("sliding_window_pattern")
    if isinstance(pat, int) and pat > 0:  # Gemma 3: every pat-th layer is global
        return ["full" if (i + 1) % pat == 0 else "sliding" for i in range(n)]
    if c.get("model_type") == "gemma2":
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]
    mwl = c.get("max_window_layers")
    if isinstance(mwl, int) and c.get("use_sliding_window") is True:  # Qwen2: layers from mwl on slide
        return ["sliding" if i >= mwl else "full" for i in range(n)]
    # Mistral, Mixtral, Phi-3 (published window, no layer_types): every layer. vLLM (0.26.0 and 0.34.0) puts the
    # config's sliding_window into CacheConfig when layer_types is absent (engine/arg_utils.py
    # create_engine_config), and an Attention built with no per-layer window takes that one
    # (model_executor/layers/attention/attention.py), so Llama-built Phi-3 slides too.
    return ["sliding"] * n


def _ssm_dtype(c: Cfg, model_dtype: str) -> str:
    """vLLM takes the recurrent state's dtype from the config where it names one (Qwen3.5 `mamba_ssm_dtype`,
    Nemotron-H `mamba_ssm_cache_dtype`), else the model dtype (`--mamba-ssm-cache-dtype auto`)."""
    raw = c.get("mamba_ssm_dtype") or c.get("mamba_ssm_cache_dtype")
    return DTYPES.get(str(raw), model_dtype) if raw else model_dtype


def _attention_layer(c: Cfg, kind: str, i: int, heads: int, head_dim: int) -> dict[str, Any]:
    kvh = c.get("num_key_value_heads") or heads
    hd, hdv = head_dim, c.get("v_head_dim") or head_dim
    blocks = c.get("block_configs")
    if isinstance(blocks, list):
        group = blocks[i].get("attention", {}).get("n_heads_in_group") or 1
        kvh = max(1, heads // int(group))
    sinks = c.get("model_type") == "gpt_oss"
    if kind == "sliding" and c.get("swa_head_dim"):  # MiMo-V2: own heads and dims in the window layers
        kvh = c.get("swa_num_key_value_heads") or kvh
        hd, hdv = c.get("swa_head_dim"), c.get("swa_v_head_dim") or c.get("swa_head_dim")
    if kind == "full" and c.get("global_head_dim"):  # Gemma 4: wider heads in the global layers
        hd = hdv = c.get("global_head_dim")
        kvh = c.get("num_global_key_value_heads") or kvh
    if c.get("add_swa_attention_sink_bias") and kind == "sliding":
        sinks = True
    if c.get("add_full_attention_sink_bias") and kind == "full":
        sinks = True
    g: dict[str, Any] = {"type": kind, "kv_heads": int(kvh), "head_dim": int(hd)}
    if hdv != hd:
        g["head_dim_v"] = int(hdv)
    if kind == "sliding":
        g["window"] = int(c.get("sliding_window") or c.get("sliding_window_size")
                          or (blocks[i]["attention"]["window_length"] if isinstance(blocks, list) else 0))
    if kind == "chunked":
        g["chunk"] = int(c.need("attention_chunk_size", "chunked local attention"))
    if sinks:
        g["sinks"] = True
    return g


def _mla_layer(c: Cfg) -> dict[str, Any]:
    nope = int_field(c, "qk_nope_head_dim", "MLA")
    rope = int_field(c, "qk_rope_head_dim", "MLA")
    g: dict[str, Any] = {"type": "mla", "head_dim": nope + rope, "head_dim_v": int_field(c, "v_head_dim", "MLA"),
                         "kv_lora_rank": int_field(c, "kv_lora_rank", "MLA"), "rope_dim": rope,
                         "qk_nope_head_dim": nope}
    if c.get("index_head_dim") is not None or c.get("index_n_heads") is not None:
        g["index_head_dim"] = int_field(c, "index_head_dim", "the sparse-attention indexer")
        g["index_n_heads"] = int_field(c, "index_n_heads", "the sparse-attention indexer")
        if c.get("index_topk"):
            g["index_topk"] = int(c.get("index_topk"))
    return g


def _gdn_layer(c: Cfg, model_dtype: str) -> dict[str, Any]:
    """Gated DeltaNet: vLLM MambaStateShapeCalculator.gated_delta_net_state_shape (conv, recurrent)."""
    why = "the linear-attention (Gated DeltaNet) state"
    nk, nv = int_field(c, "linear_num_key_heads", why), int_field(c, "linear_num_value_heads", why)
    dk, dv = int_field(c, "linear_key_head_dim", why), int_field(c, "linear_value_head_dim", why)
    kernel = int_field(c, "linear_conv_kernel_dim", why)
    conv_dim = dk * nk * 2 + dv * nv
    return {"type": "linear", "state": [
        {"name": "conv", "shape": [conv_dim, kernel - 1], "tp_dim": 0, "dtype": model_dtype},
        {"name": "recurrent", "shape": [nv, dv, dk], "tp_dim": 0, "dtype": _ssm_dtype(c, model_dtype)}]}


def _mamba2_layer(c: Cfg, model_dtype: str) -> dict[str, Any]:
    """Mamba-2: vLLM MambaStateShapeCalculator.mamba2_state_shape (conv, temporal)."""
    why = "the Mamba-2 state"
    heads, hdim = int_field(c, "mamba_num_heads", why), int_field(c, "mamba_head_dim", why)
    groups, state = int_field(c, "n_groups", why), int_field(c, "ssm_state_size", why)
    kernel = int_field(c, "conv_kernel", why)
    inner = heads * hdim
    return {"type": "linear", "state": [
        {"name": "conv", "shape": [inner + 2 * groups * state, kernel - 1], "tp_dim": 0, "dtype": model_dtype},
        {"name": "temporal", "shape": [heads, hdim, state], "tp_dim": 0, "dtype": _ssm_dtype(c, model_dtype)}]}


def layer_groups(c: Cfg, kinds: list[str], heads: int, head_dim: int, dtype: str) -> list[dict[str, Any]]:
    """Per-layer groups, merged where consecutive-or-not layers are identical (first appearance order)."""
    mla = c.get("kv_lora_rank") is not None
    groups: list[dict[str, Any]] = []
    for i, kind in enumerate(kinds):
        if kind == "none":
            continue
        if kind == "linear":
            g = _gdn_layer(c, dtype)
        elif kind == "mamba":
            g = _mamba2_layer(c, dtype)
        elif mla:
            g = _mla_layer(c)
        else:
            g = _attention_layer(c, kind, i, heads, head_dim)
        for have in groups:
            if {k: v for k, v in have.items() if k != "count"} == g:
                have["count"] += 1
                break
        else:
            groups.append({"type": g.pop("type"), "count": 1, **g})
    if not groups:
        raise ConfigError(f"{c.where}: no layer with a KV cache or state", fix="check num_hidden_layers")
    return groups


# ---- parameters ---------------------------------------------------------------------------------


def _moe(c: Cfg) -> tuple[int, int, int, int] | None:
    """(routed experts, active, expert width, shared width) or None for a dense model."""
    routed = c.get("n_routed_experts") or c.get("num_local_experts") or c.get("num_experts")
    if not routed or (c.get("model_type", "").startswith("gemma4") and not c.get("enable_moe_block")):
        return None
    active = c.get("num_experts_per_tok") or c.get("experts_per_token") or c.get("top_k_experts")
    if not active:
        c.need("num_experts_per_tok", "the active experts of an MoE model")
    width = c.get("moe_intermediate_size") or c.need("intermediate_size", "the expert width")
    shared = 0
    if c.get("shared_expert_intermediate_size"):
        shared = c.get("shared_expert_intermediate_size")
    elif c.get("moe_shared_expert_intermediate_size"):
        shared = c.get("moe_shared_expert_intermediate_size")
    elif c.get("n_shared_experts"):
        shared = c.get("n_shared_experts") * width
    elif str(c.get("model_type", "")).startswith("llama4"):
        shared = width  # one shared expert of the expert width
    return int(routed), int(active), int(width), int(shared)


def _moe_layers(c: Cfg, n: int) -> list[bool]:
    pattern = c.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        return [ch == "E" for ch in pattern]
    if c.get("interleave_moe_layer_step"):
        step = int(c.get("interleave_moe_layer_step"))
        return [(i + 1) % step == 0 for i in range(n)]
    freq = c.get("moe_layer_freq")
    if isinstance(freq, list):
        return [bool(x) for x in freq[:n]]
    k = int(c.get("first_k_dense_replace") or 0)
    f = int(freq or 1)
    step = int(c.get("decoder_sparse_step") or 1)
    only = set(c.get("mlp_only_layers") or [])
    return [i >= k and i % f == 0 and (i + 1) % step == 0 and i not in only for i in range(n)]


def _ffn_width(c: Cfg, i: int, hidden: int) -> int:
    blocks = c.get("block_configs")
    if isinstance(blocks, list):
        ffn = blocks[i].get("ffn", {})
        if ffn.get("no_op") or ffn.get("replace_with_linear"):
            return 0
        mult = float(ffn.get("ffn_mult") or 0)
        width = int(2 * mult * hidden / 3)
        return width + (-width % 256)  # DeciLM's _ffn_mult_to_intermediate_size
    return int(c.get("intermediate_size_mlp") or c.need("intermediate_size", "the MLP width"))


def _attn_params(c: Cfg, g: dict[str, Any], heads: int, hidden: int) -> int:
    t = g["type"]
    if t == "mla":
        nope, rope, v, r = g["qk_nope_head_dim"], g["rope_dim"], g["head_dim_v"], g["kv_lora_rank"]
        ql = c.get("q_lora_rank")
        q = hidden * ql + ql * heads * (nope + rope) if ql else hidden * heads * (nope + rope)
        p = q + hidden * (r + rope) + r * heads * (nope + v) + heads * v * hidden
        if g.get("index_head_dim"):
            ih, ihd = g["index_n_heads"], g["index_head_dim"]
            p += (ql or hidden) * ih * ihd + hidden * ihd + hidden * ih
        return int(p)
    if t == "linear":
        conv = g["state"][0]["shape"]
        if c.get("mamba_num_heads"):
            inner = c.get("mamba_num_heads") * c.get("mamba_head_dim")
            nh = c.get("mamba_num_heads")
            return int(hidden * (conv[0] + inner + nh) + conv[0] * (conv[1] + 1) + inner * hidden)
        nv, dv, _ = g["state"][1]["shape"]
        return int(hidden * (conv[0] + nv * dv + 2 * nv) + conv[0] * (conv[1] + 1) + nv * dv * hidden)
    hd, hdv, kvh = g["head_dim"], g.get("head_dim_v", g["head_dim"]), g["kv_heads"]
    gate = 2 if c.get("attn_output_gate") else 1
    v = 0 if (c.get("attention_k_eq_v") and t == "full") else hidden * kvh * hdv
    return int(hidden * heads * hd * gate + hidden * kvh * hd + v + heads * hdv * hidden)


def parameters(c: Cfg, kinds: list[str], groups: list[dict[str, Any]], heads: int) -> dict[str, int]:
    """Parameters per group, from the shapes (norms and biases are left out: under 0.1%)."""
    hidden = int_field(c, "hidden_size", "the model width")
    vocab = int_field(c, "vocab_size", "the embedding size")
    n = len(kinds)
    tie_default = str(c.get("model_type", "")).startswith("gemma")  # Gemma's config classes tie; Llama 4's don't
    tie = c.top.get("tie_word_embeddings", c.text.get("tie_word_embeddings"))
    tie = tie_default if tie is None else bool(tie)
    out = {"embedding": vocab * hidden, "lm_head": 0 if tie else vocab * hidden, "attention": 0, "mlp": 0,
           "experts": 0}
    by_kind: dict[str, dict[str, Any]] = {}
    for g in groups:
        by_kind.setdefault(g["type"], g)
    blocks = c.get("block_configs")
    for i, kind in enumerate(kinds):
        if kind == "none":
            continue
        key = "mla" if c.get("kv_lora_rank") is not None and kind not in ("linear", "mamba") else kind
        key = "linear" if kind == "mamba" else key
        g = by_kind[key]
        if isinstance(blocks, list) and kind == "full":
            g = dict(g, kv_heads=max(1, heads // int(blocks[i]["attention"].get("n_heads_in_group") or 1)))
        out["attention"] += _attn_params(c, g, heads, hidden)
    mats = 2 if c.get("mlp_hidden_act") == "relu2" else 3
    moe = _moe(c)
    moe_at = _moe_layers(c, n) if moe else [False] * n
    pattern = c.get("hybrid_override_pattern")
    for i in range(n):
        if isinstance(pattern, str) and pattern[i] not in "-E":
            continue  # a mamba or attention block has no MLP
        if moe and moe_at[i]:
            routed, _, width, shared = moe
            out["experts"] += routed * mats * hidden * width + mats * hidden * shared + hidden * routed
            if str(c.get("model_type", "")).startswith("gemma4"):
                out["mlp"] += 3 * hidden * _ffn_width(c, i, hidden)  # Gemma 4 keeps a dense MLP beside
        else:
            out["mlp"] += mats * hidden * _ffn_width(c, i, hidden)
    return out


def mtp_parameters(c: Cfg, groups: list[dict[str, Any]], heads: int, layers: int) -> int | None:
    """Parameters of the config's `layers` multi-token-prediction layers, as vLLM builds each (Qwen3.5's
    qwen3_5_mtp.py and Qwen3-Next's qwen3_next_mtp.py: a full-attention decoder layer and `fc`, a projection of
    the concatenated embedding and hidden state, 2 x hidden -> hidden; DeepSeek's deepseek_mtp.py: a decoder layer
    and `eh_proj`, the same shape): one layer's attention of the model's full or MLA type, its MLP (the experts
    where the model is MoE: the MTP layer sits past the dense prefix) and that projection. Embeddings and lm_head
    are left out: vLLM's draft shares the model's (v1/spec_decode/llm_base_proposer.py _maybe_share_embeddings /
    _maybe_share_lm_head, "Detected MTP model"). None where the model has no attention layer of those types."""
    hidden = int_field(c, "hidden_size", "the model width")
    g = next((g for g in groups if g["type"] == "mla"), None) or next((g for g in groups if g["type"] == "full"),
                                                                      None)
    if g is None:
        return None
    mats = 2 if c.get("mlp_hidden_act") == "relu2" else 3
    moe = _moe(c)
    if moe:
        routed, _, width, shared = moe
        mlp = routed * mats * hidden * width + mats * hidden * shared + hidden * routed
    else:
        mlp = mats * hidden * int(c.get("intermediate_size") or c.need("intermediate_size", "the MLP width"))
    return layers * (_attn_params(c, g, heads, hidden) + mlp + 2 * hidden * hidden)


# ---- weights ------------------------------------------------------------------------------------


# ---- the record ---------------------------------------------------------------------------------


CHATGLM_NAMES = {"vocab_size": "padded_vocab_size", "num_hidden_layers": "num_layers",
                 "intermediate_size": "ffn_hidden_size", "head_dim": "kv_channels",
                 "max_position_embeddings": "seq_length"}


def chatglm_fields(data: Any) -> Any:
    """ChatGLM's remote-code config (GLM-4-9B, model_type "chatglm") names its shapes its own way; vLLM's chatglm.py
    reads them as: KV heads multi_query_group_num where multi_query_attention is set, else the query heads; head dim
    kv_channels; a gated MLP of ffn_hidden_size (dense_h_to_4h is 2 x that wide); vocab padded_vocab_size; layers
    num_layers; and its length is seq_length (one of the length keys config/model.py reads). The standard names
    are filled in where the config leaves them out (vLLM 0.34.0 model_executor/models/chatglm.py)."""
    if not isinstance(data, dict) or data.get("model_type") != "chatglm" or "padded_vocab_size" not in data:
        return data
    out = dict(data)
    for std, own in CHATGLM_NAMES.items():
        if out.get(std) is None and out.get(own) is not None:
            out[std] = out[own]
    if out.get("num_key_value_heads") is None:
        out["num_key_value_heads"] = (out.get("multi_query_group_num") if out.get("multi_query_attention")
                                      else out.get("num_attention_heads"))
    return out


def to_record(data: dict[str, Any], rid: str, *, where: str, name: str | None = None,
              source: dict[str, Any] | None = None, quant: dict[str, Any] | None = None) -> dict[str, Any]:
    """The data of a `model` record for the config `data` (read from `where`)."""
    data = chatglm_fields(data)
    c = Cfg(data, where)
    check_heads(c)
    _check_unmodelled(c)
    kinds = layer_kinds(c)
    heads = int_field(c, "num_attention_heads", "the query heads")
    hidden = c.get("hidden_size")
    head_dim = c.get("head_dim") or c.get("attention_head_dim")
    if c.get("kv_lora_rank") is not None:
        head_dim = int(c.get("qk_nope_head_dim") or 0) + int(c.get("qk_rope_head_dim") or 0)
    if not head_dim:
        if not hidden:
            c.need("head_dim", "the head dim (or hidden_size / num_attention_heads)")
        if int(hidden) % heads:
            raise ConfigError(f"{c.where}: hidden_size {hidden} over num_attention_heads {heads} is not a whole head "
                              f"dim ({hidden / heads:.2f}), and the config gives no head_dim",
                              fix="add head_dim to the config (transformers and the engines need it here)")
        head_dim = int(hidden) // heads
    dtype = model_dtype(c)
    groups = layer_groups(c, kinds, heads, int(head_dim), dtype)
    params = parameters(c, kinds, groups, heads)
    moe = _moe(c)
    layers_q = mixed_layers(c, quant)
    second: dict[str, str] = {}
    kept: dict[str, int] = {}
    quantized: list[str] | None
    wnote: str | None
    group_size: int | None = None
    if layers_q is not None:
        moe_at = _moe_layers(c, len(kinds)) if moe else [False] * len(kinds)
        wdtype, quantized, second, kept, wnote = mixed_weights(c, layers_q, kinds, params, moe, moe_at)
    else:
        wdtype, quantized, group_size, wnote = weights(c, moe is not None, quant)
    notes = ["parameters derived from the config's shapes (embeddings, attention, MLP and experts; norms, "
             "biases, multi-token-prediction layers and vision towers left out)"]
    if wnote:
        notes.append(wnote)
    # a vision_config beside a nested text_config (Qwen3-VL) or beside the text fields themselves (Qwen2.5-VL)
    multimodal = c.nested or isinstance(c.top.get("vision_config"), dict)
    enc = vision_encoder(c.top, int(hidden)) if multimodal and hidden else None
    if enc:
        text = "the text model of a multimodal config (text_config)" if c.nested else "a multimodal config"
        notes.append(f"{text}, and its vision tower ({enc['tower']}, {enc['parameters']:,} parameters from "
                     "vision_config as vLLM builds it) in `encoders`")
    elif c.nested:
        notes.append("the text model of a multimodal config (text_config); the vision tower is not counted")
    mtp = c.get("num_nextn_predict_layers") or c.get("mtp_num_hidden_layers") or c.get("num_mtp_modules")
    mtp_params = mtp_parameters(c, groups, heads, int(mtp)) if mtp else None
    if mtp:
        notes.append(f"{mtp} multi-token-prediction layer(s) in the checkpoint are not counted in `parameters` "
                     "(vLLM loads them only for speculative decoding; counted in `mtp_layers` and `mtp_parameters`)")
    rec: dict[str, Any] = {
        "id": rid, "kind": "model", "name": name or rid, "family": str(c.get("model_type") or rid),
        **({"architecture": str(arch[0])} if isinstance(arch := c.get("architectures"), list) and arch
           and isinstance(arch[0], str) else {}),
        "parameters": sum(params.values()), "parameters_basis": "derived",
        "parameter_groups": {k: v for k, v in params.items() if v},
        "weight_dtype": wdtype, "unquantized_dtype": dtype,
    }
    if enc:
        rec["encoders"] = [enc]
    if quantized is not None:
        rec["quantized"] = [g for g in quantized if params.get(g)]
    if group_size:
        rec["quant_group_size"] = group_size
    if second:
        rec["group_dtypes"] = second
    if kept:
        rec["kept_unquantized"] = kept
    if moe:
        routed, active, width, shared = moe
        moe_layers = sum(_moe_layers(c, len(kinds)))
        rec["experts"] = {"routed": routed, "active": int(active), "shared": int(c.get("n_shared_experts") or
                                                                             (1 if shared else 0)),
                          "moe_layers": max(1, moe_layers)}
        if c.get("model_type") == "gpt_oss":  # vLLM builds its experts with has_bias=True (models/gpt_oss.py:223)
            rec["experts"]["bias"] = True
        inter = int(active) * width + shared
    else:
        inter = c.get("intermediate_size") or c.get("intermediate_size_mlp")
        blocks = c.get("block_configs")
        if not inter and isinstance(blocks, list) and hidden:
            inter = max(_ffn_width(c, i, int(hidden)) for i in range(len(blocks)))
    if mtp:
        rec["mtp_layers"] = int(mtp)
        if mtp_params:
            rec["mtp_parameters"] = int(mtp_params)
    rec.update({"num_heads": heads, "head_dim": int(head_dim)})
    if hidden:
        rec["hidden_size"] = int(hidden)
    if inter:
        rec["intermediate_size"] = int(inter)
    rec["vocab_size"] = int(c.get("vocab_size"))
    mpe = c.get("max_position_embeddings")
    if mpe:
        rec["max_context"] = int(mpe)
    rs = c.get("rope_scaling") or c.get("rope_parameters")
    if isinstance(rs, dict) and (rs.get("rope_type") or rs.get("type")) not in (None, "default"):
        rec["rope_scaling"] = {"type": str(rs.get("rope_type") or rs.get("type"))}
        if rs.get("factor") is not None:
            rec["rope_scaling"]["factor"] = float(rs["factor"])
        if rs.get("original_max_position_embeddings"):
            rec["rope_scaling"]["original_max_position_embeddings"] = int(rs["original_max_position_embeddings"])
    # vLLM's get_rope rotates int(head_size x partial_rotary_factor) dims (model_executor/layers/rotary_embedding/
    # __init__.py:66-72), the factor read under any of these names (transformers_utils/config.py:532-540 in 0.26.0)
    prf = next((c.get(k) for k in ("partial_rotary_factor", "rotary_pct", "rotary_emb_fraction")
                if c.get(k) is not None), None)
    if isinstance(prf, (int, float)) and not isinstance(prf, bool) and 0 < prf < 1:
        rec["rotary_dim"] = int(int(head_dim) * prf)
    if c.get("attn_logit_softcapping"):
        rec["softcap"] = float(c.get("attn_logit_softcapping"))
    if c.get("alibi") or c.get("model_type") == "bloom":
        rec["alibi"] = True
    rec["layers"] = groups
    rec["sources"] = [source or {"type": "doc", "ref": where}]
    rec["notes"] = "; ".join(notes) + "."
    return rec
