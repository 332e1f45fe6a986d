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
import re
from typing import Any

from kbtool.errors import UsageError
from kbtool.model.encoder import vision_encoder

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
          "bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}
LAYER_TYPES = {"full_attention": "full", "attention": "full", "global": "full", "sliding_attention": "sliding",
               "local": "sliding", "chunked_attention": "chunked", "linear_attention": "linear",
               "mamba": "mamba", "mamba2": "mamba"}


class ConfigError(UsageError):
    """A config.json the importer cannot map (a missing or unsupported field)."""


class Cfg:
    """The text model's config, with the top level as a fallback, and errors that name the missing field."""

    def __init__(self, data: dict[str, Any], where: str) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: not a JSON object", fix="give the model's config.json")
        text = data.get("text_config") or data.get("llm_config") or data.get("language_config")
        self.top, self.where = data, where
        self.text = text if isinstance(text, dict) else data
        self.nested = self.text is not data

    def get(self, key: str, default: Any = None) -> Any:
        v = self.text.get(key)
        if v is None and self.nested:
            v = self.top.get(key)
        return default if v is None else v

    def need(self, key: str, why: str) -> Any:
        v = self.get(key)
        if v is None:
            path = f"text_config.{key}" if self.nested else key
            raise ConfigError(f"{self.where}: field '{path}' is missing ({why})",
                              fix=f"add '{key}' to the config, or write the record by hand (`kb new model ID`)")
        return v


def _int(c: Cfg, key: str, why: str) -> int:
    v = c.need(key, why)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ConfigError(f"{c.where}: field '{key}' is {v!r}, not a count", fix="give a whole number")
    return v


def _whole(c: Cfg, key: str, v: Any, *, positive: bool = True) -> int:
    """A config count: a whole number (1.0 is one; 1.5, "8", true are refused), positive unless told."""
    path = f"text_config.{key}" if c.nested and key in c.text else key
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or (v <= 0 if positive else v < 0):
        raise ConfigError(f"{c.where}: {path} is {v!r}, not a {'positive ' if positive else ''}whole number",
                          fix=f"give {path} as a whole number (transformers and the engines refuse the config)")
    return v


def check_heads(c: Cfg) -> None:
    """Refuse impossible attention shapes before they are used or written: query heads, KV heads and head dim
    positive whole numbers, KV heads at most the query heads and dividing them (transformers' GQA grouping,
    vLLM's and SGLang's too), rope_scaling.factor a finite positive number."""
    heads = _whole(c, "num_attention_heads", c.need("num_attention_heads", "the query heads"))
    kv = c.get("num_key_value_heads")
    if kv is not None:
        kv = _whole(c, "num_key_value_heads", kv)
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
            _whole(c, key, v)
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


def _check_unmodelled(c: Cfg) -> None:
    """Refuse a KV layout the mapping would size wrongly rather than answer from it: DeepSeek-V4's compressed
    attention (`compress_ratios`: per layer, KV kept for 1 token in 4 or in 128 beside the sliding window) read as
    plain sliding-window layers would undercount its KV cache by orders of magnitude at long context."""
    ratios = c.get("compress_ratios")
    if isinstance(ratios, list) and any(r for r in ratios if isinstance(r, (int, float))):
        raise ConfigError(f"{c.where}: compress_ratios (compressed attention, model_type "
                          f"'{c.get('model_type')}') is a KV layout kb does not model; its KV cache would be "
                          "sized as sliding-window layers only", fix="no workaround in kb yet: the model's KV "
                          "bytes per token need a compressed-attention layer kind (see CONTRIBUTING, Add a model)")


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
    n = _int(c, "num_hidden_layers", "the number of layers")
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
    return ["sliding"] * n  # Mistral: every layer


