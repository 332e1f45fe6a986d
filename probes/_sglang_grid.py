"""Run under the interpreter that has SGLang installed (no GPU, no kbtool): SGLang's own server-argument
resolution (`ServerArgs(...).resolve_once()`, the hooks under sglang/srt/arg_groups/) over a grid of platform x
model family x KV dtype x page size x attention-backend flags, written as one JSON document (gzip'd when the name
ends in .gz). Each point records the resolved prefill and decode attention backends, page size, KV dtype and the
other settings resolution forces (with the hook that declared each), or SGLang's exception type and message.

Usage: python _sglang_grid.py OUT.json[.gz] [--quick] [--platform sm90,...] [--jobs N]

Each platform runs in its own worker process (the script re-runs itself with --worker), so the lru_cache'd device
probes and the platform singleton start clean. What a worker does before resolving, undone by nothing (it exits):
- imports SGLang as the machine is (no GPU), imports every sglang.srt.arg_groups module, and resolves every point of
  the grid once (the warm-up pass, results kept only for override_only_diffs) so that what resolution imports
  lazily is imported in the no-GPU state: with torch.cuda patched, import-time `if _is_cuda: from sgl_kernel import`
  (layers/layernorm.py, reached from the expert-pack hook) would need sglang-kernel, which resolution never calls;
- then sets the device facts in four places that the resolution reads:
  * `sglang.srt.runtime_context.override_platform(**facts)` (is_cuda, is_hip, is_sm90, is_sm100, is_sm100_or_sm110,
    is_sm110, is_sm120, is_blackwell, is_hopper_with_cuda_12_3, has_flashinfer, device_sm, device_capability, ...);
  * the probe functions of sglang.srt.utils.common that hooks call directly instead of through the context
    (`is_sm100_supported()` in deepseek_v4_hook/moe_hook, `is_hip()` in model_config, `is_mps()` in the default
    backend choice, `is_flashinfer_available()`, `get_device_memory_capacity()` in memory_hook and kv_shard_hook,
    `get_nvidia_driver_version()` in the gpt-oss override, ...): replaced by constants in every sglang module that
    bound them (`from ... import is_hip`), found by identity;
  * torch.cuda: is_available, device_count, get_device_capability (read directly by the DSA and linear-attention
    checks), get_device_name, get_device_properties (total_memory, multi_processor_count, gcnArchName),
    mem_get_info, is_initialized, current_device; torch.version.hip (HIP rows) and torch.version.cuda (kept as the
    installed torch has it, 13.0 for both releases' PyPI torch; None on HIP rows);
  * `sglang.srt.platforms.current_platform` set to SGLang's CudaSRTPlatform or RocmSRTPlatform.
- Not reproduced: module-level constants computed at import (`_is_hip = is_hip()` in ~230 modules, mostly model
  and kernel code that resolution does not run) keep their no-GPU values; anything checked later, when the model
  runner builds the attention backend or the KV pool, is not part of this grid. HIP rows (MI300X) are weaker:
  aiter and the ROCm triton are not installed, so checks that probe them (DSA's preshuffle paged-MQA) answer False.
- os.environ is restored after every point (hooks set SGLANG_* variables through `envs.X.set`).
- Models are written as config.json folders into a temp dir (HF_HUB_OFFLINE=1); no weights, no tokenizer
  (--skip-tokenizer-init). Arguments go through SGLang's own argparse parser (ServerArgs.add_cli_args), so
  argparse choices are checked as `sglang serve` checks them; an argparse refusal is recorded as SystemExit with
  argparse's message.

Environment (what importing ServerArgs and resolving needs; nothing else of sglang's requirements): sglang
--no-deps, torch 2.13.0 (the CPU wheel; torch.version.cuda is then None and CUDA rows set CUDA_VERSION), triton and
torchvision --no-deps (imported by sglang.srt.utils.common and sglang.srt.configs; the PyPI torchvision's compiled
ops need a CUDA torch, so the worker declares the two op schemas its import registers: _torchvision_without_ops),
the pinned transformers, compressed-tensors, apache-tvm-ffi, sentencepiece, numpy, msgspec, psutil, requests,
pydantic, packaging, orjson, pybase64, pillow, starlette, pyzmq, IPython, aiohttp, dill, gguf (+ openai,
partial_json_parser, xgrammar, einops for 0.5.17): tests/data/sglang/<release>/pip-freeze.txt. No GPU,
flashinfer, sgl-kernel or network needed. probes/sglang_resolve.py runs this script once per platform.

Output: {"sglang", "torch", "platforms": {name: {kind, capability, name, memory_mib, sms, weaker, facts, seconds,
override_only_diffs}}, "models": the config.json of each family, "grid", "always_filled" (fields every successful
resolution fills in, left out of each outcome's "changed"), "failures" (workers that died), "columns", "argvs" (the
flags of each point after the fixed ones), "outcomes" (distinct results), "rows": [platform, model, tag, argv index,
outcome index]}. An outcome is {"prefill", "decode", the KEY_FIELDS, the CUDA-graph settings, "changed" (fields that
resolution moved away from the parsed input), "by" (field -> the hook that declared it last)} or {"error" (exception
type), "message", "where" (innermost sglang frame, file:line:function)}. override_only_diffs counts the points whose
backends, page size, KV dtype or error differ between the warm-up pass (override_platform alone, as SGLang's own unit
tests set the platform; "none" where the release has no override_platform) and the recorded pass.

Release differences (the script adapts by feature, not by version number):
- 0.5.23: ServerArgs is a msgspec Struct; construction does not resolve, `resolve_once()` runs
  sglang/srt/arg_groups/pipeline.py; results come from `resolved_dict()` (fields plus the declaration stash) and the
  parsed input from `_raw_input`; the platform facts have one seam, runtime_context.override_platform, but DSA
  (overrides.py `_dsa_kv_cache_dtype_default` / `_dsa_split_backend_resolution`, model_hook.py) and the
  linear-attention checks (attention_hook.py `handle_linear_attn_backend`) call torch.cuda.get_device_capability()
  and memory_hook.py calls get_device_memory_capacity(): without the extra patches every DSA point fails with
  "Found no NVIDIA driver" and mem_fraction_static falls back to 0.95 with chunked prefill 4096. The choice lists
  are in arg_groups/choices.py. `--cuda-graph-max-bs` is gone (use --cuda-graph-max-bs-decode).
- 0.5.17: ServerArgs is a dataclass whose `__post_init__` (server_args.py:3435) resolves, so resolution runs inside
  `ServerArgs.from_cli_args`; the fields hold the resolved values afterwards (the declaration stash is materialized
  at the end), the parsed input is the argparse Namespace, and "by" names only the steps that went through the stash
  (run_post_process_pass, model overrides), not the handlers that assign fields directly. There is no
  runtime_context.override_platform: the hooks call the utils.common probes (is_sm100_supported(),
  is_hopper_with_cuda_12_3(), is_flashinfer_available(), ...) directly, so the rebound probes are the platform and
  the warm-up pass runs with the machine's own (no-GPU) answers. The choice lists are in server_args.py. Its
  gpu_mem-is-None fallback is mem_fraction_static 0.88. Importing it also needs openai, partial_json_parser,
  xgrammar and einops (0.5.23 imports those lazily).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

# name -> (kind, capability, device name, memory MiB, SMs/CUs, gcnArchName)
PLATFORMS = {
    "sm80": ("cuda", (8, 0), "NVIDIA A100-SXM4-80GB", 81920, 108, ""),
    "sm89": ("cuda", (8, 9), "NVIDIA L40S", 46068, 142, ""),
    "sm90": ("cuda", (9, 0), "NVIDIA H100 80GB HBM3", 81559, 132, ""),
    "sm100": ("cuda", (10, 0), "NVIDIA B200", 183359, 148, ""),
    "sm120": ("cuda", (12, 0), "NVIDIA GeForce RTX 5090", 32607, 170, ""),
    "mi300x": ("hip", (9, 4), "AMD Instinct MI300X", 196592, 304, "gfx942:sramecc+:xnack-"),
}
CUDA_VERSION = "12.9"  # torch.version.cuda where the installed torch is not a CUDA build (the probes want >= 12.8)
HIP_VERSION = "6.4.43482"

_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "head_dim": 128,
    "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "torch_dtype": "bfloat16", "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 128000,
    "eos_token_id": 128001,
}
_DSV3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_attention_heads": 128,
    "num_key_value_heads": 128, "num_hidden_layers": 61, "first_k_dense_replace": 3, "n_routed_experts": 256,
    "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5,
    "norm_topk_prob": True, "scoring_func": "sigmoid", "topk_method": "noaux_tc", "kv_lora_rank": 512,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 129280, "max_position_embeddings": 163840, "rms_norm_eps": 1e-6, "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
    "torch_dtype": "bfloat16", "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 0,
    "eos_token_id": 1, "num_nextn_predict_layers": 1,
}
# Model families (the checkpoints are bf16: the real DeepSeek/gpt-oss quantization configs are left out, they only
# move MoE-runner and dtype choices).
MODELS = {
    "dense": dict(_LLAMA),  # Llama-3.1-8B: GQA 32/8, head_dim 128
    "hd256": {  # Gemma-7B: head_dim 256, MHA 16/16, no sliding window
        "architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_size": 3072,
        "intermediate_size": 24576, "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 28,
        "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "torch_dtype": "bfloat16", "hidden_act": "gelu",
        "hidden_activation": "gelu_pytorch_tanh",
        "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
    },
    "mla": dict(_DSV3),  # DeepSeek-V3
    "dsa": {**_DSV3, "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
            "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64},  # DeepSeek-V3.2-Exp
    "sinks": {  # gpt-oss-20b: attention sinks, alternating sliding window 128, head_dim 64
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
        "intermediate_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
        "num_hidden_layers": 24, "num_local_experts": 32, "num_experts_per_tok": 4, "experts_per_token": 4,
        "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 12,
        "vocab_size": 201088, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 150000,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "truncate": False, "original_max_position_embeddings": 4096},
        "attention_bias": True, "swiglu_limit": 7.0, "torch_dtype": "bfloat16", "hidden_act": "silu",
        "tie_word_embeddings": False, "eos_token_id": 200002, "pad_token_id": 199999,
    },
    "swa": {  # Gemma-3-27B text: sliding window 1024 on 5 of 6 layers, head_dim 128
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 5376,
        "intermediate_size": 21504, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
        "num_hidden_layers": 62, "sliding_window": 1024, "sliding_window_pattern": 6,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10 + ["sliding_attention"] * 2,
        "query_pre_attn_scalar": 168, "vocab_size": 262208, "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "torch_dtype": "bfloat16",
        "hidden_activation": "gelu_pytorch_tanh", "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
    },
    "linear": {  # Qwen3-Next-80B-A3B: gated DeltaNet on 3 of 4 layers, gated attention head_dim 256
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
        "intermediate_size": 5120, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "num_hidden_layers": 48,
        "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
        "num_experts": 512, "num_experts_per_tok": 10, "norm_topk_prob": True, "decoder_sparse_step": 1,
        "mlp_only_layers": [], "partial_rotary_factor": 0.25, "vocab_size": 151936,
        "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "rope_theta": 10000000, "torch_dtype": "bfloat16",
        "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 151643, "eos_token_id": 151645,
    },
    "mamba": {  # Nemotron-H-8B: Mamba2 + attention hybrid
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 4096,
        "intermediate_size": 21504, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "num_hidden_layers": 52,
        "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
        "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
        "expand": 2, "chunk_size": 128, "mamba_hidden_act": "silu", "mlp_hidden_act": "relu2",
        "vocab_size": 131072, "max_position_embeddings": 8192, "layer_norm_epsilon": 1e-5,
        "torch_dtype": "bfloat16", "tie_word_embeddings": False, "use_mamba_kernels": True,
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    },
}
KV_DTYPES = ["auto", "fp8_e4m3", "fp8_e5m2", "bf16", "mxfp8", "nvfp4"]  # crossed with page sizes, no flags
PAGES = [None, 1, 16, 64, 128]
KV_FLAG_DTYPES = ["auto", "fp8_e4m3", "fp8_e5m2", "nvfp4"]  # crossed with the main backend flags (page size default)
FLAG_PAGE = 64  # and each main backend flag once with this page size (kv auto)
FLAG_PAGES_MORE = [1, 128]  # and with these (kv auto): backends that force a page size, or refuse one
SPLIT_KV = ["fp8_e4m3", "nvfp4"]  # the split pairs once more with these KV dtypes
DSA_KV = ["auto", "fp8_e4m3"]  # each --dsa-prefill-backend / --dsa-decode-backend choice on the DSA model
# Backends of other platforms, deprecated aliases and model-specific ones: tried once per model (kv auto).
EXTRA_BACKENDS = ["nsa", "compressed", "tokenspeed_mla", "llada2_cfg_flashinfer", "minicpm_flashattn",
                  "minicpm_flashinfer", "wave", "intel_amx", "ascend", "intel_xpu"]
SPLIT_MODELS = ["dense", "mla", "dsa", "sinks"]
ONE_SIDE_MODELS = ["dense", "mla", "dsa"]
SPEC_BACKENDS = [None, "fa3", "flashinfer", "triton", "trtllm_mha", "trtllm_mla", "flashmla", "flex_attention", "fa4"]
SPLIT_PAIRS = [  # (prefill, decode) for the split flags
    ("fa3", "flashinfer"), ("flashinfer", "fa3"), ("fa3", "trtllm_mha"), ("fa4", "trtllm_mha"),
    ("triton", "trtllm_mha"), ("trtllm_mha", "triton"), ("flashinfer", "trtllm_mha"), ("fa4", "fa4"),
    ("fa3", "flashmla"), ("fa3", "trtllm_mla"), ("flashinfer", "trtllm_mla"), ("fa3", "cutedsl_mla"),
    ("trtllm_mla", "cutedsl_mla"), ("flashinfer", "flashmla"), ("triton", "flashinfer"), ("aiter", "triton"),
]
KEY_FIELDS = [
    "attention_backend", "prefill_attention_backend", "decode_attention_backend", "page_size", "kv_cache_dtype",
    "chunked_prefill_size", "mem_fraction_static", "max_running_requests", "max_prefill_tokens",
    "disable_radix_cache", "disable_overlap_schedule", "disable_hybrid_swa_memory", "dsa_prefill_backend",
    "dsa_decode_backend", "speculative_draft_attention_backend", "speculative_eagle_topk",
    "speculative_num_steps", "speculative_num_draft_tokens", "linear_attn_backend",
    "linear_attn_decode_backend", "linear_attn_prefill_backend", "mamba_backend", "mamba_ssm_dtype",
    "mamba_radix_cache_strategy", "moe_runner_backend", "dtype", "disable_cuda_graph", "cuda_graph_max_bs",
    "enable_dp_lm_head", "swa_full_tokens_ratio",
]
# Fields whose resolution only fills in bookkeeping; never reported as "changed".
NOISE = {
    "random_seed", "tokenizer_path", "served_model_name", "device", "mm_process_config", "model_path",
    "_radix_eviction_policy_explicitly_set", "cuda_graph_config", "enable_dp_attention", "port", "nccl_port",
    "dist_init_addr", "host", "log_level",
}


# --------------------------------------------------------------------------------------------------------------
# Worker: one platform
# --------------------------------------------------------------------------------------------------------------


def _facts(kind: str, cap: tuple[int, int]) -> dict:
    cuda = kind == "cuda"
    major = cap[0]
    return {
        "is_cuda": cuda, "is_hip": not cuda, "is_npu": False, "is_xpu": False, "is_musa": False, "is_mps": False,
        "is_sm90": cuda and major == 9, "is_sm100": cuda and major == 10,
        "is_sm100_or_sm110": cuda and major in (10, 11), "is_sm110": cuda and major == 11,
        "is_sm120": cuda and major == 12, "is_blackwell": cuda and major in (10, 11, 12),
        "is_hopper_with_cuda_12_3": cuda and major == 9, "has_amx": False, "has_flashinfer": cuda,
        "device_sm": major * 10 + cap[1], "device_capability": cap,
    }


# What every SGLang worker runs under, on top of the caller's environment: this grid's workers and
# probes/_sglang_pool.py's (its launch lines are resolved as the grid's points are; before issue 46 it lacked the
# last two). Offline, no CUDA device, no request logging, no tokenizer threads.
WORKER_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "",
              "SGLANG_DISABLE_REQUEST_LOGGING": "1", "TOKENIZERS_PARALLELISM": "false"}


def worker_env() -> dict[str, str]:
    return dict(os.environ, **WORKER_ENV)


def cache_struct_fields(structs=None) -> bool:
    """msgspec.structs.fields(cls) evaluates the type annotations of every field of `cls` at each call; SGLang's
    resolution calls it for ServerArgs and its sub-records at every step (arg_groups/arg_utils.py record_fields,
    server_args.py resolved_dict): about 9,000 calls and 39% of a resolve worker's time (0.5.22 on sm90, cProfile).
    A Struct class's fields are fixed once the class exists, so each class's answer is kept and handed out again:
    the same tuple SGLang would build. Instances and generic aliases go to msgspec as before. False where there is
    no msgspec (0.5.17's ServerArgs is a dataclass)."""
    if structs is None:
        try:
            import msgspec.structs as structs
        except ImportError:
            return False
    real = structs.fields
    if getattr(real, "kb_cached", False):
        return True
    meta = structs.StructMeta
    kept: dict = {}

    def fields(type_or_instance):
        if isinstance(type_or_instance, meta):
            got = kept.get(type_or_instance)
            if got is None:
                got = kept[type_or_instance] = real(type_or_instance)
            return got
        return real(type_or_instance)

    fields.kb_cached = True  # type: ignore[attr-defined]
    structs.fields = fields
    return True


class FailedImports:
    """Within one phase of a worker, importing a module whose import raised before raises that exception again
    without running the module (nor what it imports) again. Python keeps no record of a failed import, so the
    resolution's lazy `import` of a module that cannot load on a CPU (a kernel package, a ROCm backend) ran that
    module's imports again at every grid point; the platform does not change within a phase, so neither does the
    outcome. `clear()` between phases: the warm-up runs with the machine's own (no-GPU) platform, the recorded pass
    with the patched one, where an import can fail differently. A module not found is not remembered (looking it up
    is cheap). The same as probes/_vllm_grid.py remember_failed_imports, which did it for vLLM's grid (issue 46)."""

    def __init__(self) -> None:
        import importlib._bootstrap as bootstrap

        self.failed: dict[str, BaseException] = {}
        self.hits = 0
        real = bootstrap._find_and_load  # what `import` statements and importlib.import_module call

        def find_and_load(name, import_):
            if name in self.failed and name not in sys.modules:
                self.hits += 1
                raise self.failed[name].with_traceback(None)
            try:
                return real(name, import_)
            except ModuleNotFoundError:
                raise
            except Exception as exc:  # the module ran and raised: what is costly to run again
                self.failed[name] = exc
                raise

        bootstrap._find_and_load = find_and_load
        self._restore = lambda: setattr(bootstrap, "_find_and_load", real)

    def clear(self) -> None:
        self.failed.clear()

    def close(self) -> None:
        """Python's own import again (a worker exits instead; tests call this)."""
        self._restore()


def _patch_platform(name: str) -> dict:
    """Make every reader the resolution uses agree on platform `name` (see the module docstring)."""
    import types

    import torch

    kind, cap, dev_name, mem_mib, sms, gcn = PLATFORMS[name]
    facts = _facts(kind, cap)
    props = types.SimpleNamespace(name=dev_name, total_memory=mem_mib * 2**20, multi_processor_count=sms,
                                  major=cap[0], minor=cap[1], gcnArchName=gcn, warp_size=64 if gcn else 32,
                                  L2_cache_size=50 * 2**20, uuid="grid")
    tc = torch.cuda
    tc.is_available = lambda: True
    tc.device_count = lambda: 1
    tc.is_initialized = lambda: True
    tc.current_device = lambda: 0
    tc.get_device_capability = lambda device=None: cap
    tc.get_device_name = lambda device=None: dev_name
    tc.get_device_properties = lambda device=None: props
    tc.mem_get_info = lambda device=None: (props.total_memory - 2**30, props.total_memory)
    cuda_version = torch.version.cuda or CUDA_VERSION  # the PyPI torch of 0.5.17 and 0.5.23 is a CUDA 13.0 build
    torch.version.cuda = cuda_version if kind == "cuda" else None
    torch.version.hip = HIP_VERSION if kind == "hip" else None

    import sglang.srt.utils.common as common

    const = {
        "is_cuda": facts["is_cuda"], "is_hip": facts["is_hip"], "is_cuda_alike": True, "is_npu": False,
        "is_xpu": False, "is_musa": False, "is_mps": False, "is_hpu": False, "is_cpu": False, "is_sail": False,
        "is_sm90_supported": facts["is_sm90"], "is_sm100_supported": facts["is_sm100"],
        "is_sm100_or_sm110_supported": facts["is_sm100_or_sm110"], "is_sm110_supported": facts["is_sm110"],
        "is_sm120_supported": facts["is_sm120"], "is_blackwell_supported": facts["is_blackwell"],
        "is_blackwell": facts["is_blackwell"], "is_hopper_with_cuda_12_3": facts["is_hopper_with_cuda_12_3"],
        "is_ampere_with_cuda_12_3": kind == "cuda" and cap[0] == 8,
        "is_sm80_supported": kind == "cuda" and cap[0] == 8, "is_sm120": kind == "cuda" and cap == (12, 0),
        "is_sm121": kind == "cuda" and cap == (12, 1), "is_flashinfer_available": facts["has_flashinfer"],
        "cpu_has_amx_support": False, "get_device_sm": facts["device_sm"], "get_device_capability": cap,
        "get_device_memory_capacity": float(mem_mib), "get_nvgpu_memory_capacity": float(mem_mib),
        "get_amdgpu_memory_capacity": float(mem_mib), "get_device_name": dev_name,
        "get_device_core_count": sms, "is_gfx95_supported": False, "is_gfx942_supported": kind == "hip",
        "get_nvidia_driver_version": (580, 95, 5) if kind == "cuda" else (0,),
        "get_nvidia_driver_version_str": "580.95.05" if kind == "cuda" else None,
        "is_mnnvl_fabric_device": False,
    }
    originals = {id(getattr(common, n)): n for n in const if hasattr(common, n)}
    for fn in vars(common).values():  # the rest of the cached probes answer afresh from the patched torch
        if callable(getattr(fn, "cache_clear", None)):
            fn.cache_clear()

    def constant(value):
        def probe(*args, **kwargs):
            return value

        probe.cache_clear = lambda: None  # type: ignore[attr-defined]
        return probe

    replaced = {n: constant(v) for n, v in const.items()}
    rebound = 0
    for mod_name, mod in list(sys.modules.items()):
        if not mod_name.startswith("sglang") or mod is None:
            continue
        namespace = getattr(mod, "__dict__", {})
        for attr, value in list(namespace.items()):
            n = originals.get(id(value))
            if n is not None:
                namespace[attr] = replaced[n]
                rebound += 1

    # The platform plugin object (device_name, is_out_of_tree, speculative support).
    import sglang.srt.platforms as platforms

    try:
        if kind == "cuda":
            from sglang.srt.platforms.cuda import CudaSRTPlatform as Plat
        else:
            from sglang.srt.platforms.rocm import RocmSRTPlatform as Plat
        old = getattr(platforms, "_current_platform", None)
        new = Plat()
        platforms._current_platform = new
        for mod_name, mod in list(sys.modules.items()):
            if mod_name.startswith("sglang") and mod is not None and old is not None \
                    and getattr(mod, "current_platform", None) is old:
                mod.current_platform = new
    except ImportError:
        pass  # releases before the platform plugins

    override = None
    try:
        from sglang.srt.runtime_context import _PLATFORM_PROBES, _PLATFORM_VALUES, override_platform

        known = set(_PLATFORM_PROBES) | set(_PLATFORM_VALUES)
        override = override_platform(**{k: v for k, v in facts.items() if k in known})
        override.install()
    except ImportError:
        pass  # releases before runtime_context.override_platform: the rebound probes are all there is
    return {"facts": facts, "rebound": rebound, "override_platform": override is not None,
            "torch_version_cuda": torch.version.cuda, "torch_version_hip": torch.version.hip}


def _write_models(root: Path) -> dict[str, str]:
    paths = {}
    for name, cfg in MODELS.items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(cfg))
        (folder / "generation_config.json").write_text(json.dumps({"bos_token_id": cfg.get("bos_token_id"),
                                                                   "eos_token_id": cfg.get("eos_token_id")}))
        paths[name] = str(folder)
    return paths


