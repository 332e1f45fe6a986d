#!/usr/bin/env python3
"""Boot vLLM once with dummy weights and record what it reports about memory and its KV pool.

usage: python3 probes/vllm_boot/boot_case.py CASE_JSON OUT_JSON

CASE_JSON is a file holding one case object (or the object itself, inline), as in probes/vllm_boot/cases.json:
  {"id": "...", "model": "qwen3-8b" (a folder under probes/vllm_boot/models/, or a path to one),
   "max_model_len": 8192, "gpu_memory_utilization": 0.9, "kv_cache_dtype": "auto", "enforce_eager": true,
   "engine_args": {...optional extra LLM(...) keyword arguments...}, "env": {...optional extra env...}}
Run it in a fresh process per case (run_all.sh does): vLLM is configured once per process.

It sets VLLM_ENABLE_V1_MULTIPROCESSING=0 (the engine core, executor and worker then live in this process, so
their numbers are read directly), VLLM_LOGGING_LEVEL=DEBUG, VLLM_USE_FLASHINFER_SAMPLER=0 and HF_HUB_OFFLINE=1,
captures vLLM's log records (a handler on the "vllm" logger) and tees fd 2 (C++/CUDA warnings, tracebacks), and
writes OUT_JSON. Every number is taken in-process where vLLM keeps it, else parsed from the log line that prints
it; both sources are kept (in_process, from_logs) and the top-level fields say which was used.

Where the numbers come from in vLLM 0.24.0 (file:line in the installed wheel):
  vllm/v1/worker/gpu_worker.py
    :341-346  Worker.init_snapshot (MemorySnapshot), Worker.requested_memory; DEBUG "worker requested memory: %sGiB"
    :434-449  memory_profiling(...) around model_runner.profile_run() and profile_cudagraph_memory()
    :456-464  profile_result.torch_peak_increase (activation peak), non_kv_cache_memory
    :473-475  Worker.non_torch_memory, Worker.peak_activation_memory, Worker.cudagraph_memory_estimate
    :489-493  Worker.available_kv_cache_memory_bytes = requested - non_kv_cache - cudagraph estimate (if applied)
    :496-506  DEBUG "Initial free memory: %s GiB; Requested memory: %f (util), %s GiB",
              DEBUG "Free memory after profiling: %s GiB (total), %s GiB (within requested)"
    :507      DEBUG MemoryProfilingResult repr (vllm/utils/mem_utils.py:215-225): "Memory profiling takes %.2f
              seconds. Total non KV cache memory: XGiB; torch peak memory increase: XGiB; non-torch forward
              increase memory: XGiB; weights memory: XGiB."
    :508-511  INFO "Available KV cache memory: %s GiB"
    :523-535  INFO "CUDA graph memory profiling is enabled ... --gpu-memory-utilization=%.4f is equivalent to
              --gpu-memory-utilization=%.4f without CUDA graph memory profiling ..."
    :596      initialize_from_config: cache_config.num_gpu_blocks = kv_cache_config.num_blocks
    :667-675  INFO "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), difference: %s GiB (%.1f%%)."
    :709-731  DEBUG "Free memory on device (F/T GiB) on startup. Desired GPU memory utilization is (U, R GiB).
              Actual usage is W GiB for weight, A GiB for peak activation, N GiB for non-torch memory, and C GiB
              for CUDAGraph memory. ... Current kv cache memory in use is K GiB."
  vllm/v1/worker/gpu_model_runner.py:5256 (V1 runner) / vllm/v1/worker/gpu/model_runner.py:303 (V2 runner)
              INFO "Model loading took %s GiB memory and %.6f seconds" / "Model loading took %s GiB and %.6f
              seconds"; model_runner.model_memory_usage (weights)
  vllm/v1/worker/gpu_model_runner.py:6657 / vllm/v1/worker/gpu/model_runner.py:727
              INFO "Graph capturing finished in %.0f secs, took %.2f GiB"
  vllm/v1/worker/gpu_worker.py:331 INFO "Using V2 Model Runner" (Llama, Qwen3, Mistral, DeepseekV2 ... by
              default when Triton works: vllm/config/vllm.py:68-77, 522-548)
  vllm/v1/core/kv_cache_utils.py
    :1206-1212 WARNING "Add %d padding layers, may waste at most %.2f%% KV cache memory"
    :2146-2151 INFO "GPU KV cache size: %s tokens", "Maximum concurrency for %s tokens per request: %.2fx"
  vllm/v1/engine/core.py
    :306-316  cache_config.num_gpu_blocks, block_size, kv_cache_size_tokens, kv_cache_max_concurrency;
              the scheduler keeps the KVCacheConfig (EngineCore.scheduler.kv_cache_config, core.py:355)
    :328-347  INFO "init engine (profile, create kv cache, warmup model) took %.2f s"
  vllm/platforms/cuda.py:480-487 INFO "Using %s attention backend out of potential backends: %s."
  vllm/v1/attention/backends/mla/prefill/selector.py:129,166 INFO "Using %s MLA prefill backend."
  FlashAttention version: FlashAttentionImpl.vllm_flash_attn_version (v1/attention/backends/flash_attn.py:666),
              read off each attention layer in compilation_config.static_forward_context (attention.py:413).
In-process path (VLLM_ENABLE_V1_MULTIPROCESSING=0, vllm/v1/engine/core_client.py:283-287, llm_engine.py:123):
  llm.llm_engine.engine_core (InprocClient) .engine_core (EngineCore) .model_executor (UniProcExecutor)
  .driver_worker (WorkerWrapperBase) .worker (gpu_worker.Worker) .model_runner
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
GiB = float(1 << 30)
ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_LOGGING_LEVEL": "DEBUG",
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}

NUM = r"(-?[0-9][0-9.,]*)"
# (name, pattern): each pattern is the format string of one vLLM 0.24.0 log line (see the docstring)
PATTERNS = [
    ("worker_requested_gib", r"worker requested memory: " + NUM + r"GiB"),
    (
        "initial_free_gib",
        r"Initial free memory: " + NUM + r" GiB; Requested memory: " + NUM + r" \(util\), " + NUM + r" GiB",
    ),
    (
        "free_after_profile_gib",
        r"Free memory after profiling: " + NUM + r" GiB \(total\), " + NUM + r" GiB \(within requested\)",
    ),
    (
        "profile",
        r"Memory profiling takes "
        + NUM
        + r" seconds\. Total non KV cache memory: "
        + NUM
        + r"GiB; torch peak memory increase: "
        + NUM
        + r"GiB; non-torch forward increase memory: "
        + NUM
        + r"GiB; weights memory: "
        + NUM
        + r"GiB\.",
    ),
    ("available_kv_gib", r"Available KV cache memory: " + NUM + r" GiB"),
    (
        "cg_equivalent_util",
        r"The current --gpu-memory-utilization=" + NUM + r" is equivalent to "
        r"--gpu-memory-utilization=" + NUM + r" without CUDA graph memory profiling",
    ),
    (
        "cg_pool",
        r"CUDA graph pool memory: " + NUM + r" GiB \(actual\), " + NUM + r" GiB \(estimated\), "
        r"difference: " + NUM + r" GiB \(" + NUM + r"%\)",
    ),
    (
        "final_usage",
        r"Free memory on device \(" + NUM + r"/" + NUM + r" GiB\) on startup\. Desired GPU memory "
        r"utilization is \("
        + NUM
        + r", "
        + NUM
        + r" GiB\)\. Actual usage is "
        + NUM
        + r" GiB for weight, "
        + NUM
        + r" GiB for peak activation, "
        + NUM
        + r" GiB for non-torch memory, and "
        + NUM
        + r" GiB for CUDAGraph "
        r"memory\..*Current kv cache memory in use is " + NUM + r" GiB\.",
    ),
    ("model_loading", r"Model loading took " + NUM + r" GiB(?: memory)? and " + NUM + r" seconds"),
    ("graph_capture", r"Graph capturing finished in " + NUM + r" secs, took " + NUM + r" GiB"),
    ("kv_tokens", r"GPU KV cache size: " + NUM + r" tokens"),
    ("concurrency", r"Maximum concurrency for " + NUM + r" tokens per request: " + NUM + r"x"),
    ("padding", r"Add " + NUM + r" padding layers, may waste at most " + NUM + r"% KV cache memory"),
    ("attn_backend", r"Using (\w+) attention backend out of potential backends: (\[.*?\])"),
    ("mla_prefill_backend", r"Using (\w+) MLA prefill backend"),
    ("init_engine_s", r"init engine \(profile, create kv cache, warmup model\) took " + NUM + r" s"),
    ("v2_runner", r"(Using V2 Model Runner)"),
    ("max_model_len", r"Using max model len " + NUM),
    # vLLM's CUDA-graph estimate per mode: the largest size's capture + (n - 1) x the second size's
    # (v1/worker/gpu_model_runner.py profile_cudagraph_memory, 6576-6742 in 0.26.0; the same code in 0.24.0 and 0.33.0)
    ("cg_profile_sizes", r"Profiling CUDA graph memory: (.*)$"),
    # the V1 runner's start-up encoder pass (v1/worker/gpu_model_runner.py:6396-6403 in 0.26.0); the V2 runner's
    # profile run makes none (v1/worker/gpu/model_runner.py:673-688) and logs no such line
    ("encoder_profile", r"Encoder cache will be initialized with a budget of " + NUM + r" tokens, and profiled with "
     + NUM + r" (\w+) items of the maximum feature size"),
    ("cg_mode_estimate", r"Estimated (\w+) CUDA graph memory: " + NUM + r" MiB first-capture \+ \(" + NUM
     + r"-1\) \u00d7 " + NUM + r" MiB per-graph"),
]
VERBATIM = (
    "GPU KV cache size:",
    "Maximum concurrency for",
    "padding layers",
    "Using V2 Model Runner",
    "attention backend out of potential backends",
    "MLA prefill backend",
    "CUDA graph pool memory",
    "Available KV cache memory",
    "Model loading took",
    "Graph capturing finished",
    "Hybrid KV cache manager is disabled",
    "Memory profiling takes",
    "Profiling CUDA graph memory",
    "CUDA graph memory: ",
    "Encoder cache will be initialized",
)


def num(s: str):
    s = s.replace(",", "")
    try:
        return int(s)
    except ValueError:
        return float(s)


def cudagraph_profile(matches: dict) -> dict | None:
    """vLLM's CUDA-graph estimate by mode, from its log lines: graphs, largest size, first capture and per graph (MiB);
    None where it did not profile graphs (eager, or a runner that does not estimate)."""
    modes = {}
    for mode, first, n, per in matches.get("cg_mode_estimate", []):
        modes[mode] = {"graphs": n, "first_capture_mib": first, "per_graph_mib": per}
    for text in matches.get("cg_profile_sizes", [])[-1:]:
        for mode, n, largest in re.findall(r"(\w+)=(\d+) \(largest=(\d+)\)", text):
            modes.setdefault(mode, {"graphs": int(n)})["largest"] = int(largest)
    return modes or None


def parse_logs(lines: list[str]) -> dict:
    """Every match of every pattern, in order; numbers converted. Pure: tested on constructed log text."""
    out: dict = {}
    for line in lines:
        for name, pat in PATTERNS:
            m = re.search(pat, line)
            if not m:
                continue
            g = [num(x) if re.fullmatch(NUM, x) else x for x in m.groups()]
            out.setdefault(name, []).append(g if len(g) > 1 else g[0])
    res: dict = {"matches": out}

    def last(name, i=None):
        v = out.get(name)
        if not v:
            return None
        v = v[-1]
        return v[i] if i is not None and isinstance(v, list) else v

    res["weights_gib"] = last("profile", 4) if "profile" in out else last("model_loading", 0)
    res["activation_peak_gib"] = last("profile", 2)
    res["non_torch_gib"] = last("profile", 3)
    res["non_kv_cache_gib"] = last("profile", 1)
    res["profile_s"] = last("profile", 0)
    res["requested_gib"] = last("initial_free_gib", 2) if "initial_free_gib" in out else last("worker_requested_gib")
    res["initial_free_gib"] = last("initial_free_gib", 0)
    res["available_kv_gib"] = last("available_kv_gib")
    res["cudagraph_estimate_gib"] = last("cg_pool", 1)
    res["cudagraph_actual_gib"] = last("cg_pool", 0) if "cg_pool" in out else last("graph_capture", 1)
    res["graph_capture_s"] = last("graph_capture", 0)
    res["kv_cache_tokens"] = last("kv_tokens")
    res["max_concurrency"] = last("concurrency", 1)
    res["attention_backend"] = last("attn_backend", 0)
    res["attention_backends_all"] = sorted({v[0] for v in out.get("attn_backend", [])})
    res["mla_prefill_backend"] = last("mla_prefill_backend")
    res["padding_layers"] = [v[0] for v in out.get("padding", [])]
    res["v2_model_runner"] = bool(out.get("v2_runner"))
    res["init_engine_s"] = last("init_engine_s")
    res["cudagraph_profile"] = cudagraph_profile(out)
    enc = out.get("encoder_profile")
    res["encoder_profile"] = ({"budget_tokens": enc[-1][0], "items": enc[-1][1], "modality": enc[-1][2]}
                              if enc else None)
    res["verbatim"] = [ln for ln in lines if any(k in ln for k in VERBATIM)]
    return res


class Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        try:
            msg = record.getMessage()
        except Exception:
            msg = str(record.msg)
        self.lines.append(f"{record.levelname} [{record.pathname.split('/vllm/')[-1]}:{record.lineno}] {msg}")


class TeeStderr:
    """Duplicate fd 2 into a pipe; a thread copies it to the real stderr and keeps the text."""

    def __init__(self):
        self.chunks: list[str] = []
        self.orig = os.dup(2)
        r, w = os.pipe()
        os.dup2(w, 2)
        os.close(w)
        self.r = r
        self.t = threading.Thread(target=self._pump, daemon=True)
        self.t.start()

    def _pump(self):
        while True:
            b = os.read(self.r, 65536)
            if not b:
                break
            os.write(self.orig, b)
            self.chunks.append(b.decode(errors="replace"))

    def text(self) -> str:
        sys.stderr.flush()
        time.sleep(0.05)
        return "".join(self.chunks)


def jsonable(v, depth=0):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if depth > 3:
        return str(v)
    if isinstance(v, dict):
        return {str(k): jsonable(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [jsonable(x, depth + 1) for x in v]
    return str(v)


def spec_dict(spec) -> dict:
    d = {"type": type(spec).__name__}
    for k in (
        "block_size",
        "num_kv_heads",
        "head_size",
        "head_size_v",
        "dtype",
        "sliding_window",
        "attention_chunk_size",
        "cache_dtype_str",
        "shapes",
        "dtypes",
        "mamba_type",
        "page_size_padded",
        "num_speculative_blocks",
    ):
        if hasattr(spec, k):
            d[k] = jsonable(getattr(spec, k))
    for k in ("page_size_bytes", "real_page_size_bytes"):
        with contextlib.suppress(Exception):
            d[k] = int(getattr(spec, k))
    if hasattr(spec, "kv_cache_specs"):  # UniformTypeKVCacheSpecs
        inner = list(spec.kv_cache_specs.values())
        d["inner"] = spec_dict(inner[0]) if inner else None
        d["inner_count"] = len(inner)
    return d


def read_in_process(llm) -> dict:
    """Numbers from the live objects. Each step is guarded: one missing attribute costs only its own field."""
    ip: dict = {"errors": []}

    def grab(name, fn):
        try:
            ip[name] = fn()
        except Exception as e:
            ip["errors"].append(f"{name}: {type(e).__name__}: {e}")

    eng = llm.llm_engine
    core = getattr(getattr(eng, "engine_core", None), "engine_core", None)
    ip["engine_core_type"] = type(core).__name__ if core is not None else None
    vc = getattr(core, "vllm_config", None) or getattr(eng, "vllm_config", None)
    worker = None
    try:
        worker = core.model_executor.driver_worker.worker
    except Exception as e:
        ip["errors"].append(f"worker: {type(e).__name__}: {e}")
    if vc is not None:
        cc = vc.cache_config
        for k in (
            "num_gpu_blocks",
            "block_size",
            "cache_dtype",
            "gpu_memory_utilization",
            "kv_cache_size_tokens",
            "kv_cache_max_concurrency",
            "enable_prefix_caching",
            "mamba_cache_mode",
            "mamba_block_size",
        ):
            grab(k, lambda k=k: jsonable(getattr(cc, k, None)))
        grab("max_model_len", lambda: vc.model_config.max_model_len)
        grab("dtype", lambda: str(vc.model_config.dtype))
        grab("quantization", lambda: vc.model_config.quantization)
        grab("cudagraph_mode", lambda: str(vc.compilation_config.cudagraph_mode))
        grab("compilation_mode", lambda: str(vc.compilation_config.mode))
        grab("cudagraph_capture_sizes_n", lambda: len(vc.compilation_config.cudagraph_capture_sizes or []))
        grab("max_cudagraph_capture_size", lambda: vc.compilation_config.max_cudagraph_capture_size)
    if worker is not None:
        mr = worker.model_runner
        ip["model_runner"] = f"{type(mr).__module__}.{type(mr).__name__}"
        grab("weights_bytes", lambda: int(mr.model_memory_usage))
        grab("tensor_bytes", lambda: tensor_bytes(mr.get_model() if hasattr(mr, "get_model") else mr.model))
        grab("activation_peak_bytes", lambda: int(worker.peak_activation_memory))
        grab("non_torch_bytes", lambda: int(worker.non_torch_memory))
        grab("cudagraph_estimate_bytes", lambda: int(worker.cudagraph_memory_estimate))
        grab("requested_bytes", lambda: int(worker.requested_memory))
        grab("available_kv_bytes", lambda: int(worker.available_kv_cache_memory_bytes))
        grab("init_free_bytes", lambda: int(worker.init_snapshot.free_memory))
        grab("total_bytes", lambda: int(worker.init_snapshot.total_memory))
    try:
        kvc = core.scheduler.kv_cache_config
        ip["kv_cache_config"] = {
            "num_blocks": int(kvc.num_blocks),
            "tensors": [{"size": int(t.size), "shared_by_n": len(t.shared_by)} for t in kvc.kv_cache_tensors],
            "groups": [
                {
                    "num_layers": len(g.layer_names),
                    "first_layer": g.layer_names[0] if g.layer_names else None,
                    "spec": spec_dict(g.kv_cache_spec),
                }
                for g in kvc.kv_cache_groups
            ],
        }
        ip["kv_cache_config"]["tensor_bytes_total"] = sum(t["size"] for t in ip["kv_cache_config"]["tensors"])
    except Exception as e:
        ip["errors"].append(f"kv_cache_config: {type(e).__name__}: {e}")
    try:  # one entry per (layer type, backend, impl, FA version)
        layers: dict = {}
        vcw = getattr(worker, "vllm_config", None) or vc  # the worker's config holds the layers it built
        for name, layer in vcw.compilation_config.static_forward_context.items():
            be = getattr(layer, "attn_backend", None) or getattr(layer, "get_attn_backend", lambda: None)()
            impl = getattr(layer, "impl", None)
            fa = None
            if impl is not None:
                for k, v in vars(impl).items():
                    if "flash_attn_version" in k or k in ("fa_version", "fa_ver"):
                        fa = v
            key = (
                type(layer).__name__,
                be.get_name() if hasattr(be, "get_name") else str(be),
                type(impl).__name__ if impl is not None else None,
                fa,
            )
            layers.setdefault(key, []).append(name)
        ip["layers"] = [
            {"layer": k[0], "backend": k[1], "impl": k[2], "fa_version": k[3], "count": len(v), "first": v[0]}
            for k, v in layers.items()
        ]
    except Exception as e:
        ip["errors"].append(f"layers: {type(e).__name__}: {e}")
    try:
        import torch

        free, total = torch.cuda.mem_get_info()
        ip["after_boot"] = {
            "free_bytes": int(free),
            "total_bytes": int(total),
            "torch_reserved_bytes": int(torch.cuda.memory_reserved()),
            "torch_allocated_bytes": int(torch.cuda.memory_allocated()),
            "torch_max_allocated_bytes": int(torch.cuda.max_memory_allocated()),
        }
    except Exception as e:
        ip["errors"].append(f"after_boot: {type(e).__name__}: {e}")
    return ip


def tensor_bytes(model) -> dict:
    """Where the loaded model's device bytes sit: every distinct CUDA tensor reachable from a module (parameters,
    buffers, and plain attributes, such as the MoE precision configs that hold swizzled MXFP4 weights and scales),
    summed per (module class, attribute, dtype). Tells a load above parameters x bytes apart into padding, kept
    copies and dtype changes."""
    import torch

    seen: set[int] = set()
    groups: dict[str, list[int]] = {}

    def add(key: str, t) -> None:
        if not (isinstance(t, torch.Tensor) and t.is_cuda):
            return
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen:
            return
        seen.add(ptr)
        g = groups.setdefault(f"{key}:{str(t.dtype).replace('torch.', '')}", [0, 0, 0])
        g[0] += t.untyped_storage().nbytes()
        g[1] += 1
        g[2] += t.numel() * t.element_size()

    def walk(key: str, obj, depth: int) -> None:
        if depth > 4 or obj is None or isinstance(obj, (int, float, str, bool, torch.nn.Module)):
            return
        if isinstance(obj, torch.Tensor):
            add(key, obj)
        elif isinstance(obj, (list, tuple)):
            for x in obj:
                walk(key, x, depth + 1)
        elif isinstance(obj, dict):
            for x in obj.values():
                walk(key, x, depth + 1)
        elif hasattr(obj, "__dict__"):
            for k, x in vars(obj).items():
                walk(f"{key}.{k}", x, depth + 1)

    for _, mod in model.named_modules():
        cls = type(mod).__name__
        for k, t in list(mod._parameters.items()) + list(mod._buffers.items()):
            add(f"{cls}.{k}", t)
        for k, x in vars(mod).items():
            if not k.startswith("_"):
                walk(f"{cls}.{k}", x, 0)
    rows = sorted(({"group": k, "bytes": v[0], "tensors": v[1], "view_bytes": v[2]} for k, v in groups.items()),
                  key=lambda r: -r["bytes"])
    return {"total_bytes": sum(r["bytes"] for r in rows), "groups": rows[:40], "groups_n": len(rows)}


def held_before_snapshot(ip: dict):
    """GiB in use on the device at vLLM's first memory snapshot (total - free of worker.init_snapshot), or None."""
    total, free = ip.get("total_bytes"), ip.get("init_free_bytes")
    return round((total - free) / GiB, 4) if total and free is not None and total >= free else None


