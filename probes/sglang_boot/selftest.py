#!/usr/bin/env python3
"""Prove, with no GPU, that the SGLang boot bundle imports what a boot of every case imports.

usage: python3.12 probes/sglang_boot/selftest.py SITE [--host DIR] [--cases FILE] [--modules-out FILE]

SITE is the unpacked bundle (probes/sglang_boot/pack.sh: WORK/site, or a folder the tarball was unpacked into).
--host DIR is a site-packages that stands for what the GPU host has preinstalled (torch 2.11 cu130, triton, numpy,
the nvidia-* libraries ...); it is put after SITE on the path, as PYTHONPATH puts /tmp/sgl-site before the host's
own site-packages there. Run it under `python3.12 -S` so that nothing else is importable.

What it does, in order (each step prints one line; the exit code is the number of failed steps):
 1. loads a stub libcuda.so.1 (every cuXxx symbol the bundle's shared objects import, each returning an error
    code), so that sgl_kernel's and FlashInfer's extension modules link as they do on the host;
 2. makes torch.cuda answer as one H200 does (is_available, device_count, current_device, capability (9, 0),
    device name and properties, mem_get_info): sgl_kernel picks its sm90/ build from the capability
    (sgl_kernel/load_utils.py `_load_architecture_specific_ops`), SGLang's import-time `_is_cuda` checks and
    the server-args resolution read the rest;
 3. imports `sglang`, the offline Engine (sglang.srt.entrypoints.engine), the scheduler, the model runner, the
    KV-pool and cuda-graph modules, the attention backends the cases use, and the model module of every case's
    architecture (through SGLang's own ModelRegistry, as the scheduler resolves it);
 4. builds ServerArgs for every case of cases.json (the flags boot_case.py passes, model_path the case's config
    folder), which runs SGLang's argument resolution and its lazy imports, and prints the resolved attention
    backend, page size, KV dtype, mem_fraction_static, chunked_prefill_size and cuda_graph_max_bs;
 5. lists the top-level packages that were imported (pack.sh keeps those; --modules-out writes them).
A missing module fails the step that needed it and is named.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
H200_BYTES = 150_000_000_000  # about what torch reports for an H200 (143771 MiB)


def stub_libcuda(dirs: list[Path]) -> Path:
    names = {"cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuGetProcAddress", "cuDriverGetVersion"}
    for d in dirs:
        for so in d.rglob("*.so*"):
            if not so.is_file():
                continue
            head = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True).stdout
            if "libcuda.so" not in head:
                continue
            out = subprocess.run(["nm", "-D", "--undefined-only", str(so)], capture_output=True, text=True).stdout
            for line in out.splitlines():
                sym = line.split()[-1].split("@")[0]
                if sym.startswith("cu") and len(sym) > 2 and sym[2].isupper():
                    names.add(sym)
    build = Path(tempfile.mkdtemp(prefix="sgl-libcuda-"))
    (build / "stub.c").write_text("".join(f"int {s}(void) {{ return 100; }}\n" for s in sorted(names)))
    lib = build / "libcuda.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(lib), str(build / "stub.c")],
                   check=True)
    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
    return lib


def patch_torch_cuda() -> None:
    import torch

    class Props:
        name = "NVIDIA H200"
        major, minor = 9, 0
        total_memory = H200_BYTES
        multi_processor_count = 132
        gcnArchName = ""
        L2_cache_size = 60 * 2**20
        uuid = "GPU-00000000-0000-0000-0000-000000000000"
        warp_size = 32

    tc = torch.cuda
    tc.is_available = lambda: True
    tc.device_count = lambda: 1
    tc.current_device = lambda: 0
    tc.is_initialized = lambda: True
    tc.get_device_capability = lambda device=None: (9, 0)
    tc.get_device_name = lambda device=None: Props.name
    tc.get_device_properties = lambda device=None: Props()
    tc.mem_get_info = lambda device=None: (H200_BYTES - 2**30, H200_BYTES)
    tc.set_device = lambda device: None


MODULES = [
    "sglang",
    "sglang.srt.server_args",
    "sglang.srt.entrypoints.engine",
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.tokenizer_manager",
    "sglang.srt.managers.detokenizer_manager",
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.model_executor.runner.decode_cuda_graph_runner",
    "sglang.srt.mem_cache.memory_pool",
    "sglang.srt.mem_cache.kv_cache_configurator",
    "sglang.srt.model_loader.loader",
    "sglang.srt.managers.tp_worker",
    "sglang.srt.constrained.xgrammar_backend",
    "sglang.srt.model_executor.runner.prefill_cuda_graph_runner",
    "sglang.srt.layers.sampler",
    "sglang.srt.layers.logits_processor",
    "sglang.srt.layers.attention.attention_registry",
    "sglang.srt.layers.attention.flashattention_backend",
    "sglang.srt.layers.attention.flashinfer_backend",
    "sglang.srt.layers.attention.flashinfer_mla_backend",
    "sglang.srt.layers.attention.triton_backend",
    "sglang.srt.layers.quantization.fp8",
    "sglang.srt.layers.quantization.mxfp4",
    "sglang.srt.layers.moe.fused_moe_triton",
    "sgl_kernel",
    "sgl_kernel.flash_attn",
    "flashinfer",
    "triton_kernels",
]


def step(label: str, fn) -> bool:
    t0 = time.time()
    try:
        info = fn()
    except BaseException as e:
        tb = traceback.format_exc().strip().splitlines()
        print(f"FAIL {label}: {type(e).__name__}: {str(e)[:300]}  [{tb[-3].strip() if len(tb) > 2 else ''}]")
        return False
    print(f"ok   {label}" + (f": {info}" if info else "") + f" ({time.time() - t0:.1f} s)")
    return True


def case_args(case: dict, models: Path) -> dict:
    sys.path.insert(0, str(HERE))
    from boot_case import engine_kwargs

    return engine_kwargs(case, models)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("site")
    ap.add_argument("--host", default=None)
    ap.add_argument("--cases", default=str(HERE / "cases.json"))
    ap.add_argument("--modules-out", default=None)
    a = ap.parse_args()
    site = Path(a.site).resolve()
    sys.path.insert(0, str(site))
    if a.host:
        sys.path.insert(1, str(Path(a.host).resolve()))
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "SGLANG_DISABLE_REQUEST_LOGGING": "1"})
    torch_dir = None
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
        torch_dir = Path(spec.origin).parent / "lib" if spec and spec.origin else None
    except Exception:
        pass
    failed = 0
    failed += not step("stub libcuda.so.1", lambda: str(stub_libcuda([site / "sgl_kernel", site / "flashinfer"]
                                                                      + ([torch_dir] if torch_dir else []))))
    failed += not step("torch.cuda as one H200 (sm90)", patch_torch_cuda)
    for m in MODULES:
        failed += not step(f"import {m}", lambda m=m: getattr(importlib.import_module(m), "__version__", None))

    def sm90_ops():
        import sgl_kernel

        loaded = [p for p in Path(sgl_kernel.__file__).parent.rglob("common_ops*") if p.is_file()]
        import torch

        n = len([x for x in dir(torch.ops.sgl_kernel) if not x.startswith("_")])
        return f"{n} torch.ops.sgl_kernel ops; common_ops files: {[str(p.relative_to(site)) for p in loaded]}"

    failed += not step("sgl_kernel ops registered", sm90_ops)
    cases = json.loads(Path(a.cases).read_text())
    models = HERE.parent / "vllm_boot" / "models"

    def archs():
        from sglang.srt.models.registry import ModelRegistry

        out = []
        for arch in sorted({json.loads((models / c["model"] / "config.json").read_text())["architectures"][0]
                            for c in cases}):
            cls, _ = ModelRegistry.resolve_model_cls([arch])
            out.append(f"{arch} -> {cls.__module__}.{cls.__name__}")
        return "; ".join(out)

    failed += not step("model classes (ModelRegistry)", archs)
    for c in cases:
        def resolve(c=c):
            from sglang.srt.server_args import ServerArgs

            kw = case_args(c, models)
            kw.pop("log_level", None)
            sa = ServerArgs(**kw)
            return (f"attn={sa.attention_backend} prefill={sa.prefill_attention_backend} "
                    f"decode={sa.decode_attention_backend} page={sa.page_size} kv={sa.kv_cache_dtype} "
                    f"mfs={sa.mem_fraction_static} chunk={sa.chunked_prefill_size} "
                    f"graph_bs={getattr(sa, 'cuda_graph_max_bs', None)} graph_off={sa.disable_cuda_graph} "
                    f"ctx={sa.context_length} max_total={sa.max_total_tokens}")

        failed += not step(f"ServerArgs {c['id']}", resolve)
    tops = sorted({m.split(".")[0] for m, mod in list(sys.modules.items())
                   if mod is not None and str(getattr(mod, "__file__", "") or "").startswith(str(site))})
    print(f"top-level packages imported from the bundle ({len(tops)}): {' '.join(tops)}")
    subs = sorted({".".join(m.split(".")[:2]) for m in list(sys.modules) if m.startswith("sglang.")})
    print(f"sglang subpackages imported ({len(subs)}): {' '.join(subs)}")
    if a.modules_out:
        Path(a.modules_out).write_text("\n".join(tops) + "\n")
    print(f"{failed} failed step(s)")
    sys.stdout.flush()
    os._exit(min(failed, 100))


if __name__ == "__main__":
    main()