def _dsa_choices(parser) -> list[str]:
    """The --dsa-prefill-backend choices as SGLang's own parser has them (0.5.17: server_args.DSA_CHOICES)."""
    for action in parser._actions:
        if "--dsa-prefill-backend" in action.option_strings:
            return list(action.choices or [])
    return []


def _points(platform: str, quick: bool, dsa: list[str] | None = None) -> list[tuple[str, str, tuple]]:
    """(model, tag, argv tail) for one platform. Tags: base (kv x page, no flags), flag (backend x kv x page),
    split (prefill/decode pairs, also with SPLIT_KV), one (only one side set), spec (speculative decoding),
    dsa (the DSA model's sub-backend flags)."""
    try:
        from sglang.srt.arg_groups.choices import ATTENTION_BACKEND_CHOICES as choices
    except ImportError:  # 0.5.17: the choice lists live in server_args
        from sglang.srt.server_args import ATTENTION_BACKEND_CHOICES as choices

    out: list[tuple[str, str, tuple]] = []
    models, kvs, pages, fkv = list(MODELS), KV_DTYPES, PAGES, KV_FLAG_DTYPES
    extra = [b for b in EXTRA_BACKENDS if b in choices]
    main = [b for b in choices if b not in extra]
    if quick:
        models, kvs, pages, fkv = ["dense", "mla", "dsa"], ["auto", "fp8_e5m2"], [None, 64], ["auto"]
        main, extra = [b for b in ("fa3", "flashinfer", "trtllm_mha", "flashmla", "trtllm_mla") if b in choices], []
    for m in models:
        for kv in kvs:
            for p in pages:
                out.append((m, "base", ("--kv-cache-dtype", kv, *_page(p))))
        for b in main:
            for kv in fkv:
                out.append((m, "flag", ("--attention-backend", b, "--kv-cache-dtype", kv)))
            if not quick:
                for page in (FLAG_PAGE, *FLAG_PAGES_MORE):
                    out.append((m, "flag", ("--attention-backend", b, "--page-size", str(page))))
        for b in extra:
            out.append((m, "flag", ("--attention-backend", b)))
        if quick:
            continue
        if m in SPLIT_MODELS:
            for pre, dec in SPLIT_PAIRS:
                if pre in choices and dec in choices:
                    out.append((m, "split", ("--prefill-attention-backend", pre, "--decode-attention-backend", dec)))
                    for kv in SPLIT_KV:
                        out.append((m, "split", ("--prefill-attention-backend", pre, "--decode-attention-backend",
                                                 dec, "--kv-cache-dtype", kv)))
        if m == "dsa":
            for b in dsa or []:
                for side in ("--dsa-prefill-backend", "--dsa-decode-backend"):
                    for kv in DSA_KV:
                        out.append((m, "dsa", (side, b, "--kv-cache-dtype", kv)))
        if m in ONE_SIDE_MODELS:
            for b in main + extra:
                out.append((m, "one", ("--prefill-attention-backend", b)))
                out.append((m, "one", ("--decode-attention-backend", b)))
        algo = "NEXTN" if m in ("mla", "dsa") else "EAGLE"
        for topk, steps, draft in ((1, 3, 4), (4, 3, 8)):
            spec = ("--speculative-algorithm", algo, "--speculative-eagle-topk", str(topk),
                    "--speculative-num-steps", str(steps), "--speculative-num-draft-tokens", str(draft))
            for b in SPEC_BACKENDS:
                if b is None or b in choices:
                    out.append((m, "spec", spec if b is None else (*spec, "--attention-backend", b)))
    return out