def pick(ip_val, log_val, scale=1.0):
    """(value, source): the in-process number (bytes -> GiB by scale) if there is one, else the log's."""
    if ip_val is not None:
        return round(ip_val / scale, 4), "in_process"
    if log_val is not None:
        return log_val, "log"
    return None, None


def classify(exc_text: str) -> str:
    t = exc_text.lower()
    if (
        "out of memory" in t
        or "outofmemory" in t
        or "no available memory for the cache blocks" in t
        or "insufficient memory" in t
        or "larger than the available kv cache memory" in t
    ):
        return "OOM"
    if "not supported" in t or "unsupported" in t or "no valid attention backend" in t:
        return "UNSUPPORTED"
    return "ERROR"


GPTQ_BLOCK_LAYERS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                     "mlp.up_proj", "mlp.down_proj"]


def as_real_checkpoint(mdir: Path) -> tuple[Path, str | None]:
    """The model folder to boot, and what was patched so a config-only folder boots as its checkpoint would.

    vLLM 0.24.0 finds a GPTQ checkpoint's quantized layers in its safetensors headers when the quantization_config
    does not list them (auto_gptq.py maybe_update_config); a folder with config.json alone has none, so every
    layer would be built unquantized (2 bytes per weight). The copy names the layers AutoGPTQ quantizes in a
    decoder block instead."""
    cfg = json.loads((mdir / "config.json").read_text(encoding="utf-8"))
    q = cfg.get("quantization_config") or {}
    if q.get("quant_method") != "gptq" or q.get("modules_in_block_to_quantize") or any(mdir.glob("*.safetensors")):
        return mdir, None
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="kb-boot-model-"))
    for f in mdir.iterdir():
        if f.is_file() and f.name != "config.json":
            (tmp / f.name).write_bytes(f.read_bytes())
    q["modules_in_block_to_quantize"] = GPTQ_BLOCK_LAYERS
    (tmp / "config.json").write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    return tmp, "quantization_config.modules_in_block_to_quantize = " + ",".join(GPTQ_BLOCK_LAYERS)


