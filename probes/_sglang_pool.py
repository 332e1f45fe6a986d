"""Run under the interpreter that has SGLang installed (no GPU, no kbtool): SGLang's own launch defaults and KV pool
planning for every recorded accelerator x recorded model x launch line, over a grid of available-memory points.

Usage: python _sglang_pool.py IN.json OUT.json.gz

IN.json (written by probes/sglang_pool.py from kb's records): {"accelerators": {id: {name, memory_mib, capability,
sms}}, "models": {id: config.json dict}, "variants": [argv tails], "fractions": [available / pre-load memory]}.

Per accelerator the worker presents the device as probes/_sglang_grid.py does (`_patch_platform`: torch.cuda's
device name, total memory, capability and SM count, SGLang's platform probes and runtime context), then per model
and launch line:
1. resolves `sglang serve --model-path M <variant>` through SGLang's ServerArgs (0.5.23 `resolve_once()`, 0.5.17
   `__post_init__`) and records the defaults it resolves: attention backends, page size, KV dtype,
   mem_fraction_static, chunked_prefill_size, max_running_requests, the CUDA-graph sizes, the context length, the
   sliding-window and Mamba ratios, and whether the post-capture KV resize is planned;
2. builds SGLang's own `ModelConfig`, `ModelLayerInfo` (model_runner_components/layer_setup.py
   resolve_layer_indices), KV dtype (mem_cache/kv_cache_dtype.py configure_kv_cache_dtype) and
   `KVCacheConfigurator` as ModelRunner does (model_runner.py init_kv_cache_configurator), with model=None (no
   weights: no quantized-KV scales and no model-specific sliding-window hook);
3. for each fraction f: `pre = capacity - 687 MiB` (the CUDA context kb measured on the H200 boots) and
   `available = pre x f` (the free memory after the weights load), calls the configurator's own
   `_resolve_memory_pool_config(pre)` with `get_available_gpu_memory` answering `available`, and records
   max_total_num_tokens, max_running_requests, the full / SWA token counts, the Mamba state slots, the bytes per
   token of SGLang's pool configurator, or the exception SGLang raises (type and exact message).
Tensor parallelism is 1 (one process, no process group): the world group is stated as a single rank.
Steps 2 and 3 run under the environment step 1 left, as a launch does (SGLang's resolution sets variables: Qwen3-VL
on a large Hopper GPU sets SGLANG_VLM_CACHE_SIZE_MB=0 from 0.5.20); each launch line starts from the worker's own
environment. Recorded messages name the temporary model folder `<models>`, so they are the same on every run.

Output: {"sglang", "torch", "python", "context_mib", "accelerators", "variants", "fractions", "models" (id ->
{"context_len", ...}), "rows": [[accelerator, model, variant index, defaults or {"error", "message", "where"},
[per fraction: pool or {"error", "message"}]]], "resolution_env": "kept", "model_root": "<models>", "seconds"}
(recordings without "resolution_env" sized the pool after restoring the environment the resolution set).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import importlib
import io
import json
import logging
import os
import pkgutil
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _sglang_grid as grid

CONTEXT_MIB = 687  # CUDA context + torch before the load: 139.80 - 139.13 GiB on the SGLang H200 boots
DEFAULT_FIELDS = ("attention_backend", "prefill_attention_backend", "decode_attention_backend", "page_size",
                  "kv_cache_dtype", "chunked_prefill_size", "mem_fraction_static", "max_running_requests",
                  "max_prefill_tokens", "context_length", "swa_full_tokens_ratio", "mamba_full_memory_ratio",
                  "max_mamba_cache_size", "disable_radix_cache", "disable_hybrid_swa_memory", "max_total_tokens",
                  "cuda_graph_max_bs", "mamba_radix_cache_strategy", "mamba_scheduler_strategy")


def _jsonable(v):
    return grid._jsonable(v)


def _resolve(res, argv):
    raw = res.parser.parse_args(argv)
    raw._radix_eviction_policy_explicitly_set = False
    sa = res.sa_mod.ServerArgs.from_cli_args(raw)
    if hasattr(sa, "resolve_once"):
        sa.resolve_once()
    if hasattr(sa, "resolved_dict"):
        d = sa.resolved_dict()
    else:
        d = {f.name: grid._plain(getattr(sa, f.name)) for f in dataclasses.fields(sa)}
    return sa, d


def _publish(sa) -> None:
    """Make `sa` the process's server args (what the scheduler process does before building the runner)."""
    with contextlib.suppress(ImportError):
        from sglang.srt.runtime_context import get_context

        get_context().set_server_args(sa)
        with contextlib.suppress(Exception):
            from sglang.srt.runtime_context import get_parallel

            get_parallel().override_permanently(world_group=types.SimpleNamespace(cpu_group=None, world_size=1))
    with contextlib.suppress(Exception):
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        set_global_server_args_for_scheduler(sa)


