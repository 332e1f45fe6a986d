"""Build vLLM's FA-3 fork WITHOUT FP8 two-level accumulation on the GPU host, for probes/vllm_fa3_fp8_one_level.py.

Usage (on the host, torch with CUDA and nvcc installed): python3 probes/_fa3_one_level_build.py SRC TREE WHEEL RELEASE
  SRC     the fork's sources (vllm-project/flash-attention @ 803020a8: hopper/, csrc/common/) with cutlass's include/
          (NVIDIA/cutlass @ 62750a2b, the fork's submodule) at csrc/cutlass/include, packed by probes/pack_fa3_src.sh
  TREE    where to write a bare vllm/ package holding the build (put it first on PYTHONPATH for the probe)
  WHEEL   the 0.24.0 wheel's vllm/vllm_flash_attn/ (its Python interface is copied next to the build)
  RELEASE the vLLM release whose fork commit this is (written to vllm/KB_RELEASE_ONE_LEVEL)

What the fork's CMakeLists.txt compiles for _vllm_fa3_C (defines included), narrowed to fit one device command: head dim
128 only, bf16 and e4m3, PackGQA varlen, no split-KV/paged/softcap/local/fp16, plus
FLASHATTENTION_DISABLE_FP8_TWO_LEVEL_ACCUMULATION (hopper/utils.h:238, tile_size.h:66).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

DEFINES = ["FLASHATTENTION_DISABLE_BACKWARD", "FLASHATTENTION_DISABLE_DROPOUT", "FLASHATTENTION_DISABLE_UNEVEN_K",
           "FLASHATTENTION_DISABLE_PYBIND", "FLASHATTENTION_VARLEN_ONLY", "FLASHATTENTION_PACKGQA_ONLY",
           "FLASHATTENTION_DISABLE_CLUSTER", "FLASHATTENTION_DISABLE_SM8x", "FLASHATTENTION_DISABLE_APPENDKV",
           "CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED", "CUTLASS_ENABLE_GDC_FOR_SM90", "CUTLASS_DEBUG_TRACE_LEVEL=0",
           "NDEBUG", "FLASHATTENTION_DISABLE_SPLIT", "FLASHATTENTION_DISABLE_PAGEDKV", "FLASHATTENTION_DISABLE_SOFTCAP",
           "FLASHATTENTION_DISABLE_LOCAL", "FLASHATTENTION_DISABLE_FP16", "FLASHATTENTION_DISABLE_HDIM64",
           "FLASHATTENTION_DISABLE_HDIM96", "FLASHATTENTION_DISABLE_HDIM192", "FLASHATTENTION_DISABLE_HDIM256",
           "FLASHATTENTION_DISABLE_HDIMDIFF64", "FLASHATTENTION_DISABLE_HDIMDIFF192",
           "FLASHATTENTION_DISABLE_FP8_TWO_LEVEL_ACCUMULATION"]
SOURCES = ["flash_api.cpp", "flash_api_torch_lib.cpp", "flash_prepare_scheduler.cu",
           "instantiations/flash_fwd_hdim128_e4m3_packgqa_sm90.cu",
           "instantiations/flash_fwd_hdim128_bf16_packgqa_sm90.cu"]
NVCC = ["-O3", "-std=c++17", "--use_fast_math", "--expt-relaxed-constexpr", "--expt-extended-lambda",
        "-gencode=arch=compute_90a,code=sm_90a", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
        "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_BFLOAT162_OPERATORS__",
        "-U__CUDA_NO_BFLOAT162_CONVERSIONS__", "--threads", "4"]


def main(src: Path, tree: Path, wheel: Path, release: str) -> int:
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")
    os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 8))
    from torch.utils.cpp_extension import load

    hopper = src / "hopper"
    defs = [f"-D{d}" for d in DEFINES]
    build = Path("/tmp/fa3-one-level-build")
    build.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    load(name="_vllm_fa3_C", sources=[str(hopper / s) for s in SOURCES],
         extra_include_paths=[str(hopper), str(src / "csrc" / "common"), str(src / "csrc" / "cutlass" / "include")],
         extra_cflags=["-O3", "-std=c++17", *defs], extra_cuda_cflags=[*NVCC, *defs], build_directory=str(build),
         verbose=True, is_python_module=False)
    print(f"built in {time.monotonic() - t:.0f} s", flush=True)
    dst = tree / "vllm" / "vllm_flash_attn"
    dst.mkdir(parents=True, exist_ok=True)
    (tree / "vllm" / "__init__.py").write_text("")
    for f in ("__init__.py", "flash_attn_interface.py"):
        shutil.copy(wheel / f, dst / f)
    shutil.copy(build / "_vllm_fa3_C.so", dst / "_vllm_fa3_C.abi3.so")
    (tree / "vllm" / "KB_RELEASE_ONE_LEVEL").write_text(release + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]))
