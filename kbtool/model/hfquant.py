"""A Hugging Face config's quantization -> the weights of a `model` record: `quantization_config` (FP8, MXFP4,
GPTQ/AWQ, bitsandbytes, ModelOpt, compressed-tensors) or a ModelOpt hf_quant_config.json beside it, and ModelOpt's
MIXED_PRECISION per-layer map, read as vLLM loads it (kbtool/model/hfconfig.py calls these for to_record)."""

from __future__ import annotations

import re
from typing import Any

from kbtool.model.hfcfg import Cfg, ConfigError, int_field, model_dtype


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
    dtype = model_dtype(c)
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


def mixed_weights(c: Cfg, layers: dict[str, Any], kinds: list[str], params: dict[str, int],
                  moe: tuple[int, int, int, int] | None, moe_at: list[bool]
                  ) -> tuple[str, list[str], dict[str, str], dict[str, int], str]:
    """(weight dtype, groups at it, groups at a second format, unquantized parameters of quantized groups, a note)
    of a ModelOpt MIXED_PRECISION checkpoint, from its per-layer map: a group takes the one format its layers
    declare; a layer's modules the map leaves out stay unquantized, as vLLM loads them (the router, a Gated
    DeltaNet layer's in_proj_a/in_proj_b and conv1d). A group only part of whose layers or projections the map
    names is refused rather than sized as if whole."""
    # `moe`: the config's (routed, active, intermediate, shared) experts; `moe_at`: which layers are MoE
    n = len(kinds)
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
    hidden = int_field(c, "hidden_size", "the model width")
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