def _model_dtype(c: Cfg) -> str:
    raw = c.get("torch_dtype") or c.get("dtype") or "bfloat16"
    d = DTYPES.get(str(raw).replace("torch.", ""))
    if d is None:
        raise ConfigError(f"{c.where}: torch_dtype '{raw}' is not bf16, fp16 or fp32", fix="fix torch_dtype")
    return d


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
    nope = _int(c, "qk_nope_head_dim", "MLA")
    rope = _int(c, "qk_rope_head_dim", "MLA")
    g: dict[str, Any] = {"type": "mla", "head_dim": nope + rope, "head_dim_v": _int(c, "v_head_dim", "MLA"),
                         "kv_lora_rank": _int(c, "kv_lora_rank", "MLA"), "rope_dim": rope, "qk_nope_head_dim": nope}
    if c.get("index_head_dim") is not None or c.get("index_n_heads") is not None:
        g["index_head_dim"] = _int(c, "index_head_dim", "the sparse-attention indexer")
        g["index_n_heads"] = _int(c, "index_n_heads", "the sparse-attention indexer")
        if c.get("index_topk"):
            g["index_topk"] = int(c.get("index_topk"))
    return g


def _gdn_layer(c: Cfg, model_dtype: str) -> dict[str, Any]:
    """Gated DeltaNet: vLLM MambaStateShapeCalculator.gated_delta_net_state_shape (conv, recurrent)."""
    why = "the linear-attention (Gated DeltaNet) state"
    nk, nv = _int(c, "linear_num_key_heads", why), _int(c, "linear_num_value_heads", why)
    dk, dv = _int(c, "linear_key_head_dim", why), _int(c, "linear_value_head_dim", why)
    kernel = _int(c, "linear_conv_kernel_dim", why)
    conv_dim = dk * nk * 2 + dv * nv
    return {"type": "linear", "state": [
        {"name": "conv", "shape": [conv_dim, kernel - 1], "tp_dim": 0, "dtype": model_dtype},
        {"name": "recurrent", "shape": [nv, dv, dk], "tp_dim": 0, "dtype": _ssm_dtype(c, model_dtype)}]}


def _mamba2_layer(c: Cfg, model_dtype: str) -> dict[str, Any]:
    """Mamba-2: vLLM MambaStateShapeCalculator.mamba2_state_shape (conv, temporal)."""
    why = "the Mamba-2 state"
    heads, hdim = _int(c, "mamba_num_heads", why), _int(c, "mamba_head_dim", why)
    groups, state = _int(c, "n_groups", why), _int(c, "ssm_state_size", why)
    kernel = _int(c, "conv_kernel", why)
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
    hidden = _int(c, "hidden_size", "the model width")
    vocab = _int(c, "vocab_size", "the embedding size")
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


# ---- weights ------------------------------------------------------------------------------------