def _page(p: int | None) -> tuple:
    return () if p is None else ("--page-size", str(p))


def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return str(v)


def _plain(v):
    """Dataclass values (0.5.17's CudaGraphConfig) as dicts, like 0.5.23's resolved_dict gives them."""
    import dataclasses

    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    return v


def _graph(d: dict) -> dict:
    """The CUDA-graph settings: 0.5.23's cuda_graph_config (decode/prefill phases), older flat fields."""
    cg = d.get("cuda_graph_config")
    if isinstance(cg, dict):
        dec, pre = cg.get("decode") or {}, cg.get("prefill") or {}
        return {"decode_graph": dec.get("backend"), "decode_graph_max_bs": dec.get("max_bs"),
                "prefill_graph": pre.get("backend"), "prefill_graph_max_bs": pre.get("max_bs")}
    out = {}
    for k in ("disable_cuda_graph", "cuda_graph_max_bs", "enable_piecewise_cuda_graph",
              "piecewise_cuda_graph_max_tokens",
              "disable_piecewise_cuda_graph"):
        if k in d:
            out[k] = d[k]
    return out


def _where(exc: BaseException) -> str | None:
    """The innermost sglang frame of the traceback (file relative to the package, function, line)."""
    best = None
    for fr in traceback.extract_tb(exc.__traceback__):
        f = fr.filename.replace("\\", "/")
        if "/sglang/" in f:
            best = f"{f.split('/sglang/', 1)[1]}:{fr.lineno}:{fr.name}"
    return best