def _schedule():
    from sglang.srt.runtime_context import get_schedule

    return get_schedule()


def _configurator(sa, kcc):
    """SGLang's KVCacheConfigurator for `sa`, built as ModelRunner.init_kv_cache_configurator builds it."""
    from sglang.srt.configs.model_config import AttentionArch, ModelConfig
    from sglang.srt.mem_cache import kv_cache_dtype as kvd
    from sglang.srt.model_executor.model_runner_components.kv_pool_runtime import is_post_capture_kv_active
    from sglang.srt.model_executor.model_runner_components.layer_setup import resolve_layer_indices
    from sglang.srt.runtime_context import get_model
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    mc = ModelConfig.from_server_args(sa)
    import inspect

    algo = SpeculativeAlgorithm.from_string(None)
    li_kwargs = dict(model=None, model_config=mc, is_draft_worker=False, spec_algorithm=algo)
    li_params = set(inspect.signature(resolve_layer_indices).parameters)
    layer_info = resolve_layer_indices(**{k: v for k, v in li_kwargs.items() if k in li_params})
    kv_kwargs = dict(server_args_kv_cache_dtype=get_model().kv_cache_dtype, model=None, model_dtype=mc.dtype,
                     is_draft_worker=False, is_dflash=False, speculative_draft_attention_backend=None)
    accepted = set(inspect.signature(kvd.configure_kv_cache_dtype).parameters)
    resolved_str, kv_dtype = kvd.configure_kv_cache_dtype(**{k: v for k, v in kv_kwargs.items() if k in accepted})
    pca_params = set(inspect.signature(is_post_capture_kv_active).parameters)
    pca = is_post_capture_kv_active(**{k: v for k, v in dict(
        server_args=sa, is_draft_worker=False, spec_algorithm=algo, token_to_kv_pool_allocator=None).items()
        if k in pca_params})

    sliding = mc.sliding_window_size if mc.is_hybrid_swa and mc.sliding_window_size is not None else \
        getattr(mc, "attention_chunk_size", None)
    kwargs = dict(
        device="cuda", gpu_id=0, attn_dp_size=1, pp_size=1, pp_group=None, model=None, model_config=mc,
        server_args=sa, kv_cache_dtype=kv_dtype, kv_cache_dtype_str=resolved_str or get_model().kv_cache_dtype,
        model_dtype=mc.dtype, page_size=_schedule().page_size, sliding_window_size=sliding, spec_algorithm=algo,
        is_draft_worker=False, post_capture_kv_active=pca, spec_aux_config=None, is_hybrid_swa=mc.is_hybrid_swa,
        is_hybrid_swa_compress=getattr(mc, "is_hybrid_swa_compress", False),
        use_mla_backend=mc.attention_arch == AttentionArch.MLA, layer_info=layer_info, forward_stream=None,
        req_to_token_pool=None, token_to_kv_pool_allocator=None, memory_pool_config=None, draft_model_idx=None)
    names = {f.name for f in dataclasses.fields(kcc.KVCacheConfigurator) if f.init}
    if "ps" in names:  # 0.5.17: the parallel state is passed in
        from sglang.srt.distributed.parallel_state_wrapper import ParallelState

        kwargs["ps"] = ParallelState.trivial()
    kvc = kcc.KVCacheConfigurator(**{k: v for k, v in kwargs.items() if k in names})
    facts = {"context_len": mc.context_len, "kv_torch_dtype": str(kv_dtype).replace("torch.", ""),
             "is_hybrid_swa": bool(mc.is_hybrid_swa), "mla": mc.attention_arch == AttentionArch.MLA,
             "sliding_window_size": sliding, "post_capture_kv_active": bool(pca),
             "num_effective_layers": layer_info.num_effective_layers, "mamba": kvc.mambaish_config is not None}
    return kvc, facts