def _ct_weights(q: dict[str, Any]) -> dict[str, Any]:
    """compressed-tensors: the weights scheme of the first config group."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return {}
    first = next(iter(groups.values()))
    w = first.get("weights") if isinstance(first, dict) else None
    return w if isinstance(w, dict) else {}


def weights(c: Cfg, moe: bool, extra: dict[str, Any] | None = None
            ) -> tuple[str, list[str] | None, int | None, str | None]:
    """(weight dtype, groups quantized to it, int4 group size, a note) from quantization_config, or from a
    ModelOpt hf_quant_config.json beside the config (`extra`)."""
    q = c.top.get("quantization_config") or c.get("quantization_config")
    dtype = _model_dtype(c)
    if not q and extra and isinstance(extra.get("quantization"), dict):
        mq = extra["quantization"]
        q = {"quant_method": "modelopt", "quant_algo": mq.get("quant_algo"),
             "modules_to_not_convert": mq.get("exclude_modules") or []}
    if not q:
        return dtype, None, None, None
    method = str(q.get("quant_method", "")).lower()
    fmt: str | None = None
    if method in ("fp8", "fbgemm_fp8"):
        fmt = "fp8"
    elif method == "mxfp4":
        fmt = "mxfp4"
    elif method in ("awq", "gptq", "gptq_marlin", "awq_marlin", "autoround"):
        fmt = {4: "int4", 8: "int8"}.get(int(q.get("bits") or q.get("w_bit") or 4))
    elif method == "bitsandbytes":
        fmt = "int4" if q.get("load_in_4bit") else "int8"
    elif method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        fmt = "nvfp4" if "FP4" in algo else "fp8" if "FP8" in algo else None
    elif method == "compressed-tensors":
        w = _ct_weights(q)
        bits, kind = w.get("num_bits"), w.get("type")
        if bits == 8:
            fmt = "fp8" if kind == "float" else "int8"
        elif bits == 4:
            fmt = "nvfp4" if kind == "float" else "int4"
    if fmt is None:
        raise ConfigError(f"{c.where}: quantization_config.quant_method '{method}' is not one the importer maps",
                          fix="known: fp8, mxfp4, awq, gptq, bitsandbytes, modelopt, compressed-tensors")
    group_size = q.get("group_size") or q.get("q_group_size") or _ct_weights(q).get("group_size")
    skip = " ".join(str(m) for m in (q.get("modules_to_not_convert") or q.get("ignore") or []))
    groups_q = ["attention", "mlp", "experts"] if moe else ["attention", "mlp"]
    if "self_attn" in skip or "attn" in skip.split("."):
        groups_q.remove("attention")
    if moe and ("mlp.(gate" in skip.replace("\\", "") or "mlp.gate_proj" in skip):
        groups_q.remove("mlp")
    note = f"weights: quantization_config.quant_method {method} -> {fmt} for {', '.join(groups_q)}"
    return fmt, groups_q, int(group_size) if fmt == "int4" and group_size else None, note


# ModelOpt per-layer quant_algo -> the weight format vLLM 0.24.0 stores it at (quantization/modelopt.py:2464-2510,
# ModelOptMixedPrecisionConfig.get_quant_method: FP8 -> ModelOptFp8LinearMethod / Fp8MoEMethod, NVFP4 and
# W4A16_NVFP4 -> the NVFP4 linear and fused-MoE methods; a layer not in quantized_layers -> unquantized)
MIXED_ALGOS = {"FP8": "fp8", "FP8_PER_CHANNEL_PER_TOKEN": "fp8", "FP8_PB_WO": "fp8", "NVFP4": "nvfp4",
               "W4A16_NVFP4": "nvfp4"}
_LAYER_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.(.+)$")


def mixed_layers(c: Cfg, extra: dict[str, Any] | None) -> dict[str, Any] | None:
    """A ModelOpt MIXED_PRECISION checkpoint's per-layer map: config.json's quantization_config first, else
    hf_quant_config.json's (vLLM 0.24.0 reads them in that order: quantization/modelopt.py:2269-2276,
    ModelOptMixedPrecisionConfig's docstring)."""
    q = c.top.get("quantization_config") or c.get("quantization_config")
    if not q and extra and isinstance(extra.get("quantization"), dict):
        q = extra["quantization"]
    if not isinstance(q, dict) or str(q.get("quant_algo", "")).upper() != "MIXED_PRECISION":
        return None
    layers = q.get("quantized_layers")
    if not isinstance(layers, dict) or not layers:
        raise ConfigError(f"{c.where}: quantization_config.quant_algo MIXED_PRECISION without a quantized_layers map",
                          fix="give the config.json (or hf_quant_config.json) that carries the per-layer map")
    return layers