def _sources(sa) -> dict[str, str]:
    """Field -> the last resolution step that declared it (0.5.23's `_resolved_overrides` stash)."""
    out: dict[str, str] = {}
    for item in getattr(sa, "_resolved_overrides", None) or []:
        try:
            source, fields = item
        except (TypeError, ValueError):
            continue
        for k in fields:
            out[k] = str(source)
    return out


class Resolver:
    def __init__(self):
        import argparse

        from sglang.srt import server_args as sa_mod

        self.sa_mod = sa_mod
        self.parser = argparse.ArgumentParser(prog="sglang serve", exit_on_error=True)
        sa_mod.ServerArgs.add_cli_args(self.parser)
        self.defaults = None

    def __call__(self, argv: list[str]) -> dict:
        env = dict(os.environ)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                raw = self.parser.parse_args(argv)
            raw._radix_eviction_policy_explicitly_set = False
            sa = self.sa_mod.ServerArgs.from_cli_args(raw)  # 0.5.17: __post_init__ resolves here
            resolve = getattr(sa, "resolve_once", None)
            if resolve is not None:  # 0.5.23: construction leaves the record unresolved
                resolve()
            if hasattr(sa, "resolved_dict"):
                d = sa.resolved_dict()
            else:  # 0.5.17: a dataclass whose fields hold the resolved values once __post_init__ returns
                import dataclasses

                d = {f.name: _plain(getattr(sa, f.name)) for f in dataclasses.fields(sa)}
            raw_in = getattr(sa, "_raw_input", None) or {k: getattr(raw, k) for k in vars(raw)}
            return {"ok": True, "resolved": d, "raw": raw_in, "sources": _sources(sa)}
        except SystemExit:
            lines = [x for x in err.getvalue().strip().splitlines() if x.strip()]
            return {"ok": False, "type": "SystemExit", "message": (lines[-1] if lines else "")[:500],
                    "where": "argparse"}
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            return {"ok": False, "type": type(exc).__name__, "message": str(exc)[:600], "where": _where(exc)}
        finally:
            os.environ.clear()
            os.environ.update(env)


