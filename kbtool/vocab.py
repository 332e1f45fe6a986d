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
    "float32": "fp32", "float": "fp32",  # vLLM's and SGLang's --dtype choice `float` is torch.float32
}
DTYPE_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "nvfp4": 0.5, "fp32": 4.0,
               "fp8": 1.0, "mxfp4": 0.53125, "int4": 0.5}
PHASES = ("prefill", "decode")
ATTENTION = ("mha", "gqa", "mqa", "mla", "sparse-mla")
ENGINES = ("none", "vllm", "sglang")
LIBRARIES = ("cuda", "torch", "flashinfer", "flash-attn", "flash-attn-4", "flashmla", "vllm", "triton",
             "cudnn-frontend", "sglang")
# SGLang's --kv-cache-dtype spellings (sglang/srt/arg_groups/fields/model.py:197-222 in 0.5.23; 0.5.17 adds fp4_e2m1)
SGLANG_KV_CACHE_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16",
                          "fp4_e2m1")
# Without an engine or a measurement, kernels rank by library: the attention libraries first (FlashAttention,
# FlashInfer, FlashMLA, cuDNN), then engine-internal kernels, then framework paths (Triton, PyTorch SDPA)
LIBRARY_RANK = {"flash-attn": 0, "flash-attn-4": 0, "flashinfer": 1, "flashmla": 1, "cudnn-frontend": 2, "vllm": 3,
                "triton": 4, "torch": 5}

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
    "kv_cache_dtype": ("enum", tuple(dict.fromkeys((
        "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4", "fp8_ds_mla",
        *SGLANG_KV_CACHE_DTYPES)))),
    "causal": ("bool", None),
    # SGLang's server arguments and model facts, as kbtool/solve/engines/sglang/resolve.py keeps its resolution state: a
    # backend field not given is "none", a number not given is 0 (SGLang's None)
    "attention_backend": ("id", None),  # --attention-backend
    "prefill_attention_backend": ("id", None),  # --prefill-attention-backend as given (split field)
    "decode_attention_backend": ("id", None),  # --decode-attention-backend as given (split field)
    "prefill_backend": ("id", None),  # the backend prefill runs: the split field, else --attention-backend
    "decode_backend": ("id", None),  # the backend decode runs: the split field, else --attention-backend
    "draft_attention_backend": ("id", None),  # --speculative-draft-attention-backend
    "dsa_prefill_backend": ("id", None),  # --dsa-prefill-backend (DeepSeek sparse attention)
    "dsa_decode_backend": ("id", None),  # --dsa-decode-backend
    "page_size": ("int", None),  # --page-size (tokens per KV page)
    "spec_algorithm": ("id", None),  # --speculative-algorithm, upper case (EAGLE, EAGLE3, NEXTN, ...)
    "spec_topk": ("int", None),  # --speculative-eagle-topk
    "architecture": ("id", None),  # the Hugging Face architecture class (config.json architectures[0])
    "model_type": ("id", None),  # config.json model_type
    "gpu_mem_mib": ("number", None),  # per-GPU memory as the engine reads it (nvidia-smi), MiB; 0 = unknown
    "tp": ("int", None),  # tensor-parallel size
    "attn_cp_size": ("int", None),  # attention context-parallel size
    "max_running_requests": ("int", None),
    "chunked_prefill_size": ("int", None),  # -1 disables chunked prefill
    "decode_graph_max_bs": ("int", None),  # largest decode batch captured in a CUDA graph
    "decode_graph": ("enum", ("full", "breakable", "disabled")),  # decode CUDA-graph backend
    "prefill_graph": ("enum", ("full", "breakable", "disabled")),  # prefill CUDA-graph backend
    "flashinfer_available": ("bool", None),  # FlashInfer importable where the engine runs
    "asymmetric_kv": ("bool", None),  # K and V rows differ in width (head_dim != v_head_dim)
    "dsa_sinks": ("bool", None),  # DeepSeek sparse attention with learnable sinks (config learnable_sink)
    "index_kpool": ("int", None),  # DSA pooled index keys per group (config index_kpool, default 1)
    "disable_radix_cache": ("bool", None),
    "mamba_extra_buffer": ("bool", None),  # hybrid models: the mamba radix cache keeps an extra state buffer
    "hybrid_linear": ("bool", None),  # the model mixes linear attention / Mamba layers with full attention
    "deterministic": ("bool", None),  # --enable-deterministic-inference
    # derived by the SGLang resolver from the state above (kbtool/solve/engines/sglang/resolve.py)
    "split_backends_equal": ("bool", None),  # both split fields given and equal
    "phases_same_backend": ("bool", None),  # prefill_backend == decode_backend
    "default_attention_backend": ("id", None),  # the generic default (get_default_attn_backend), for overrides
    "dsa_defaults_done": ("bool", None),  # a DSA sub-backend rule already filled both sides
    "mem_fraction_static": ("number", None),
    "mem_fraction_given": ("bool", None),
    "mem_fraction_estimate": ("number", None),  # round((gpu_mem - reserve) / gpu_mem, 3)
    "mem_fraction_static_x085": ("number", None),  # the static fraction x aiter's long-context factor
    "decode_graph_max_bs_given": ("bool", None),
    "decode_graph_max_bs_over_running": ("bool", None),  # the decode graph batch exceeds --max-running-requests
    "engine": ("enum", ENGINES),
    **{lib: ("version", None) for lib in LIBRARIES},
}
