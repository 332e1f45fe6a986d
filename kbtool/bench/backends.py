"""The attention backends `kb bench` times, and how each one is called.

The registry (names, kernel ids, phases, packages, expected kernel names, memory prediction) is pure
Python, so the parent process can list and plan without importing torch. `prepare()` runs in a worker
subprocess and imports the GPU libraries it needs there.

Canonical tensors (built by the worker): q [B, H, Nq, D], k and v [B, H_kv, Nk, D], contiguous, in the
configuration's dtype (the layout torch's SDPA takes). `prepare` returns `(fn, post)`: `fn()` launches the
backend once on inputs already converted to its own layout (conversion is not timed) and returns its
output; `post(out)` turns that output back into [B, H, Nq, D] for the correctness check.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbtool.measure.grid import DTYPE_BYTES, Config

Fn = Callable[[], Any]


@dataclass(frozen=True)
class Backend:
    name: str
    kernel: str  # kb kernel id
    phases: tuple[str, ...]
    module: str  # a module that exists only where the backend is installed (checked without importing)
    expect: tuple[str, ...]  # lowercase substrings of a GPU kernel name that confirm the dispatch
    note: str = ""


BACKENDS: tuple[Backend, ...] = (
    Backend("sdpa-flash", "torch-sdpa-flash", ("prefill", "decode"), "torch", ("flash",),
            "torch SDPA forced to FLASH_ATTENTION"),
    Backend("sdpa-efficient", "torch-sdpa-efficient", ("prefill", "decode"), "torch",
            ("fmha", "efficient", "cutlass"), "torch SDPA forced to EFFICIENT_ATTENTION"),
    Backend("sdpa-cudnn", "torch-sdpa-cudnn", ("prefill", "decode"), "torch", ("cudnn", "sdpa", "fort_native"),
            "torch SDPA forced to CUDNN_ATTENTION"),
    Backend("sdpa-math", "torch-sdpa-math", ("prefill", "decode"), "torch", ("softmax",),
            "torch SDPA forced to MATH (the unfused reference path)"),
    Backend("flashinfer-fa2", "flashinfer-fa2", ("prefill",), "flashinfer", ("prefill",),
            "FlashInfer ragged batch prefill, backend='fa2'"),
    Backend("flashinfer-fa3", "flashinfer-fa3", ("prefill",), "flashinfer", ("prefill",),
            "FlashInfer ragged batch prefill, backend='fa3'"),
    Backend("flashinfer-decode", "flashinfer-fa2", ("decode",), "flashinfer", ("decode",),
            "FlashInfer paged batch decode (CUDA cores), page size = KV length as in the study"),
    Backend("fa4", "flash-attention-4", ("prefill", "decode"), "flash_attn.cute", ("flash", "fmha"),
            "flash-attn-4 (CuTe DSL) flash_attn_func"),
    Backend("triton", "triton-fused-attention", ("prefill", "decode"), "triton", ("kb_attn_fwd",),
            "kb's own Triton fused-attention kernel, after the Triton tutorial"),
    Backend("fa2", "flash-attention-2", ("prefill", "decode"), "flash_attn_2_cuda", ("flash",),
            "flash-attn 2 flash_attn_func / flash_attn_with_kvcache"),
    Backend("fa3", "flash-attention-3", ("prefill", "decode"), "flash_attn_interface", ("flash",),
            "flash-attn 3 (hopper) flash_attn_func / flash_attn_with_kvcache"),
)
BY_NAME = {b.name: b for b in BACKENDS}


def installed(backend: Backend) -> bool:
    try:
        return importlib.util.find_spec(backend.module) is not None
    except (ImportError, ValueError):
        return False


def for_phase(phase: str, names: list[str] | None = None) -> list[Backend]:
    chosen = [BY_NAME[n] for n in names] if names else list(BACKENDS)
    return [b for b in chosen if phase in b.phases]


def predicted_bytes(backend: str, cfg: Config) -> int:
    """Device memory an attempt needs (inputs, output, fp32 reference, backend temporaries), a rough upper bound.

    Used to skip attempts as OOM_PREDICTED instead of running them out of memory.
    """
    s = DTYPE_BYTES[cfg.dtype]
    nq = cfg.length if cfg.phase == "prefill" else 1
    q = cfg.batch * cfg.heads * nq * cfg.head_dim * s
    kv = cfg.kv_bytes()
    total = 2 * q + kv
    # fp32 reference, one batch element at a time: scores and probabilities of one element, fp32 copies.
    total += 2 * cfg.heads * nq * cfg.length * 4 + (q + kv) * 4 // s
    if backend == "sdpa-math":  # the unfused path keeps the full score and probability matrices
        total += 3 * cfg.batch * cfg.heads * nq * cfg.length * 4
    if backend in ("flashinfer-decode", "flashinfer-fa2", "flashinfer-fa3"):  # relaid copy + workspace
        total += kv + q + 256 * 2**20
    if backend == "fa4" or backend == "triton":
        total += kv + q  # layout copy
    return int(total)


def check_dispatch(backend: str, kernels: list[str]) -> str:
    """'match' when a kernel that ran has a name the backend is known by, 'mismatch' when none does,
    'unprobed' when no kernel names were collected."""
    if not kernels:
        return "unprobed"
    expect = BY_NAME[backend].expect if backend in BY_NAME else ()
    names = [k.lower() for k in kernels]
    return "match" if any(e in n for e in expect for n in names) else "mismatch"


# ---- GPU side (worker only) ---------------------------------------------------------------------------


def _torch_dtype(torch: Any, name: str) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def prepare(backend: str, cfg: Config, q: Any, k: Any, v: Any) -> tuple[Fn, Callable[[Any], Any]]:
    """Build the launch for one backend on canonical inputs. Raises what the library raises when it refuses."""
    if backend.startswith("sdpa-"):
        return _sdpa(backend, cfg, q, k, v)
    if backend in ("flashinfer-fa2", "flashinfer-fa3"):
        return _flashinfer_prefill(backend.split("-")[1], cfg, q, k, v)
    if backend == "flashinfer-decode":
        return _flashinfer_decode(cfg, q, k, v)
    if backend == "fa4":
        return _fa4(cfg, q, k, v)
    if backend == "triton":
        from kbtool.bench.triton_attn import attention

        causal = cfg.causal and cfg.phase == "prefill"
        return (lambda: attention(q, k, v, causal)), (lambda o: o)
    if backend in ("fa2", "fa3"):
        return _flash_attn(backend, cfg, q, k, v)
    raise NotImplementedError(f"unknown backend {backend!r}")


def _sdpa(backend: str, cfg: Config, q: Any, k: Any, v: Any) -> tuple[Fn, Callable[[Any], Any]]:
    import torch  # type: ignore[import-not-found,unused-ignore]
    import torch.nn.functional as F  # type: ignore[import-not-found,unused-ignore]
    from torch.nn.attention import SDPBackend, sdpa_kernel  # type: ignore[import-not-found,unused-ignore]

    which = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
             "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa-math": SDPBackend.MATH}[backend]
    causal = cfg.causal and cfg.phase == "prefill"
    gqa = cfg.kv_heads != cfg.heads

    def fn() -> Any:
        with sdpa_kernel([which]), torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    return fn, (lambda o: o)


def _workspace(torch: Any, device: Any) -> Any:
    return torch.zeros(256 * 2**20, dtype=torch.uint8, device=device)


def _flashinfer_prefill(which: str, cfg: Config, q: Any, k: Any, v: Any) -> tuple[Fn, Callable[[Any], Any]]:
    import flashinfer  # type: ignore[import-not-found,unused-ignore]
    import torch  # type: ignore[import-not-found,unused-ignore]

    b, h, n, d = q.shape
    hk = k.shape[1]
    # ragged NHD layout: [B * N, heads, D]
    qr = q.transpose(1, 2).reshape(b * n, h, d).contiguous()
    kr = k.transpose(1, 2).reshape(b * k.shape[2], hk, d).contiguous()
    vr = v.transpose(1, 2).reshape(b * v.shape[2], hk, d).contiguous()
    dev = q.device
    qo_indptr = torch.arange(0, b + 1, dtype=torch.int32, device=dev) * n
    kv_indptr = torch.arange(0, b + 1, dtype=torch.int32, device=dev) * k.shape[2]
    wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(_workspace(torch, dev), kv_layout="NHD", backend=which)
    wrapper.plan(qo_indptr, kv_indptr, h, hk, d, causal=cfg.causal, q_data_type=q.dtype, kv_data_type=k.dtype)

    def post(o: Any) -> Any:
        return o.reshape(b, n, h, d).transpose(1, 2)

    return (lambda: wrapper.run(qr, kr, vr)), post


def _flashinfer_decode(cfg: Config, q: Any, k: Any, v: Any) -> tuple[Fn, Callable[[Any], Any]]:
    import flashinfer  # type: ignore[import-not-found,unused-ignore]
    import torch  # type: ignore[import-not-found,unused-ignore]

    b, h, _, d = q.shape
    hk, n = k.shape[1], k.shape[2]
    dev = q.device
    # One page per request holding its whole cache (page size = KV length), NHD: [pages, 2, page, H_kv, D].
    cache = torch.stack([k.transpose(1, 2), v.transpose(1, 2)], dim=1).contiguous()
    qd = q.reshape(b, h, d).contiguous()
    indptr = torch.arange(0, b + 1, dtype=torch.int32, device=dev)
    indices = torch.arange(0, b, dtype=torch.int32, device=dev)
    last = torch.full((b,), n, dtype=torch.int32, device=dev)
    if cfg.graphs:
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            _workspace(torch, dev), kv_layout="NHD", use_cuda_graph=True,
            paged_kv_indptr_buffer=indptr.clone(), paged_kv_indices_buffer=indices.clone(),
            paged_kv_last_page_len_buffer=last.clone())
    else:
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(_workspace(torch, dev), kv_layout="NHD")
    wrapper.plan(indptr, indices, last, h, hk, d, n, q_data_type=q.dtype, kv_data_type=k.dtype)
    return (lambda: wrapper.run(qd, cache)), (lambda o: o.reshape(b, h, 1, d))


def _fa4(cfg: Config, q: Any, k: Any, v: Any) -> tuple[Fn, Callable[[Any], Any]]:
    from flash_attn.cute import flash_attn_func  # type: ignore[import-not-found,unused-ignore]

    # [B, N, H, D]
    qn, kn, vn = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    causal = cfg.causal and cfg.phase == "prefill"

    def fn() -> Any:
        r = flash_attn_func(qn, kn, vn, causal=causal)
        return r[0] if isinstance(r, tuple) else r

    return fn, (lambda o: o.transpose(1, 2))


def _flash_attn(which: str, cfg: Config, q: Any, k: Any, v: Any) -> tuple[Fn, Callable[[Any], Any]]:
    if which == "fa2":
        from flash_attn import flash_attn_func, flash_attn_with_kvcache  # type: ignore[import-not-found,unused-ignore]
    else:
        from flash_attn_interface import flash_attn_func, flash_attn_with_kvcache  # type: ignore[import-not-found,unused-ignore]

    qn, kn, vn = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    causal = cfg.causal and cfg.phase == "prefill"

    def fn() -> Any:
        if cfg.phase == "decode":
            r = flash_attn_with_kvcache(qn, kn, vn, causal=False)
        else:
            r = flash_attn_func(qn, kn, vn, causal=causal)
        return r[0] if isinstance(r, tuple) else r

    return fn, (lambda o: o.transpose(1, 2))