def _brief(r: dict) -> list:
    if not r["ok"]:
        return [r["type"], r["message"][:120]]
    d = r["resolved"]
    return [d.get("attention_backend"), d.get("prefill_attention_backend"), d.get("decode_attention_backend"),
            d.get("page_size"), d.get("kv_cache_dtype"), d.get("dsa_prefill_backend"), d.get("dsa_decode_backend")]


def _argv(paths: dict[str, str], model: str, tag: str, tail: tuple) -> list[str]:
    argv = ["--model-path", paths[model], "--skip-tokenizer-init", "--device", "cuda", *tail]
    if tag == "spec":
        argv += ["--speculative-draft-model-path", paths[model]]
    return argv


def _override_only(platform: str):
    try:
        from sglang.srt.runtime_context import _PLATFORM_PROBES, _PLATFORM_VALUES, override_platform
    except ImportError:
        return None
    kind, cap = PLATFORMS[platform][:2]
    known = set(_PLATFORM_PROBES) | set(_PLATFORM_VALUES)
    o = override_platform(**{k: v for k, v in _facts(kind, cap).items() if k in known})
    o.install()
    return o


def _torchvision_without_ops() -> bool:
    """A CPU-only torch cannot load the PyPI torchvision's compiled ops (they link libtorch_cuda), and torchvision's
    import then fails registering fake kernels for two ops it never defined (`torchvision::nms`, `::qnms`,
    torchvision/_meta_registrations.py); SGLang's configs import torchvision.transforms (configs/__init__.py ->
    nano_nemotron_vl.py -> multimodal/internvl_utils.py). Declaring the two schemas lets the import finish; resolution
    calls no torchvision op. True if it did that."""
    import importlib.util

    import torch

    if torch.version.cuda is not None or importlib.util.find_spec("torchvision") is None:
        return False
    lib = torch.library.Library("torchvision", "DEF")  # kept alive for the worker's lifetime
    for op in ("nms", "qnms"):
        lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _KEEP.append(lib)
    return True


