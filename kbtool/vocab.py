"""The query's variables: names, types and accepted values. Conditions may only use these."""

from __future__ import annotations

TYPE_CHECKING = False  # the query path imports this module: no typing at run time
if TYPE_CHECKING:
    from typing import Literal

    VarType = Literal["id", "enum", "int", "number", "bool", "version"]

KV_DTYPES = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "nvfp4")
# KV layouts an engine names on its own (vLLM: the 656-byte DeepSeek sparse-MLA fp8 format); conditions may
# use them, the query's --kv does not offer them
ENGINE_KV_LAYOUTS = ("fp8_ds_mla",)
DTYPES = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp32")
DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2", "fp4": "nvfp4", "nvfp4": "nvfp4", "fp32": "fp32",
    "float32": "fp32",
}
DTYPE_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "nvfp4": 0.5, "fp32": 4.0,
               "fp8": 1.0, "mxfp4": 0.53125, "int4": 0.5}
PHASES = ("prefill", "decode")
ATTENTION = ("mha", "gqa", "mqa", "mla", "sparse-mla")
ENGINES = ("none", "vllm")
LIBRARIES = ("cuda", "torch", "flashinfer", "flash-attn", "flash-attn-4", "flashmla", "vllm", "triton",
             "cudnn-frontend")

VARS: dict[str, tuple[VarType, tuple[str, ...] | None]] = {
    "gpu": ("id", None),
    "sm": ("id", None),
    "cc": ("number", None),
    "vendor": ("enum", ("nvidia", "amd")),
    "ctx": ("int", None),
    "batch": ("int", None),
    "phase": ("enum", PHASES),
    "kv_dtype": ("enum", KV_DTYPES + ENGINE_KV_LAYOUTS),
    "dtype": ("enum", DTYPES),
    "head_dim": ("int", None),
    "head_dim_v": ("int", None),
    "attention": ("enum", ATTENTION),
    # q dtype vs KV dtype: true when the KV cache is stored in another dtype than q (bf16 q + fp8 KV)
    "kv_dtype_differs": ("bool", None),
    "num_heads": ("int", None),  # query heads per GPU
    "kv_heads": ("int", None),  # KV heads per GPU
    # attention features, filled from the model record (absent from the query = unknown)
    "sliding_window": ("int", None),  # window size in tokens; 0 = no sliding window
    "sinks": ("bool", None),  # learned attention sinks (gpt-oss)
    "softcap": ("number", None),  # logit softcap value; 0 = none (Gemma-2)
    "alibi": ("bool", None),
    "sparse": ("bool", None),  # sparse attention with an indexer (DeepSeek-V3.2 DSA)
    "kv_lora_rank": ("int", None),  # MLA latent dim (512 for DeepSeek-V3)
    "qk_nope_head_dim": ("int", None),
    "qk_rope_head_dim": ("int", None),
    "v_head_dim": ("int", None),
    # the score matrix a materialising kernel (math SDPA, eager paths) allocates: batch x heads x q_len x kv_len
    # x 4 bytes, and whether it fits in the memory left after weights and KV (computed by the solver)
    "score_matrix_bytes": ("int", None),
    "memory_left_bytes": ("int", None),
    "score_matrix_fits": ("bool", None),
    # environment switches
    "trtllm_kernels": ("bool", None),  # FlashInfer's TRT-LLM kernels installed (flashinfer-cubin) or fetchable
    "block_size": ("int", None),
    # the engine's own --kv-cache-dtype spelling, where it matters (vLLM lists "fp8" and "fp8_e4m3" separately)
    "kv_cache_dtype": ("enum", ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4", "fp8_ds_mla")),
    "causal": ("bool", None),
    "engine": ("enum", ENGINES),
    **{lib: ("version", None) for lib in LIBRARIES},
}
