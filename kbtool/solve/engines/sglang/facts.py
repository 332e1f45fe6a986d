"""The model and platform facts SGLang's argument resolution reads, as kb condition variables.

From a config.json dict (`model_facts`), a kb model record or its image view (`model_facts_from_record`), and an
accelerator (`platform_facts`). What SGLang derives in sglang/srt/configs/model_config.py (0.5.23): MLA is the
attention of the DeepSeek family and the other MLA architectures (:1360-1512, read here as "the config has a
kv_lora_rank"); DeepSeek sparse attention is a DeepSeek-family architecture with `index_topk` (:191-212, the
architecture list is a condition of the records); attention sinks are gpt-oss and the other SWA-sink
architectures or `learnable_sink` (:1273-1289); K/V widths differ when head_dim != v_head_dim (:1263).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# sglang/srt/configs/model_config.py:88-96 (0.5.23) SWA_SINK_ARCHS
SWA_SINK_ARCHS = frozenset({"GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM",
                            "IQuestQ1ForCausalLM", "IQuestQ1MTP"})
HYBRID_LINEAR_TYPES = frozenset({"qwen3_next", "nemotron_h", "falcon_h1", "granitemoehybrid", "lfm2", "kimi_linear",
                                 "qwen3_5", "qwen3_5_moe", "jamba", "bailing_moe_v2_5"})
DEFAULT_CONTEXT = 2048


def model_facts(config: dict[str, Any]) -> dict[str, Any]:
    """The facts of a Hugging Face config.json dict (text config of a multimodal one)."""
    archs = config.get("architectures") or [None]
    sub = config.get("text_config")
    text: dict[str, Any] = sub if isinstance(sub, dict) else config
    arch = archs[0]
    mla = text.get("kv_lora_rank") is not None
    sparse = text.get("index_topk") is not None
    heads = text.get("num_attention_heads") or 0
    kv = text.get("num_key_value_heads") or heads
    head_dim = text.get("head_dim") or (text.get("hidden_size", 0) // heads if heads else 0)
    v_head = text.get("v_head_dim") if not mla else None
    ctx = text.get("max_position_embeddings") or config.get("max_position_embeddings") or DEFAULT_CONTEXT
    return {
        "architecture": arch, "model_type": text.get("model_type") or config.get("model_type"),
        "attention": ("sparse-mla" if sparse else "mla") if mla else ("mha" if kv == heads else "gqa"),
        "sparse": sparse and mla, "sinks": arch in SWA_SINK_ARCHS or bool(text.get("learnable_sink")),
        "dsa_sinks": bool(text.get("learnable_sink")), "asymmetric_kv": bool(v_head and v_head != head_dim),
        "index_kpool": int(text.get("index_kpool") or 1), "_kv_heads_total": 1 if mla else int(kv or 1),
        "_mla_kv_heads": int(kv or 1), "ctx": int(ctx),
        "hybrid_linear": (text.get("model_type") in HYBRID_LINEAR_TYPES),
        # a sliding-window pattern (what model-specific checks read: sliding_window_pattern / layer_types)
        "sliding_window": int(text.get("sliding_window") or 0) if (
            text.get("sliding_window_pattern") or "sliding_attention" in (text.get("layer_types") or [])) else 0,
    }


def model_facts_from_record(model: Any) -> dict[str, Any]:
    """The facts of a kb model record (kbtool/model/model_card.py) or its image view (ModelV)."""
    layers = list(model.layers)
    mla = next((g for g in layers if g.type == "mla"), None)
    full = next((g for g in layers if g.type in ("full", "sliding", "chunked")), None)
    sparse = any(getattr(g, "index_head_dim", None) for g in layers)
    sinks = any(getattr(g, "sinks", False) for g in layers)
    arch = getattr(model, "architecture", None)
    kv = (full.kv_heads if full is not None else None) or 1
    asym = bool(full is not None and full.head_dim_v and full.head_dim_v != full.head_dim)
    attention = ("sparse-mla" if sparse else "mla") if mla is not None else \
        ("mha" if kv == getattr(model, "num_heads", None) else "gqa")
    return {
        "architecture": arch, "model_type": None, "attention": attention, "sparse": sparse and mla is not None,
        "sinks": sinks, "dsa_sinks": sparse and sinks, "asymmetric_kv": asym, "index_kpool": 1,
        "_kv_heads_total": kv if mla is None else 1, "_mla_kv_heads": getattr(model, "num_heads", None) or kv,
        "ctx": getattr(model, "max_context", None) or DEFAULT_CONTEXT,
        "hybrid_linear": any(g.type == "linear" for g in layers),
        "sliding_window": max((g.window or 0 for g in layers if g.type == "sliding"), default=0),
    }


def platform_facts(acc: Any, cc: float | None = None, cuda: str | None = None) -> dict[str, Any]:
    """The platform facts of an accelerator view (kbtool/solve/image.py AcceleratorV: vendor, architecture,
    capacity), with its compute capability (`cc`, from the architecture record) and the CUDA release."""
    vendor = getattr(acc, "vendor", "nvidia")
    cap = getattr(acc, "capacity_bytes", None)
    capacity = cap() if callable(cap) else cap
    return {"vendor": vendor, "cc": float(cc) if cc is not None else 0.0, "cuda": cuda if vendor == "nvidia" else None,
            "gpu_mem_mib": (capacity or 0) / 2**20, "flashinfer_available": vendor == "nvidia"}
