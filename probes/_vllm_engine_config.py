"""Run under the interpreter that has vLLM installed (no GPU, no kbtool): vLLM's own argument and config
resolution for `vllm serve MODEL --max-model-len N` with the device presented as each accelerator of a list,
printed as one JSON document (gzip). The vllm-engine-config probe (probes/vllm_engine_config.py) starts it.

Each point builds `EngineArgs(model=DIR, max_model_len=N, skip_tokenizer_init=True)` and calls
`create_engine_config(UsageContext.OPENAI_API_SERVER)` (what `vllm serve` does, vllm/entrypoints/openai/api_server.py),
with vLLM's current platform (probes/_vllm_grid.py `setup`) answering the accelerator's total memory, device name
and compute capability. DIR holds the model's published config.json (tests/data/hf-configs). It records what the
resolved VllmConfig holds: the scheduler's batch sizes, async scheduling and chunked prefill, the cache's block
size, utilization, prefix caching, Mamba cache mode and dtype, the CUDA-graph mode and capture sizes, the model
runner, and (where the release has one) the extensible KV cache and its margins. A point that raises keeps vLLM's
exception text.

Usage: python _vllm_engine_config.py OUT.json.gz POINTS.json
POINTS.json: {"accelerators": [{id, memory_bytes, name, cc}], "models": [{id, dir, max_model_len}],
              "pairs": [[accelerator id, model id], ...] (default: every accelerator with every model)}
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time

SCHEDULER = ("max_num_batched_tokens", "max_num_seqs", "async_scheduling", "enable_chunked_prefill")
CACHE = ("block_size", "gpu_memory_utilization", "resolved_gpu_memory_utilization", "enable_prefix_caching",
         "mamba_cache_mode", "mamba_block_size", "cache_dtype", "enable_extensible_kv_cache")
MARGINS = ("KV_CACHE_MARGIN_FLOOR_BYTES", "KV_CACHE_MARGIN_FRACTION", "KV_CACHE_NON_TORCH_RESERVE_BYTES")


def _plain(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def resolve(model: dict, cc: tuple[int, int]) -> dict:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    args = EngineArgs(model=model["dir"], max_model_len=model["max_model_len"], skip_tokenizer_init=True)
    try:
        cfg = args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    except Exception as exc:  # vLLM's own refusal at this point (its words are the record)
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
    sc, cache, comp = cfg.scheduler_config, cfg.cache_config, cfg.compilation_config
    out: dict = {k: _plain(getattr(sc, k, None)) for k in SCHEDULER}
    out.update({k: _plain(getattr(cache, k, None)) for k in CACHE})
    sizes = list(getattr(comp, "cudagraph_capture_sizes", None) or [])
    out["cudagraph_mode"] = _plain(getattr(comp, "cudagraph_mode", None))
    out["cudagraph_capture_sizes"] = {"count": len(sizes), "max": max(sizes) if sizes else None}
    out["use_v2_model_runner"] = _plain(getattr(cfg, "use_v2_model_runner", None))
    out["model_dtype"] = _plain(cfg.model_config.dtype).removeprefix("torch.")
    out["architecture"] = _plain(getattr(cfg.model_config, "architecture", None))
    out["max_model_len"] = cfg.model_config.max_model_len
    return out


def release_facts() -> dict:
    """What is one per release, not per point: the extensible KV cache's margins, whether the V1 model runner's
    module still exists, and EngineArgs' own default for gpu_memory_utilization."""
    import importlib
    import importlib.util

    from vllm.engine.arg_utils import EngineArgs

    facts: dict = {"engine_args_gpu_memory_utilization": _plain(EngineArgs.gpu_memory_utilization)}
    facts["v1_model_runner_module"] = importlib.util.find_spec("vllm.v1.worker.gpu_model_runner") is not None
    try:
        ext = importlib.import_module("vllm.v1.worker.extensible_kv_cache")
        facts["extensible_kv_cache"] = {k: _plain(getattr(ext, k, None)) for k in MARGINS}
    except ImportError:
        facts["extensible_kv_cache"] = None
    return facts


def run(out_path: str, points_path: str) -> None:
    t0 = time.time()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _vllm_grid import setup

    env = setup()
    import vllm

    GridPlatform, DeviceCapability = env["GridPlatform"], env["DeviceCapability"]
    with open(points_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    rows = []
    accs, models = {a["id"]: a for a in spec["accelerators"]}, {m["id"]: m for m in spec["models"]}
    pairs = spec.get("pairs") or [[a, m] for a in accs for m in models]
    for acc_id, model_id in pairs:
        acc, model = accs[acc_id], models[model_id]
        major, minor = (int(x) for x in str(acc["cc"]).split("."))
        GridPlatform.cap = DeviceCapability(major, minor)
        GridPlatform.get_device_total_memory = classmethod(lambda cls, device_id=0, m=acc["memory_bytes"]: m)
        GridPlatform.get_device_name = classmethod(lambda cls, device_id=0, n=acc["name"]: n)
        t = time.time()
        rows.append({"accelerator": acc_id, "model": model_id, "max_model_len": model["max_model_len"],
                     "resolved": resolve(model, (major, minor)), "seconds": round(time.time() - t, 1)})
    doc = {"vllm": vllm.__version__, "release": release_facts(), "usage_context": "OPENAI_API_SERVER",
           "accelerators": spec["accelerators"], "models": [{k: m[k] for k in ("id", "max_model_len")}
                                                             for m in spec["models"]],
           "seconds": round(time.time() - t0, 1), "rows": rows}
    with gzip.open(out_path, "wt", encoding="utf-8", compresslevel=9) as fh:
        fh.write(json.dumps(doc, separators=(",", ":"), sort_keys=True))


if __name__ == "__main__":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    run(sys.argv[1], sys.argv[2])