_KEEP: list = []


def worker(platform: str, out_path: str, quick: bool) -> None:
    t0 = time.time()
    import logging

    logging.disable(logging.CRITICAL)
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    shimmed = _torchvision_without_ops()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import sglang
        import sglang.srt.configs.model_config
        import sglang.srt.server_args
    import importlib
    import pkgutil

    import sglang.srt.arg_groups as groups

    for mod in pkgutil.walk_packages(groups.__path__, "sglang.srt.arg_groups."):
        with contextlib.suppress(Exception):
            importlib.import_module(mod.name)
    fields_cached = cache_struct_fields()
    root = Path(tempfile.mkdtemp(prefix="kb-sglang-models-"))
    paths = _write_models(root)
    resolve = Resolver()
    imports = FailedImports()
    points = _points(platform, quick, _dsa_choices(resolve.parser))
    # Warm-up: resolve every point once with only the platform context overridden (as SGLang's own unit tests
    # do), so that the modules resolution imports lazily are imported in the machine's real no-GPU state; with
    # torch.cuda patched, their import-time `if _is_cuda: from sgl_kernel import ...` would fail.
    warm = _override_only(platform)
    warm_mode = "override_platform" if warm is not None else "none"
    t_warm = time.time()
    warm_rows = []
    for model, tag, tail in points:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            warm_rows.append(_brief(resolve(_argv(paths, model, tag, tail))))
    if warm is not None:
        warm.restore()
    t_warm = time.time() - t_warm
    warm_failed = len(imports.failed)
    imports.clear()
    info = _patch_platform(platform)
    rows = []
    for model, tag, tail in points:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            r = resolve(_argv(paths, model, tag, tail))
        rows.append((model, tag, list(tail), r))
    # How much the patches beyond override_platform change: points whose backends, page size, KV dtype or error
    # differ between the warm-up (context override only) and the recorded pass. (Memory-derived settings differ
    # everywhere: with the context override alone SGLang sees no device memory and uses its fallbacks, 0.95 and
    # chunked prefill 4096.)
    diffs = [[m, t, list(tail), w, _brief(r)] for (m, t, tail, r), w in zip(rows, warm_rows, strict=True)
             if w != _brief(r)]
    doc = {"platform": platform, "sglang": sglang.__version__, "torch": torch.__version__,
           "override_only_diffs": {"warmup": warm_mode, "count": len(diffs), "examples": _jsonable(diffs[:20])},
           "patch": _jsonable({**info, "torchvision_schemas_declared": shimmed}),  # _torchvision_without_ops
           "seconds": round(time.time() - t0, 1), "warmup_seconds": round(t_warm, 1),
           "struct_fields_cached": fields_cached,
           "failed_imports": {"warmup": warm_failed, "recorded": len(imports.failed), "not_run_again": imports.hits},
           "rows": _jsonable(rows)}
    Path(out_path).write_text(json.dumps(doc))
    shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------------
