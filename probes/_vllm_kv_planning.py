"""Run under the interpreter that has vLLM installed (no GPU, no kbtool): vLLM's own KV-cache planning over the
per-layer KV specs of one model, at a grid of available-memory points, printed as one JSON document.
The vllm-kv-planning probe (probes/vllm_kv_planning.py) starts it; importing vLLM without a GPU uses _vllm_grid's
setup.

What runs is the engine core's start-up path (vllm/v1/engine/core.py `_initialize_kv_caches`) from the per-worker
specs on: the grouping (`get_global_kv_cache_groups` where the release has it, else inside `get_kv_cache_configs`),
`get_kv_cache_configs` (which runs the start-up check `_check_enough_kv_cache_memory` / `check_enough_kv_cache_memory`
and sizes num_blocks), `generate_scheduler_kv_cache_config`, and the "GPU KV cache size" / "Maximum concurrency"
numbers (`get_kv_cache_capacity`, else the release's own formula, cited per release in the probe). What the engine
reads off a real model config (the per-layer specs, the block size after hybrid alignment, the Mamba cache mode) is
the case's input; the VllmConfig is vLLM's own class with its properties (max_in_flight_tokens, ...) over the
sub-configs the planning reads: CacheConfig is vLLM's, the others carry only the fields read.

Usage: python _vllm_kv_planning.py @CASES.json (or one case as JSON)
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import os
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace


def _missing(self: object, name: str) -> object:
    if name.startswith("__"):
        raise AttributeError(name)
    return None


class _Namespace(SimpleNamespace):
    """A sub-config with only the fields the planning reads; a field it lacks is None (vLLM's "not set")."""

    __getattr__ = _missing


def _config_class(plain: set[str]):
    """A class with VllmConfig's properties and methods but plain attributes (no pydantic validation); the names
    in `plain` are attributes the case sets (e.g. use_v2_model_runner, a property that reads the model)."""
    from vllm.config import VllmConfig

    ns = {}
    for klass in reversed(VllmConfig.__mro__):
        for name, value in vars(klass).items():
            if name in plain or name.startswith("__"):
                continue
            if isinstance(value, property) or callable(value):
                ns[name] = value
    ns["__getattr__"] = _missing
    return type("PlanningConfig", (), ns)


def _kwargs(cls: type, **want: object) -> dict:
    """The keyword arguments of `want` that dataclass `cls` has at this release."""
    names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set(
        inspect.signature(cls).parameters)
    return {k: v for k, v in want.items() if k in names and v is not None}


def make_config(case: dict, point: dict):
    from vllm.config import CacheConfig

    cache = CacheConfig(**_kwargs(CacheConfig, block_size=case["block"], cache_dtype=case.get("cache_dtype", "auto"),
                                  enable_prefix_caching=bool(point.get("prefix_caching", False))))
    if point.get("mamba_mode") is not None and hasattr(cache, "mamba_cache_mode"):
        object.__setattr__(cache, "mamba_cache_mode", point["mamba_mode"])
    if "enable_extensible_kv_cache" in {f.name for f in dataclasses.fields(CacheConfig)}:
        # 0.34.0: on by default on CUDA (config/cache.py), with gpu_memory_utilization resolving to 1.0
        object.__setattr__(cache, "enable_extensible_kv_cache", True)
    cfg = _config_class({"use_v2_model_runner"})()
    mml = int(point["max_model_len"])
    cfg.model_config = _Namespace(max_model_len=mml, original_max_model_len=mml, supports_kv_cache_grouping=False,
                                  use_mla=case.get("mla", False), dtype=None, architecture=case.get("architecture"),
                                  architectures=[case.get("architecture")], is_hybrid=case.get("hybrid", False))
    cfg.cache_config = cache
    cfg.scheduler_config = _Namespace(max_num_batched_tokens=int(point["batched_tokens"]),
                                      async_scheduling=bool(point.get("async", False)),
                                      max_num_encoder_input_tokens=0, enable_chunked_prefill=True,
                                      max_num_seqs=256, max_model_len=mml)
    pp = int(point.get("pp", 1))
    cfg.parallel_config = _Namespace(tensor_parallel_size=int(case.get("tp", 1)), pipeline_parallel_size=pp,
                                     decode_context_parallel_size=1, prefill_context_parallel_size=1,
                                     world_size=int(case.get("tp", 1)) * pp, data_parallel_size=1,
                                     cp_kv_cache_interleave_size=1, dcp_kv_cache_interleave_size=1)
    cfg.attention_config = _Namespace(hisparse_config=None)
    cfg.device_config = _Namespace(device_type="cuda")
    cfg.speculative_config = None
    cfg.kv_transfer_config = None
    cfg.kv_events_config = None
    cfg.diffusion_config = None
    cfg.use_v2_model_runner = bool(point.get("v2_runner", True))
    return cfg


def make_specs(case: dict, point: dict) -> list[dict]:
    """Per-worker {layer name: spec}: one dict per pipeline stage, layers dealt to stages in order. A Mamba layer's
    block is max_model_len in state-cache mode "none" and the attention block otherwise, as MambaModelConfig sets
    mamba_block_size (model_executor/models/config.py)."""
    pp = int(point.get("pp", 1))
    mamba_block = int(point["max_model_len"]) if point.get("mamba_mode", "none") == "none" else int(case["block"])
    import torch
    from vllm.v1 import kv_cache_interface as kci

    dtype = getattr(torch, case["dtype"])
    block = int(case["block"])
    layers: list[list[tuple[str, object]]] = []  # per decoder layer: its caches, in the order vLLM registers them
    index = 0
    for g in case["layers"]:
        for _ in range(int(g["count"])):
            name = f"model.layers.{index}.attn"
            index += 1
            kind = g["type"]
            own: list[tuple[str, object]] = []
            if g.get("indexer"):  # DeepseekV32IndexerCache, built (and registered) before the layer's MLAAttention
                own.append((f"model.layers.{index - 1}.indexer.k_cache", _indexer_spec(kci, g["indexer"], block)))
            if kind == "mamba":
                spec = kci.MambaSpec(**_kwargs(
                    kci.MambaSpec, block_size=mamba_block,
                    shapes=tuple(tuple(s["shape"]) for s in g["state"]),
                    dtypes=tuple(getattr(torch, s["dtype"]) for s in g["state"]),
                    page_size_padded=g.get("page_padded"), mamba_cache_mode=point.get("mamba_mode"),
                    num_prefill_checkpoint_blocks=point.get("checkpoint_blocks")))
            elif kind == "mla":
                sparse = dict(is_index_group_leader=True, max_tp_shards=1) if g.get("indexer") else {}
                if case.get("cache_dtype") == "fp8_ds_mla":  # mla_attention.py get_kv_cache_spec: 656-byte rows
                    sparse.update(state_content_bytes=656, kv_quant_mode=kci.get_kv_quant_mode("fp8_ds_mla")
                                  if hasattr(kci, "get_kv_quant_mode") else None)
                spec = kci.MLAAttentionSpec(**_kwargs(
                    kci.MLAAttentionSpec, block_size=block, num_kv_heads=1, head_size=int(g["head_dim"]),
                    dtype=dtype, cache_dtype_str=case.get("cache_dtype", "auto"), **sparse))
            else:
                common = dict(block_size=block, num_kv_heads=int(g["kv_heads"]), head_size=int(g["head_dim"]),
                              head_size_v=g.get("head_dim_v"), dtype=dtype)
                if kind == "sliding":
                    spec = kci.SlidingWindowSpec(**_kwargs(kci.SlidingWindowSpec, sliding_window=int(g["window"]),
                                                           **common))
                elif kind == "chunked":
                    spec = kci.ChunkedLocalAttentionSpec(**_kwargs(
                        kci.ChunkedLocalAttentionSpec, attention_chunk_size=int(g["chunk"]), **common))
                else:
                    spec = kci.FullAttentionSpec(**_kwargs(kci.FullAttentionSpec, **common))
            own.append((name, spec))
            layers.append([(n, _customize(case, n, s)) for n, s in own])
    per = -(-len(layers) // pp)
    return [dict(x for layer in layers[i * per:(i + 1) * per] for x in layer) for i in range(pp)]


def _indexer_spec(kci: object, ix: dict, block: int) -> object:
    """DeepseekV32IndexerCache.get_kv_cache_spec (model_executor/models/deepseek_v2.py): an MLAAttentionSpec of one
    head of `head_dim` bytes in uint8, no cache_dtype_str; from 0.32.0 max_tp_shards 1 and cache_role INDEXER."""
    import torch

    role = getattr(kci, "SparseCacheRole", None)
    return kci.MLAAttentionSpec(**_kwargs(
        kci.MLAAttentionSpec, block_size=block, num_kv_heads=1, head_size=int(ix["head_dim"]),
        dtype=getattr(torch, ix["dtype"]), max_tp_shards=1, cache_role=role.INDEXER if role else None))


def _backends(case: dict, layer: str | None = None) -> list[type]:
    """The attention backend classes of the case (all, or of one layer): FLASH_ATTN, FLASHMLA for MLA, the sparse
    MLA backend and DeepseekV32IndexerBackend for a sparse-MLA model's latent and indexer caches."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    sparse = any(g.get("indexer") for g in case["layers"])
    names = AttentionBackendEnum.__members__
    main = case.get("backend") or ("FLASHMLA" if case.get("mla") else "FLASH_ATTN")
    if sparse:  # FlashAttention's sparse MLA takes a bf16/fp16 cache only; fp8_ds_mla is FlashMLA's
        prefer = ("FLASHMLA_SPARSE",) if case.get("cache_dtype") == "fp8_ds_mla" else ("FLASH_ATTN_MLA_SPARSE",
                                                                                      "FLASHMLA_SPARSE")
        main = next(n for n in (case.get("backend"), *prefer) if n in names)
    out = {"main": AttentionBackendEnum[main].get_class()}
    if sparse:
        from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerBackend

        out["indexer"] = DeepseekV32IndexerBackend
    if layer is not None:
        return [out["indexer"] if layer.endswith(".indexer.k_cache") else out["main"]]
    return list(out.values())


def _customize(case: dict, name: str, spec: object) -> object:
    """The worker's per-layer spec after its backend adjusts it (v1/worker/utils.py customize_attention_spec,
    from 0.32.0: e.g. the sparse MLA backends' block-stride alignment); a release without the step keeps the spec.
    Applied to a sparse-MLA model's caches, whose backends are the case's."""
    if not any(g.get("indexer") for g in case["layers"]):
        return spec
    try:
        from vllm.v1.worker.utils import customize_attention_spec
    except ImportError:
        return spec
    from vllm.v1.kv_cache_interface import AttentionSpec

    return customize_attention_spec(_backends(case, name)[0], spec) if isinstance(spec, AttentionSpec) else spec


def plan(case: dict, point: dict) -> dict:
    """One point: vLLM's planning, its start-up check and the numbers it logs."""
    from vllm.v1.core import kv_cache_utils as utils

    planning = utils
    with contextlib.suppress(ImportError):
        from vllm.v1.core import kv_cache_planning as planning  # 0.33.0 moved the planning here
    cfg = make_config(case, point)
    specs = make_specs(case, point)
    avail = [int(point["available"])] * len(specs)
    out: dict = {}
    if getattr(cfg.cache_config, "enable_extensible_kv_cache", None):
        out["extensible"] = True
    layout = _resolve_layout(cfg, case, specs)
    if layout:
        out["layout"] = layout
    try:
        if hasattr(planning, "get_global_kv_cache_groups"):
            groups = planning.get_global_kv_cache_groups(cfg, specs)
            configs = planning.get_kv_cache_configs(cfg, specs, avail, groups)
        else:
            configs = planning.get_kv_cache_configs(cfg, specs, avail)
    except ValueError as exc:
        frames = {f.name for f in traceback.extract_tb(exc.__traceback__)}
        if not any("check_enough_kv_cache_memory" in f for f in frames):
            raise  # not the start-up check: the point is recorded as an exception
        out["starts"] = False
        out["error"] = str(exc)
        return out
    sched = utils.generate_scheduler_kv_cache_config(configs)
    out["starts"] = True
    out["num_blocks"] = int(sched.num_blocks)
    out["groups"] = [{"spec": type(g.kv_cache_spec).__name__, "layers": len(g.layer_names),
                      "block": int(g.kv_cache_spec.block_size), "page": int(g.kv_cache_spec.page_size_bytes),
                      **_pages(w.kv_cache_spec)}
                     for g, w in zip(sched.kv_cache_groups, configs[0].kv_cache_groups, strict=True)]
    if hasattr(utils, "get_kv_cache_capacity"):
        tokens, conc = utils.get_kv_cache_capacity(cfg, sched)
    else:
        conc = utils.get_max_concurrency_for_kv_cache_config(cfg, sched)
        tokens = _old_tokens(utils, cfg, sched, conc)
    out["tokens"], out["concurrency"] = int(tokens), float(conc)
    return out


def _pages(spec: object) -> dict:
    """A worker group of one attention type with pages of different sizes (UniformTypeKVCacheSpecs): its layers'
    pages, [[page bytes, layers], ...] in registration order, and the bytes its block takes (page_size_bytes)."""
    per = getattr(spec, "kv_cache_specs", None)
    if not per:
        return {}
    runs: list[list[int]] = []
    for s in per.values():
        p = int(s.page_size_bytes)
        if not any(r[0] == p for r in runs):
            runs.append([p, 0])
        next(r for r in runs if r[0] == p)[1] += 1
    return {"uniform_type": True, "pages": runs, "block_bytes": int(spec.page_size_bytes)}


def _resolve_layout(cfg: object, case: dict, specs: list[dict]) -> str | None:
    """The KV cache layout, as the engine core resolves it before planning (releases that have the step), from the
    layouts of the backend the case names (FLASH_ATTN, or FLASHMLA for MLA)."""
    try:
        from vllm.v1.attention.backends import utils as butils
    except ImportError:
        return None
    if not hasattr(butils, "resolve_kv_cache_layout") or not hasattr(butils, "get_supported_kv_cache_layouts"):
        return None
    names = [x.name for x in butils.get_supported_kv_cache_layouts(_backends(case))]
    layout = butils.resolve_kv_cache_layout(cfg, [names], [s for w in specs for s in w.values()])
    return str(getattr(layout, "name", layout))


def _old_tokens(utils: object, cfg: object, sched: object, conc: float) -> int:
    """"GPU KV cache size" where the release computes it inline in _report_kv_cache_config."""
    src = inspect.getsource(utils._report_kv_cache_config) if hasattr(utils, "_report_kv_cache_config") else ""
    if "max_concurrency" in src and "max_model_len" in src and "num_tokens = int(" in src:
        return int(conc * cfg.model_config.max_model_len)
    groups = sched.kv_cache_groups
    return sched.num_blocks // len(groups) * min(g.kv_cache_spec.block_size for g in groups)


def run_case(case: dict) -> dict:
    points, groups = [], None
    for point in case["points"]:
        try:
            got = plan(case, point)
        except Exception as exc:  # a point vLLM cannot plan (recorded, not fatal)
            got = {"exception": f"{type(exc).__name__}: {str(exc)[:300]}"}
        g = got.pop("groups", None)
        if g is not None and groups is None:
            groups = g
        elif g is not None and g != groups:
            got["groups"] = g  # only where they differ from the case's first
        points.append({**point, **got})
    return {**{k: v for k, v in case.items() if k != "points"}, "groups": groups, "points": points}


def run(doc: dict) -> dict:
    from _vllm_grid import setup

    t0 = time.time()
    setup()
    import vllm
    from vllm.v1.core import kv_cache_utils as utils

    try:
        from vllm.v1.core import kv_cache_planning as planning
    except ImportError:
        planning = utils
    where = {"planning": planning.__name__, "global_groups": hasattr(planning, "get_global_kv_cache_groups"),
             "capacity": hasattr(utils, "get_kv_cache_capacity")}
    return {"vllm": vllm.__version__, "planning": where, "cases": [run_case(c) for c in doc["cases"]],
            "seconds": round(time.time() - t0, 1)}


if __name__ == "__main__":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    arg = sys.argv[1]
    doc = json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg)
    print("KB-KVPLAN " + json.dumps(run(doc if "cases" in doc else {"cases": [doc]})))