def _pool(kvc, kcc, pc, sa, pre_gib: float, avail_gib: float, root: Path) -> dict:
    _publish(sa)  # clears the overrides a previous point left (max_mamba_cache_size)
    kcc.get_available_gpu_memory = lambda *a, **k: avail_gib
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            cfg = kvc._resolve_memory_pool_config(pre_gib)
    except Exception as exc:  # SGLang's start-up refusal: recorded as it is raised
        return _refused(exc, root, 800)
    out = {"max_total_num_tokens": cfg.max_total_num_tokens, "max_running_requests": cfg.max_running_requests}
    for k in ("full_max_total_num_tokens", "swa_max_total_num_tokens"):
        if getattr(cfg, k, None) is not None:
            out[k] = getattr(cfg, k)
    if kvc.mambaish_config is not None:
        out["max_mamba_cache_size"] = _schedule().max_mamba_cache_size
    return out


def _cell(kvc, pc) -> dict:
    """The bytes per token of SGLang's pool configurator for this model (what kb's pool replays)."""
    try:
        conf = pc.create_memory_pool_configurator(kvc)
    except Exception as exc:
        return {"configurator_error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    out = {"configurator": type(conf).__name__}
    for k in ("_cell_size", "full_cell_size", "swa_cell_size", "_full_cell_size", "_swa_cell_size",
              "swa_full_tokens_ratio", "full_per_token", "swa_per_token"):
        v = getattr(conf, k, None)
        if isinstance(v, (int, float)):
            out[k.lstrip("_")] = v
    return out


RESOLUTION_ENV = "kept"  # the configurator and the pool run under the environment the resolution left (a launch does)
MODEL_ROOT = "<models>"  # what the recorded messages say in place of the worker's temporary model folder


def _reset_env(env: dict) -> None:
    os.environ.clear()
    os.environ.update(env)


def stable(text: str, root: Path) -> str:
    """`text` with the worker's temporary model folder named MODEL_ROOT: a recorded message is the same on every
    run (the folder is a fresh temporary directory each time)."""
    return text.replace(str(root), MODEL_ROOT)


def _refused(exc: BaseException, root: Path, limit: int) -> dict:
    return {"error": type(exc).__name__, "message": stable(str(exc), root)[:limit], "where": grid._where(exc)}


def _row(acc, m, vi, argv, res, kcc, pc, spec, pre_gib, root, base_env, models) -> list:
    """One launch line on one accelerator: SGLang's resolution, then its configurator and pool at every fraction,
    all under the environment the resolution left (SGLang's resolution sets variables a launch keeps: Qwen3-VL on a
    large Hopper GPU turns the embedding cache off with SGLANG_VLM_CACHE_SIZE_MB=0, 0.5.20 qwen3_vl.py:96-98). The
    line starts from `base_env`, so no line sees what an earlier one set."""
    _reset_env(base_env)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            sa, d = _resolve(res, argv)
            _publish(sa)
    except SystemExit:
        return [acc, m, vi, {"error": "SystemExit", "message": "argparse refused"}, []]
    except Exception as exc:  # SGLang refuses the launch line: its error, as raised
        return [acc, m, vi, _refused(exc, root, 600), []]
    env = dict(os.environ)  # the resolution's environment
    defaults = {k: _jsonable(d.get(k)) for k in DEFAULT_FIELDS if k in d}
    defaults.update(_jsonable(grid._graph(d)))
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            kvc, facts = _configurator(sa, kcc)
    except Exception as exc:  # the pool could not be planned without the model's weights / a GPU
        defaults["unplanned"] = stable(f"{type(exc).__name__}: {str(exc)[:300]} ({grid._where(exc)})", root)
        return [acc, m, vi, defaults, []]
    defaults.update(facts)
    defaults.update(_cell(kvc, pc))
    models.setdefault(m, {"context_len": facts["context_len"]})
    pools = []
    for f in spec["fractions"]:
        _reset_env(env)  # each point as the launch would size it: what a previous point set is gone
        pools.append(_pool(kvc, kcc, pc, sa, pre_gib, pre_gib * f, root))
    return [acc, m, vi, defaults, pools]


def main(inp: str, out_path: str) -> None:
    t0 = time.time()
    logging.disable(logging.CRITICAL)
    warnings.filterwarnings("ignore")
    spec = json.loads(Path(inp).read_text())
    import torch

    grid._torchvision_without_ops()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import sglang
        import sglang.srt.arg_groups as groups
        import sglang.srt.configs.model_config
        import sglang.srt.server_args

        for mod in pkgutil.walk_packages(groups.__path__, "sglang.srt.arg_groups."):
            with contextlib.suppress(Exception):
                importlib.import_module(mod.name)
        import sglang.srt.mem_cache.kv_cache_configurator as kcc
        import sglang.srt.model_executor.pool_configurator as pc
    grid.cache_struct_fields()  # the same fields, built once per class (see there)
    # _profile_available_bytes starts with gc.collect() (to free weight-loading temporaries on a GPU); with no
    # weights loaded it only costs a second per point
    kcc.gc = types.SimpleNamespace(collect=lambda *a: 0)
    if hasattr(kcc, "get_world_group"):  # 0.5.17 reads the process groups: every one is this single rank
        from sglang.srt.distributed import parallel_state as ps

        one = types.SimpleNamespace(world_size=1, rank_in_group=0, rank=0, local_rank=0, ranks=[0], cpu_group=None,
                                    device_group=None)
        for name, value in list(vars(ps).items()):
            if name.startswith("_") and name[1:].replace("_", "").isupper() and value is None:
                setattr(ps, name, one)
        kcc.get_world_group = lambda: one
    root = Path(tempfile.mkdtemp(prefix="kb-sglang-pool-"))
    grid.MODELS = spec["models"]
    paths = grid._write_models(root)
    res = grid.Resolver()
    imports = grid.FailedImports()  # cleared per accelerator: the platform each one presents changes what imports
    variants = [tuple(v) for v in spec["variants"]]
    # warm-up in the machine's own state (see _sglang_grid.worker): lazily imported modules load without a GPU
    for m in paths:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            res(grid._argv(paths, m, "base", ()))
    rows, models = [], {}
    base_env = dict(os.environ)  # the probe's own environment: every launch line starts from it
    for acc, a in spec["accelerators"].items():
        grid.PLATFORMS[acc] = ("cuda", tuple(a["capability"]), a["name"], a["memory_mib"], a["sms"], "")
        imports.clear()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            grid._patch_platform(acc)
        pre_gib = (a["memory_mib"] - CONTEXT_MIB) / 1024
        for m in paths:
            for vi, tail in enumerate(variants):
                rows.append(_row(acc, m, vi, grid._argv(paths, m, "base", tail), res, kcc, pc, spec, pre_gib, root,
                                 base_env, models))
        print(f"{acc}: {len(rows)} rows, {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    _reset_env(base_env)
    doc = {"sglang": sglang.__version__, "torch": torch.__version__, "python": sys.version.split()[0],
           "context_mib": CONTEXT_MIB, "accelerators": spec["accelerators"], "variants": spec["variants"],
           "fractions": spec["fractions"], "models": models, "resolution_env": RESOLUTION_ENV,
           "model_root": MODEL_ROOT, "failed_imports_not_run_again": imports.hits,
           "columns": ["accelerator", "model", "variant", "defaults", "pools"], "rows": rows,
           "seconds": round(time.time() - t0, 1)}
    with gzip.open(out_path, "wt", encoding="utf-8", compresslevel=9) as fh:
        fh.write(json.dumps(doc, separators=(",", ":")))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    main(sys.argv[1], sys.argv[2])
