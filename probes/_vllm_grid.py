"""Run under the interpreter that has vLLM installed (no GPU, no kbtool): vLLM's own attention-backend checks
over a grid, printed as one JSON document. The vllm-selector probe (probes/vllm_selector.py) starts it.

What importing vLLM without a GPU takes, all undone by nothing (the process exits afterwards):
- a stub libcuda.so.1 (built here with the C compiler) exporting the driver symbols the extensions link, each
  returning CUDA_ERROR_NO_DEVICE, so that vLLM's compiled extensions load;
- CUDA_VISIBLE_DEVICES="" (set by the caller);
- vLLM's current platform replaced by a subclass of its own CUDA platform that only answers compute
  capability, device name, memory and SM count;
- the module-level workspace allocations of the CUTLASS MLA and FlashInfer MLA backends (torch.empty,
  torch.zeros on "cuda") sent to the meta device while importing them;
- FlashInfer's TRT-LLM availability (`has_nvidia_artifactory`) decided by the grid, not by the network;
- a module whose import failed once fails again at once, with the same exception (remember_failed_imports):
  backends' checks import FlashInfer, ROCm and cutlass-dsl modules that cannot load here at every grid point, and
  executing them again each time made one compute capability take longer than the case's limit (issue 46).

Usage: python _vllm_grid.py OUT.json [--cc 9.0 ...] [--quick]
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CCS = [(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]
HEAD_SIZES = [64, 80, 96, 128, 192, 256, 512, 576]
DTYPES = ["bfloat16", "float16"]
KV_DENSE = ["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4"]
KV_MLA = [*KV_DENSE, "fp8_ds_mla"]
BLOCKS = [None, 16, 32, 64, 128]
LAYOUTS = [("dense", False, False), ("mla", True, False), ("sparse", True, True)]
# use_mm_prefix: vLLM sets it for multimodal prefix-LM models (ModelConfig.is_mm_prefix_lm: Gemma 3, PaliGemma,
# Molmo2, ...; model_executor/layers/attention/attention.py passes it); only dense layers read it (issue 44)
MM_PREFIX = {"dense": (False, True), "mla": (False,), "sparse": (False,)}
# has_sliding_window: vLLM 0.26.0 on passes it for a layer with a window (attention.py: `sliding_window is not None`)
# and each backend's validate_configuration refuses it unless the backend declares supports_sliding_window (issue
# 46). Asked wherever the release's AttentionSelectorConfig has the field: at every dense point (sliding-window
# models are dense: Gemma 2/3, gpt-oss with sinks, Mistral; Gemma 3 also with use_mm_prefix), and at MLA and sparse
# MLA points at bfloat16 without a block size only (the refusal is a class-level flag, read beside the other
# axes; no recorded model has a windowed MLA layer), so the grid grows by 3,392 points a compute capability, not 5,120
SLIDING = {"dense": (False, True), "mla": (False, True), "sparse": (False, True)}
SLIDING_MLA_AT = {"dtype": "bfloat16", "block": None}
NUM_HEADS = {"dense": 32, "mla": 128, "sparse": 128}  # passed to the priority lists (they read it for sparse)
WORKSPACE_MODULES = ["vllm.v1.attention.backends.mla.cutlass_mla", "vllm.v1.attention.backends.mla.flashinfer_mla"]
DRIVER_SYMBOLS_EXTRA = ["cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuGetProcAddress", "cuDriverGetVersion"]


def _needed_driver_symbols(site: Path) -> list[str]:
    """Driver API symbols (cuXxx) that shared objects linked against libcuda.so.1 import."""
    names = set(DRIVER_SYMBOLS_EXTRA)
    for so in site.rglob("*.so"):
        try:
            head = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        if "libcuda.so" not in head:
            continue
        undefined = subprocess.run(["nm", "-D", "--undefined-only", str(so)], capture_output=True, text=True,
                                   timeout=20).stdout
        for line in undefined.splitlines():
            sym = line.split()[-1].split("@")[0]
            if sym.startswith("cu") and len(sym) > 2 and sym[2].isupper():
                names.add(sym)
    return sorted(names)


def stub_libcuda(site: Path) -> Path:
    """Build the stub once per site-packages (scanning every shared object is slow) and load it."""
    import hashlib

    key = hashlib.sha256(str(site.resolve()).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"kb-libcuda-{key}"
    lib = folder / "libcuda.so.1"
    if not lib.exists():
        build = Path(tempfile.mkdtemp(prefix="kb-libcuda-build-"))
        body = "\n".join(f"int {s}(void) {{ return 100; }}" for s in _needed_driver_symbols(site))
        (build / "stub.c").write_text(body + "\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(build / "libcuda.so.1"),
                        str(build / "stub.c")], check=True)
        folder.mkdir(exist_ok=True)
        os.replace(build / "libcuda.so.1", lib)  # atomic: a concurrent run sees the whole file or none
        shutil.rmtree(build, ignore_errors=True)
    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)  # later dlopen("libcuda.so.1") finds it by soname
    return lib


def remember_failed_imports() -> dict[str, BaseException]:
    """From now on, importing a module whose import raised before raises that exception again without executing
    it (nor the modules it imports) again. Python keeps no record of a failed import, so every `import flashinfer`
    in a backend's check ran FlashInfer's package again (seconds each, at thousands of points). An import that
    fails here fails the same way each time in this process (no GPU, fixed packages), so the outcome is the same.
    A module not found is not remembered (looking it up is cheap)."""
    import importlib._bootstrap as bootstrap

    failed: dict[str, BaseException] = {}
    real = bootstrap._find_and_load  # what both `import` statements and importlib.import_module call

    def find_and_load(name, import_):
        if name in failed and name not in sys.modules:
            raise failed[name].with_traceback(None)
        try:
            return real(name, import_)
        except ModuleNotFoundError:
            raise  # cheap to look up again, and a namespace package may resolve later: not remembered
        except Exception as exc:  # the module ran and raised: what is costly to run again
            failed[name] = exc
            raise

    bootstrap._find_and_load = find_and_load
    return failed


def setup() -> dict:
    import importlib
    import importlib.util

    remember_failed_imports()

    spec = importlib.util.find_spec("vllm")
    assert spec and spec.origin
    site = Path(spec.origin).parent.parent
    stub_libcuda(site)
    import torch
    import vllm.platforms as platforms
    from vllm.platforms.cuda import NonNvmlCudaPlatform
    from vllm.platforms.interface import DeviceCapability

    class GridPlatform(NonNvmlCudaPlatform):  # only the device facts differ from vLLM's CUDA platform
        cap = DeviceCapability(9, 0)

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return cls.cap

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return f"grid cc {cls.cap.major}.{cls.cap.minor}"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return 80 * 2**30

        @classmethod
        def num_compute_units(cls, device_id: int = 0) -> int:
            return 132

    platforms.current_platform = GridPlatform()
    real = {name: getattr(torch, name) for name in ("empty", "zeros")}

    def on_meta(fn):
        def alloc(*args, **kwargs):  # cutlass_mla.py and (0.19.1) flashinfer_mla.py allocate a CUDA workspace at import
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "meta"
            return fn(*args, **kwargs)
        return alloc

    for name, fn in real.items():
        setattr(torch, name, on_meta(fn))
    try:
        for module in WORKSPACE_MODULES:
            with contextlib.suppress(Exception):  # an import that fails is recorded per backend below
                importlib.import_module(module)
    finally:
        for name, fn in real.items():
            setattr(torch, name, fn)
    return {"GridPlatform": GridPlatform, "DeviceCapability": DeviceCapability}


def backends() -> dict[str, object]:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    out: dict[str, object] = {}
    for member in AttentionBackendEnum:
        if not member.value:
            continue
        try:
            out[member.name] = member.get_class()
        except Exception as exc:
            out[member.name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return out


def run(out_path: str, ccs: list[tuple[int, int]]) -> None:
    t0 = time.time()
    env = setup()
    import torch
    import vllm
    import vllm.utils.flashinfer as fi
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.platforms import cuda as cuda_mod
    from vllm.v1.attention.selector import AttentionSelectorConfig

    GridPlatform, DeviceCapability = env["GridPlatform"], env["DeviceCapability"]
    classes = backends()
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}
    tables: dict[str, dict[tuple, int]] = {"reasons": {}, "reason_sets": {}, "priorities": {}}

    def intern(table: str, key: tuple) -> int:
        t = tables[table]
        if key not in t:
            t[key] = len(t)
        return t[key]

    def code(rs: list[str]) -> int:
        return intern("reason_sets", tuple(intern("reasons", (r,)) for r in rs))

    import inspect

    prio_params = set(inspect.signature(cuda_mod._get_backend_priorities).parameters)
    cfg_fields = set(AttentionSelectorConfig._fields)
    has_swa = "has_sliding_window" in cfg_fields
    names = sorted(classes)
    import_errors = {n: c for n, c in classes.items() if isinstance(c, str)}
    rows = []
    with set_current_vllm_config(VllmConfig()):
        for major, minor in ccs:
            cap = DeviceCapability(major, minor)
            GridPlatform.cap = cap
            for trtllm in (False, True):
                fi.has_nvidia_artifactory.cache_clear()
                fi.supports_trtllm_attention.cache_clear()
                fi.has_nvidia_artifactory = _const(trtllm, fi.has_nvidia_artifactory)
                for layout, use_mla, use_sparse in LAYOUTS:
                    kvs = KV_MLA if use_mla else KV_DENSE
                    for head in HEAD_SIZES:
                        for dt in DTYPES:
                            for kv in kvs:
                                for block in BLOCKS:
                                    for sink, mm, swa in _sink_mm_swa(layout, "use_mm_prefix" in cfg_fields,
                                                                      has_swa, dt, block):
                                        cfg = AttentionSelectorConfig(**_accepted(
                                            cfg_fields, head_size=head, dtype=torch_dtype[dt], kv_cache_dtype=kv,
                                            block_size=block, use_mla=use_mla, has_sink=sink,
                                            use_sparse=use_sparse, use_mm_prefix=mm, has_sliding_window=swa))
                                        per = []
                                        for n in names:
                                            c = classes[n]
                                            if isinstance(c, str):
                                                per.append(-1)
                                                continue
                                            try:
                                                rs = c.validate_configuration(device_capability=cap,
                                                                              **cfg._asdict())
                                            except Exception as exc:
                                                rs = [f"raised {type(exc).__name__}: {str(exc)[:200]}"]
                                            per.append(code(rs))
                                        prio = [b.name for b in cuda_mod._get_backend_priorities(
                                            use_mla, cap, **_accepted(prio_params, num_heads=NUM_HEADS[layout],
                                                                      kv_cache_dtype=kv, head_size=head))]
                                        try:
                                            valid, _ = GridPlatform.get_valid_backends(
                                                device_capability=cap, attn_selector_config=cfg,
                                                num_heads=NUM_HEADS[layout])
                                            chosen = _first(valid)
                                        except Exception as exc:
                                            chosen = f"raised {type(exc).__name__}"
                                        row = [f"{major}.{minor}", trtllm, layout, head, dt, kv, block, sink,
                                               chosen, intern("priorities", tuple(prio)), per, mm]
                                        rows.append([*row, swa] if has_swa else row)
    doc = {
        "vllm": vllm.__version__,
        "commit": getattr(vllm, "__commit_id__", None) or _commit(),
        "torch": torch.__version__,
        "backends": names,
        "import_errors": import_errors,
        "columns": ["cc", "trtllm", "layout", "head_size", "dtype", "kv", "block", "sink", "selected",
                    "priority", "reasons", "mm_prefix", *(["sliding_window"] if has_swa else [])],
        "reasons": [k[0] for k in tables["reasons"]],
        "reason_sets": [list(k) for k in tables["reason_sets"]],
        "priorities": [list(k) for k in tables["priorities"]],
        "grid": {"cc": [f"{a}.{b}" for a, b in ccs], "head_size": HEAD_SIZES, "dtype": DTYPES,
                 "kv_dense": KV_DENSE, "kv_mla": KV_MLA, "block": BLOCKS, "layout": [x[0] for x in LAYOUTS],
                 "num_heads": NUM_HEADS, "sink": "dense only", "trtllm": [False, True],
                 "mm_prefix": ("dense only" if "use_mm_prefix" in cfg_fields else "not a selector field"),
                 **({"sliding_window": SLIDING_AXIS} if has_swa else {})},
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


SLIDING_AXIS = "dense: every point; mla, sparse: bfloat16, block None"
"""How the grid asks has_sliding_window (the grid's `sliding_window` entry; the solver reads it to know a point
off these was not asked)."""


def _sink_mm_swa(layout: str, has_mm: bool, has_swa: bool, dtype: str,
                 block: int | None) -> list[tuple[bool, bool, bool]]:
    """(has_sink, use_mm_prefix, has_sliding_window) asked at a point: sinks and the multimodal prefix mask are
    dense-only axes; use_mm_prefix and has_sliding_window only where the release's AttentionSelectorConfig has the
    field (False is then its default); a sliding window at every dense point, at MLA points at SLIDING_MLA_AT."""
    sinks = (False, True) if layout == "dense" else (False,)
    mms = MM_PREFIX[layout] if has_mm else (False,)
    swas = SLIDING[layout] if has_swa and (layout == "dense" or (
        dtype == SLIDING_MLA_AT["dtype"] and block == SLIDING_MLA_AT["block"])) else (False,)
    return [(s, m, w) for s in sinks for m in mms for w in swas]


def _first(valid: list) -> str | None:
    """The valid backend of lowest priority index (0.33.0 returns candidates, older releases (enum, index))."""
    if not valid:
        return None
    pairs = [(v.priority, v.backend) if hasattr(v, "priority") else (v[1], v[0]) for v in valid]
    return min(pairs, key=lambda p: p[0])[1].name


def _accepted(names: set[str], **kwargs: object) -> dict[str, object]:
    """The keyword arguments a function of this release takes (signatures change between releases)."""
    return {k: v for k, v in kwargs.items() if k in names}


def _const(value: bool, old: object) -> object:
    def has_nvidia_artifactory() -> bool:
        return value

    has_nvidia_artifactory.cache_clear = lambda: None  # type: ignore[attr-defined]
    return has_nvidia_artifactory


def _commit() -> str | None:
    try:
        from vllm._version import __commit_id__  # type: ignore[attr-defined]

        return str(__commit_id__)
    except Exception:
        return None


if __name__ == "__main__":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    args = sys.argv[1:]
    ccs = CCS
    if "--cc" in args:
        i = args.index("--cc")
        ccs = [tuple(int(x) for x in c.split(".")) for c in args[i + 1].split(",")]  # type: ignore[misc]
    run(args[0], ccs)  # type: ignore[arg-type]