def llm_kwargs(case: dict, mdir: Path) -> dict:
    """The LLM(...) keyword arguments a case boots with: dummy weights, no tokenizer, the case's memory settings, and
    its engine_args on top.

    A multimodal case (its folder holds the checkpoint's processor and tokenizer files) sets two of them there, both
    read in vLLM 0.26.0 and tried on a CPU (probes/vllm_boot/mm_profile.py):
      skip_tokenizer_init false: the processors place the image tokens of the profile run's dummy prompt with the
        tokenizer (models/qwen3_vl.py:1430, models/gemma3_mm.py:382 call ctx.get_tokenizer(), which raises "You
        cannot pass text prompts when `skip_tokenizer_init=True`", multimodal/processing/context.py:103-107);
      mm_processor_cache_gb 0: with the processor cache on (the default, 4; multimodal/registry.py:278), the dummy
        item is processed text first and alone (multimodal/processing/processor.py:1474 -> 1287 -> 1188), and
        transformers 5.24 (the bundle's) refuses a prompt holding an image token with no image ("Found 1
        <|image_pad|> tokens in the text but no images were passed", processing_utils.py:806; 5.5.3 has no such
        check). The cache is host memory: the GPU's numbers do not depend on it."""
    kwargs = dict(
        model=str(mdir),
        load_format="dummy",
        skip_tokenizer_init=True,
        max_model_len=case.get("max_model_len", 8192),
        gpu_memory_utilization=case.get("gpu_memory_utilization", 0.9),
        kv_cache_dtype=case.get("kv_cache_dtype", "auto"),
        enforce_eager=case.get("enforce_eager", True),
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
    )
    kwargs.update(case.get("engine_args", {}))
    return kwargs


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    arg, out_path = sys.argv[1], Path(sys.argv[2])
    case = json.loads(arg) if arg.lstrip().startswith("{") else json.loads(Path(arg).read_text())
    os.environ.update(ENV)
    os.environ.update({k: str(v) for k, v in case.get("env", {}).items()})
    model = case["model"]
    mdir = Path(model) if Path(model).is_dir() else HERE / "models" / model
    mdir, patched = as_real_checkpoint(mdir)
    tee = TeeStderr()
    cap = Capture()
    result: dict = {
        "id": case.get("id"),
        "case": case,
        "model_dir": str(mdir),
        "host": os.uname().nodename,
        "config_patch": patched,
        "env": {k: os.environ.get(k) for k in sorted(set(ENV) | set(case.get("env", {})))},
    }
    t0 = time.time()
    llm = None
    try:
        import vllm

        logging.getLogger("vllm").addHandler(cap)
        result["release"] = vllm.__version__
        try:
            import torch

            result["torch"] = torch.__version__
            result["gpu"] = torch.cuda.get_device_name(0)
        except Exception:
            pass
        kwargs = llm_kwargs(case, mdir)
        result["flags"] = jsonable(kwargs)
        from vllm import LLM

        llm = LLM(**kwargs)
        result["boot_s"] = round(time.time() - t0, 2)
        result["outcome"] = "OK"
        result["in_process"] = read_in_process(llm)
    except BaseException as e:
        tb = traceback.format_exc()
        result["boot_s"] = round(time.time() - t0, 2)
        result["exception"] = {"type": type(e).__name__, "message": str(e)[-4000:], "traceback": tb[-6000:]}
        result["outcome"] = classify(f"{type(e).__name__} {e}")
    result["wall_s"] = round(time.time() - t0, 2)
    err = tee.text()
    lines = cap.lines
    logs = parse_logs(lines + err.splitlines())
    result["from_logs"] = logs
    ip = result.get("in_process", {})
    s = {}
    s["attention_backend"] = logs["attention_backend"]
    s["attention_backends_all"] = logs["attention_backends_all"]
    s["mla_prefill_backend"] = logs["mla_prefill_backend"]
    fav = sorted({x["fa_version"] for x in ip.get("layers", []) if x.get("fa_version") is not None})
    s["flash_attn_version"] = fav[0] if len(fav) == 1 else (fav or None)
    s["model_runner"] = ip.get("model_runner") or ("V2" if logs["v2_model_runner"] else None)
    for field, ipk, lk in (
        ("weights_gib", "weights_bytes", "weights_gib"),
        ("activation_peak_gib", "activation_peak_bytes", "activation_peak_gib"),
        ("non_torch_gib", "non_torch_bytes", "non_torch_gib"),
        ("cudagraph_estimate_gib", "cudagraph_estimate_bytes", "cudagraph_estimate_gib"),
        ("requested_gib", "requested_bytes", "requested_gib"),
        ("available_kv_gib", "available_kv_bytes", "available_kv_gib"),
    ):
        s[field], s[field + "_source"] = pick(ip.get(ipk), logs.get(lk), GiB)
    # device memory in use when vLLM took its first snapshot (the CUDA context and what torch set up before it):
    # the budget is total x utilization, so no release before 0.34.0 pays it from the pool; 0.34.0's extensible
    # cache, sized from measured free memory, does (v1/worker/extensible_kv_cache.py:592-618 at 62d4bc3c7)
    s["held_before_snapshot_gib"] = held_before_snapshot(ip)
    # the model's own tensors (tensor_bytes, KV cache left out) beside vLLM's "Model loading took" (weights_gib): on
    # gpt-oss-120b / 0.26.0 the load's allocated blocks exceeded the tensors by 0.37 GiB (allocator granularity)
    tb = ip.get("tensor_bytes") or {}
    kv = sum(g["bytes"] for g in tb.get("groups", []) if ".kv_cache:" in g["group"])
    s["module_tensors_gib"] = round((tb["total_bytes"] - kv) / GiB, 4) if tb.get("total_bytes") else None
    s["cudagraph_actual_gib"] = logs["cudagraph_actual_gib"]
    s["cudagraph_profile"] = logs["cudagraph_profile"]
    s["encoder_profile"] = logs["encoder_profile"]
    s["graph_capture_s"] = logs["graph_capture_s"]
    s["block_size"] = ip.get("block_size")
    s["num_gpu_blocks"] = ip.get("num_gpu_blocks")
    s["kv_cache_tokens"] = ip.get("kv_cache_size_tokens") or logs["kv_cache_tokens"]
    s["max_concurrency"] = ip.get("kv_cache_max_concurrency") or logs["max_concurrency"]
    kvc = ip.get("kv_cache_config") or {}
    s["kv_cache_groups"] = [
        {
            "num_layers": g["num_layers"],
            "type": g["spec"]["type"],
            "block_size": g["spec"].get("block_size"),
            "page_size_bytes": g["spec"].get("page_size_bytes"),
            "sliding_window": g["spec"].get("sliding_window"),
        }
        for g in kvc.get("groups", [])
    ]
    s["padding_lines"] = [ln for ln in logs["verbatim"] if "padding layers" in ln]
    s["kv_tokens_line"] = next((ln for ln in reversed(logs["verbatim"]) if "GPU KV cache size:" in ln), None)
    s["concurrency_line"] = next((ln for ln in reversed(logs["verbatim"]) if "Maximum concurrency for" in ln), None)
    result["summary"] = s
    if result["outcome"] != "OK":
        result["last_log_lines"] = (lines + [f"STDERR {x}" for x in err.splitlines()[-15:]])[-40:]
    result["log_line_count"] = len(lines)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str))
    tmp.replace(out_path)
    sys.stdout.flush()
    os._exit(0 if result["outcome"] == "OK" else 1)  # skip engine teardown: the next case gets a fresh process


if __name__ == "__main__":
    sys.exit(main())