def _mixed_part(key: str, moe_at: list[bool]) -> tuple[str, int | None, str] | None:
    """(group, layer, module) of a quantized_layers key; None for modules kb does not count (MTP, vision)."""
    if key.startswith("mtp") or ".mtp." in key or "visual" in key or "vision" in key:
        return None
    if key.rsplit(".", 1)[-1] in ("lm_head", "embed_tokens"):
        return ("lm_head" if key.endswith("lm_head") else "embedding"), None, key.rsplit(".", 1)[-1]
    m = _LAYER_KEY.search(key)
    if not m:
        return "?", None, key
    i, mod = int(m.group(1)), m.group(2)
    if mod.split(".")[0] in ("self_attn", "linear_attn", "attn", "attention"):
        return "attention", i, mod.split(".", 1)[-1]
    if mod.startswith("mlp.") and i < len(moe_at) and moe_at[i]:
        rest = mod[len("mlp."):]
        if rest == "experts" or rest.startswith("experts."):
            return "experts", i, "experts"
        if rest.startswith(("shared_expert.", "shared_experts.")):
            return "experts", i, "shared." + rest.rsplit(".", 1)[-1]
        return "experts", i, rest  # the router (gate) or the shared expert's gate
    if mod.startswith("mlp."):
        return "mlp", i, mod[len("mlp."):]
    return "?", i, mod