# Driver: all platforms, one compact document
# --------------------------------------------------------------------------------------------------------------


def _outcome(r: dict, flags: list[str]) -> dict:
    if not r["ok"]:
        return {"error": r["type"], "message": r["message"], "where": r.get("where")}
    d, raw, src = r["resolved"], r["raw"], r["sources"]
    att = d.get("attention_backend")
    pre = d.get("prefill_attention_backend") or att
    dec = d.get("decode_attention_backend") or att
    out = {"prefill": pre, "decode": dec}
    for k in KEY_FIELDS:
        if k in d:
            out[k] = d[k]
    out.update(_graph(d))
    changed = {}
    for k, v in d.items():
        if k in NOISE or k.startswith("_") or k not in raw:
            continue
        if _jsonable(raw.get(k)) != _jsonable(v):
            changed[k] = v
    out["changed"] = sorted(changed)
    out["by"] = {k: src[k] for k in sorted(changed) if k in src}
    return _jsonable(out)


def run(out_path: str, quick: bool, platforms: list[str], jobs: int) -> dict:
    t0 = time.time()
    me = str(Path(__file__).resolve())
    tmp = Path(tempfile.mkdtemp(prefix="kb-sglang-grid-"))
    env = worker_env()
    pending = list(platforms)
    running: list[tuple[str, subprocess.Popen, Path]] = []
    parts: dict[str, dict] = {}
    failures: dict[str, str] = {}
    while pending or running:
        while pending and len(running) < jobs:
            p = pending.pop(0)
            part = tmp / f"{p}.json"
            cmd = [sys.executable, me, str(part), "--worker", p] + (["--quick"] if quick else [])
            running.append((p, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                text=True), part))
        p, proc, part = running.pop(0)
        text, _ = proc.communicate()
        if proc.returncode != 0 or not part.exists():
            failures[p] = (text or "")[-2000:]
            continue
        parts[p] = json.loads(part.read_text())
    shutil.rmtree(tmp, ignore_errors=True)
    # Fields every successful resolution fills in, whatever the point: listed once, not per outcome.
    filled = None
    for doc in parts.values():
        for _model, _tag, tail, r in doc["rows"]:
            if r["ok"]:
                ch = set(_outcome(r, tail)["changed"])
                filled = ch if filled is None else filled & ch
    filled = (filled or set()) - set(KEY_FIELDS)
    outcomes: dict[str, int] = {}
    table: list[dict] = []
    argvs: dict[str, int] = {}
    argv_table: list[list[str]] = []
    rows = []
    version = None
    for p in platforms:
        if p not in parts:
            continue
        doc = parts[p]
        version = doc["sglang"]
        for model, tag, tail, r in doc["rows"]:
            o = _outcome(r, tail)
            if "changed" in o:
                o["changed"] = [k for k in o["changed"] if k not in filled]
                o["by"] = {k: v for k, v in o["by"].items() if k not in filled}
            key = json.dumps(o, sort_keys=True)
            if key not in outcomes:
                outcomes[key] = len(table)
                table.append(o)
            akey = json.dumps(tail)
            if akey not in argvs:
                argvs[akey] = len(argv_table)
                argv_table.append(tail)
            rows.append([p, model, tag, argvs[akey], outcomes[key]])
    doc = {
        "sglang": version,
        "torch": next((d["torch"] for d in parts.values()), None),
        "python": sys.version.split()[0],
        "quick": quick,
        "platforms": {p: {"kind": PLATFORMS[p][0], "capability": list(PLATFORMS[p][1]), "name": PLATFORMS[p][2],
                          "memory_mib": PLATFORMS[p][3], "sms": PLATFORMS[p][4],
                          "weaker": PLATFORMS[p][0] == "hip",
                          "facts": parts[p]["patch"]["facts"] if p in parts else None,
                          "torch_version_cuda": parts[p]["patch"].get("torch_version_cuda") if p in parts else None,
                          "torch_version_hip": parts[p]["patch"].get("torch_version_hip") if p in parts else None,
                          "seconds": parts[p]["seconds"] if p in parts else None,
                          "warmup_seconds": parts[p].get("warmup_seconds") if p in parts else None,
                          "failed_imports": parts[p].get("failed_imports") if p in parts else None,
                          "override_only_diffs": parts[p].get("override_only_diffs") if p in parts else None}
                      for p in platforms},
        "models": MODELS,
        "grid": {"kv_base": KV_DTYPES, "page_base": PAGES, "kv_flag": KV_FLAG_DTYPES, "page_flag": FLAG_PAGE,
                 "extra_backends": EXTRA_BACKENDS, "split_pairs": SPLIT_PAIRS, "split_models": SPLIT_MODELS,
                 "one_side_models": ONE_SIDE_MODELS, "spec_backends": SPEC_BACKENDS, "cuda_version": CUDA_VERSION,
                 "page_flag_more": FLAG_PAGES_MORE, "split_kv": SPLIT_KV, "dsa_kv": DSA_KV,
                 "hip_version": HIP_VERSION,
                 "fixed_argv": ["--model-path", "<model>", "--skip-tokenizer-init", "--device", "cuda"],
                 "spec_extra_argv": ["--speculative-draft-model-path", "<model>"]},
        "always_filled": sorted(filled),
        "failures": failures,
        "columns": ["platform", "model", "tag", "argv", "outcome"],
        "argvs": argv_table,
        "outcomes": table,
        "seconds": round(time.time() - t0, 1),
        "rows": rows,
    }
    text = json.dumps(doc, separators=(",", ":"))
    if out_path.endswith(".gz"):
        import gzip

        with gzip.open(out_path, "wt", encoding="utf-8", compresslevel=9) as fh:
            fh.write(text)
    else:
        Path(out_path).write_text(text)
    return doc


def main(args: list[str]) -> None:
    quick = "--quick" in args
    if "--worker" in args:
        worker(args[args.index("--worker") + 1], args[0], quick)
        return
    platforms = list(PLATFORMS)
    if "--platform" in args:
        platforms = args[args.index("--platform") + 1].split(",")
    if quick and "--platform" not in args:
        platforms = ["sm90", "sm100"]
    jobs = int(args[args.index("--jobs") + 1]) if "--jobs" in args else max(1, min(len(platforms), os.cpu_count() or 1))
    doc = run(args[0], quick, platforms, jobs)
    from collections import Counter

    kinds = Counter(doc["outcomes"][r[4]].get("error", "ok") for r in doc["rows"])
    print(json.dumps({"sglang": doc["sglang"], "points": len(doc["rows"]), "outcomes": len(doc["outcomes"]),
                      "by_kind": dict(kinds), "failures": sorted(doc["failures"]), "seconds": doc["seconds"]}))
    for p, text in doc["failures"].items():
        print(f"--- worker {p} failed:\n{text}", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    main(sys.argv[1:])
