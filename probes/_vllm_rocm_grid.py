"""Run under the interpreter that has vLLM installed (no GPU, no kbtool): vLLM's ROCm platform's attention-backend
choice over the same grid as _vllm_grid.py, for one AMD GPU architecture, printed as one JSON document. The
vllm-rocm-selector probe (probes/vllm_rocm_selector.py) starts it, one process per architecture.

vLLM's ROCm platform (vllm/platforms/rocm.py) reads the GPU's GCN architecture name once, when the module is
imported (amdsmi, else torch.cuda.get_device_properties(...).gcnArchName), and sets its gfx9/gfx942/gfx950 flags
from it. Without an AMD GPU, this script answers that question: amdsmi is not installed, and
torch.cuda.get_device_properties returns an object holding only the architecture, memory and CU count asked for.
The platform is then vLLM's own RocmPlatform with the device facts fixed; the priority lists, each backend's
`validate_configuration` and `get_valid_backends` are vLLM's. ROCm's AITER kernels are not installed here (the
stock wheel), so AITER paths read as vLLM reads them without AITER.

Usage: python _vllm_rocm_grid.py OUT.json.gz --arch gfx942
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _vllm_grid as grid

ARCHS = {"gfx90a": (9, 0, 64 * 2**30, 104), "gfx942": (9, 4, 192 * 2**30, 304),
         "gfx950": (9, 5, 288 * 2**30, 256), "gfx1100": (11, 0, 48 * 2**30, 96)}


def setup(arch: str) -> dict:
    spec = importlib.util.find_spec("vllm")
    assert spec and spec.origin
    grid.remember_failed_imports()
    grid.stub_libcuda(Path(spec.origin).parent.parent)
    import torch

    major, minor, memory, cus = ARCHS[arch]
    props = types.SimpleNamespace(gcnArchName=arch, name=f"grid {arch}", total_memory=memory,
                                  multi_processor_count=cus, major=major, minor=minor)
    torch.cuda.get_device_properties = lambda *a, **k: props  # type: ignore[assignment]
    torch.cuda.get_device_capability = lambda *a, **k: (major, minor)  # type: ignore[assignment]
    torch.cuda.get_device_name = lambda *a, **k: props.name  # type: ignore[assignment]
    import vllm.platforms as platforms
    import vllm.platforms.rocm as rocm
    from vllm.platforms.interface import DeviceCapability

    cap = DeviceCapability(major, minor)

    class RocmGrid(rocm.RocmPlatform):  # only the device facts differ from vLLM's ROCm platform
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return cap

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return str(props.name)

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return memory

    platforms.current_platform = RocmGrid()
    real = {name: getattr(torch, name) for name in ("empty", "zeros")}

    def on_meta(fn):
        def alloc(*args, **kwargs):
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "meta"
            return fn(*args, **kwargs)
        return alloc

    for name, fn in real.items():
        setattr(torch, name, on_meta(fn))
    try:
        for module in grid.WORKSPACE_MODULES:
            with contextlib.suppress(Exception):
                importlib.import_module(module)
    finally:
        for name, fn in real.items():
            setattr(torch, name, fn)
    return {"platform": RocmGrid, "cap": cap, "rocm": rocm}


def run(out_path: str, arch: str) -> None:
    t0 = time.time()
    env = setup(arch)
    import torch
    import vllm
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.v1.attention.selector import AttentionSelectorConfig

    platform, cap, rocm = env["platform"], env["cap"], env["rocm"]
    classes = grid.backends()
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}
    tables: dict[str, dict[tuple, int]] = {"reasons": {}, "reason_sets": {}, "priorities": {}}

    def intern(table: str, key: tuple) -> int:
        t = tables[table]
        if key not in t:
            t[key] = len(t)
        return t[key]

    def code(rs: list[str]) -> int:
        return intern("reason_sets", tuple(intern("reasons", (r,)) for r in rs))

    prio_fn = getattr(rocm, "_get_backend_priorities", None)
    prio_params = set(inspect.signature(prio_fn).parameters) if prio_fn else set()
    cfg_fields = set(AttentionSelectorConfig._fields)
    names = sorted(classes)
    import_errors = {n: c for n, c in classes.items() if isinstance(c, str)}
    rows = []
    with set_current_vllm_config(VllmConfig()):
        for layout, use_mla, use_sparse in grid.LAYOUTS:
            kvs = grid.KV_MLA if use_mla else grid.KV_DENSE
            for head in grid.HEAD_SIZES:
                for dt in grid.DTYPES:
                    for kv in kvs:
                        for block in grid.BLOCKS:
                            for sink in ((False, True) if layout == "dense" else (False,)):
                                cfg = AttentionSelectorConfig(**grid._accepted(
                                    cfg_fields, head_size=head, dtype=torch_dtype[dt], kv_cache_dtype=kv,
                                    block_size=block, use_mla=use_mla, has_sink=sink, use_sparse=use_sparse))
                                per = []
                                for n in names:
                                    c = classes[n]
                                    if isinstance(c, str):
                                        per.append(-1)
                                        continue
                                    try:
                                        rs = c.validate_configuration(device_capability=cap, **cfg._asdict())
                                    except Exception as exc:
                                        rs = [f"raised {type(exc).__name__}: {str(exc)[:200]}"]
                                    per.append(code(rs))
                                prio: list[str] = []
                                if prio_fn is not None:
                                    with contextlib.suppress(Exception):
                                        prio = [b.name for b in prio_fn(**grid._accepted(
                                            prio_params, use_mla=use_mla, use_sparse=use_sparse,
                                            use_kv_connector=False, head_size=head, kv_cache_dtype=kv,
                                            num_heads=grid.NUM_HEADS[layout], block_size=block))]
                                chosen = _choose(platform, cap, cfg, grid.NUM_HEADS[layout])
                                rows.append([arch, False, layout, head, dt, kv, block, sink, chosen,
                                             intern("priorities", tuple(prio)), per])
    doc = {
        "vllm": vllm.__version__,
        "platform": "rocm",
        "arch": arch,
        "commit": getattr(vllm, "__commit_id__", None) or grid._commit(),
        "torch": torch.__version__,
        "backends": names,
        "import_errors": import_errors,
        "columns": ["cc", "trtllm", "layout", "head_size", "dtype", "kv", "block", "sink", "selected",
                    "priority", "reasons"],
        "reasons": [k[0] for k in tables["reasons"]],
        "reason_sets": [list(k) for k in tables["reason_sets"]],
        "priorities": [list(k) for k in tables["priorities"]],
        "grid": {"cc": [arch], "head_size": grid.HEAD_SIZES, "dtype": grid.DTYPES, "kv_dense": grid.KV_DENSE,
                 "kv_mla": grid.KV_MLA, "block": grid.BLOCKS, "layout": [x[0] for x in grid.LAYOUTS],
                 "num_heads": grid.NUM_HEADS, "sink": "dense only", "trtllm": [False]},
        "seconds": round(time.time() - t0, 1),
        "rows": rows,
    }
    import gzip

    with gzip.open(out_path, "wt", encoding="utf-8", compresslevel=9) as fh:
        fh.write(json.dumps(doc, separators=(",", ":")))


def _choose(platform: object, cap: object, cfg: object, num_heads: int) -> str | None:
    """The backend vLLM's ROCm platform picks with no backend named: the valid one of lowest priority index
    (get_valid_backends), else the class get_attn_backend_cls names (older releases), else what it raised."""
    try:
        if hasattr(platform, "get_valid_backends"):
            valid, _ = platform.get_valid_backends(device_capability=cap, attn_selector_config=cfg,  # type: ignore[attr-defined]
                                                   num_heads=num_heads)
            return grid._first(valid)
        path = platform.get_attn_backend_cls(None, cfg, num_heads)  # type: ignore[attr-defined]
        return str(path).rsplit(".", 1)[-1]
    except Exception as exc:
        return f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


if __name__ == "__main__":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    args = sys.argv[1:]
    run(args[0], args[args.index("--arch") + 1] if "--arch" in args else "gfx942")