def mixed_weights(c: Cfg, layers: dict[str, Any], kinds: list[str], params: dict[str, int]
                  ) -> tuple[str, list[str], dict[str, str], dict[str, int], str]:
    """(weight dtype, groups at it, groups at a second format, unquantized parameters of quantized groups, a note)
    of a ModelOpt MIXED_PRECISION checkpoint, from its per-layer map: a group takes the one format its layers
    declare; a layer's modules the map leaves out stay unquantized, as vLLM loads them (the router, a Gated
    DeltaNet layer's in_proj_a/in_proj_b and conv1d). A group only part of whose layers or projections the map
    names is refused rather than sized as if whole."""
    n = len(kinds)
    moe = _moe(c)
    moe_at = _moe_layers(c, n) if moe else [False] * n
    fmts: dict[str, set[str]] = {}
    mods: dict[tuple[str, int | None], set[str]] = {}
    for key, info in layers.items():
        part = _mixed_part(str(key), moe_at)
        if part is None:
            continue
        g, i, mod = part
        algo = str((info or {}).get("quant_algo", "")).upper() if isinstance(info, dict) else ""
        if g == "?" or algo not in MIXED_ALGOS:
            raise ConfigError(f"{c.where}: quantized_layers['{key}'] ({algo or 'no quant_algo'}) is not a module "
                              "or format the importer maps",
                              fix=f"known formats: {', '.join(MIXED_ALGOS)}; modules: attention, MLP, experts, "
                                  "lm_head, embed_tokens")
        fmts.setdefault(g, set()).add(MIXED_ALGOS[algo])
        mods.setdefault((g, i), set()).add(mod)
    for g, f in fmts.items():
        if len(f) > 1:
            raise ConfigError(f"{c.where}: quantized_layers stores the {g} group at {' and '.join(sorted(f))}",
                              fix="kb sizes one format per parameter group; write weight_bytes by hand")
    hidden = _int(c, "hidden_size", "the model width")
    kept: dict[str, int] = {}

    def need(g: str, i: int, have: set[str], want: tuple[str, ...]) -> None:
        if not set(want) <= have:
            raise ConfigError(f"{c.where}: quantized_layers names {g} of layer {i} only in part "
                              f"({', '.join(sorted(have)) or 'none'}; the layer has {', '.join(want)})",
                              fix="kb sizes whole groups; write weight_bytes by hand")

    if "attention" in fmts:
        for i, kind in enumerate(kinds):
            have = mods.get(("attention", i), set())
            if kind in ("full", "sliding", "chunked") and c.get("kv_lora_rank") is None:
                need("attention", i, have, ("q_proj", "k_proj", "v_proj", "o_proj"))
            elif kind == "linear" and c.get("linear_num_value_heads"):  # Gated DeltaNet
                need("attention", i, have, ("out_proj",))
                if not ({"in_proj_qkvz"} <= have or {"in_proj_qkv", "in_proj_z"} <= have):
                    need("attention", i, have, ("in_proj_qkv", "in_proj_z"))
                nv, nk = int(c.get("linear_num_value_heads")), int(c.get("linear_num_key_heads"))
                conv = int(c.get("linear_key_head_dim")) * nk * 2 + int(c.get("linear_value_head_dim")) * nv
                k = conv * int(c.get("linear_conv_kernel_dim"))  # conv1d: built without quant_config (vLLM 0.24.0
                # model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:467-472)
                if not ({"in_proj_ba"} <= have or {"in_proj_a", "in_proj_b"} <= have):
                    k += hidden * 2 * nv  # vLLM's fused in_proj_ba (qwen3_5.py packed_modules_mapping)
                kept["attention"] = kept.get("attention", 0) + k
            elif kind != "none":
                raise ConfigError(f"{c.where}: quantized_layers of a{' MLA' if c.get('kv_lora_rank') else ''} "
                                  f"{kind} layer (layer {i}) are not mapped",
                                  fix="kb maps the GQA attention and Gated DeltaNet layers of a mixed checkpoint; "
                                      "write weight_bytes by hand")
    if "experts" in fmts and moe:
        routed, _, _, shared = moe
        for i in range(n):
            if not moe_at[i]:
                continue
            have = mods.get(("experts", i), set())
            need("experts", i, have, ("experts",))
            if "gate" not in have:
                kept["experts"] = kept.get("experts", 0) + hidden * routed  # the router
            sh = {m for m in have if m.startswith("shared.")}
            if shared and sh != {"shared.gate_proj", "shared.up_proj", "shared.down_proj"}:
                if sh:
                    need("experts", i, have, ("shared.gate_proj", "shared.up_proj", "shared.down_proj"))
                kept["experts"] = kept.get("experts", 0) + 3 * hidden * shared
    if "mlp" in fmts:
        for i in range(n):
            if not moe_at[i] and params.get("mlp"):
                need("mlp", i, mods.get(("mlp", i), set()), ("gate_proj", "up_proj", "down_proj"))
    counted = {g: f.pop() for g, f in fmts.items() if params.get(g)}
    if not counted:
        raise ConfigError(f"{c.where}: quantized_layers names no module kb counts", fix="check the per-layer map")
    main = max(set(counted.values()), key=lambda f: sum(params[g] for g, x in counted.items() if x == f))
    quantized = [g for g in ("embedding", "lm_head", "attention", "mlp", "experts") if counted.get(g) == main]
    second = {g: f for g, f in counted.items() if f != main}
    kept = {g: k for g, k in kept.items() if k and g in counted}
    parts = [f"{f} for {', '.join(g for g, x in counted.items() if x == f)}"
             for f in dict.fromkeys([main, *second.values()])]
    note = ("weights: quantization_config.quant_algo MIXED_PRECISION (ModelOpt's per-layer quantized_layers) -> "
            + "; ".join(parts))
    if kept:
        note += (", less what the map leaves unquantized (" + ", ".join(f"{k:,} of {g}" for g, k in kept.items())
                 + ": the MoE router, the Gated DeltaNet in_proj_a/in_proj_b and conv1d)")
    return main, quantized, second, kept, note


# ---- the record ---------------------------------------------------------------------------------


def to_record(data: dict[str, Any], rid: str, *, where: str, name: str | None = None,
              source: dict[str, Any] | None = None, quant: dict[str, Any] | None = None) -> dict[str, Any]:
    """The data of a `model` record for the config `data` (read from `where`)."""
    c = Cfg(data, where)
    check_heads(c)
    _check_unmodelled(c)
    kinds = layer_kinds(c)
    heads = _int(c, "num_attention_heads", "the query heads")
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
    dtype = _model_dtype(c)
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
        wdtype, quantized, second, kept, wnote = mixed_weights(c, layers_q, kinds, params)
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
    if mtp:
        notes.append(f"{mtp} multi-token-prediction layer(s) in the checkpoint are not counted (vLLM loads them "
                     "only for speculative decoding)")
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
        inter = int(active) * width + shared
    else:
        inter = c.get("intermediate_size") or c.get("intermediate_size_mlp")
        blocks = c.get("block_configs")
        if not inter and isinstance(blocks, list) and hidden:
            inter = max(_ffn_width(c, i, int(hidden)) for i in range(len(blocks)))
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
