"""One benchmark attempt, run inside a worker subprocess of kbtool.probe.runner (`run(case)` is the module's
probe-style entry point).

case = {"backend": name, "config": Config.to_json(), "repeat": r, "check": bool, "profile": bool, "seed": s}
        or {"backend": "__copy__", "bytes": n} for the device-to-device copy bandwidth.

Per attempt: build seeded random inputs (never zeros), prepare the backend (a library refusal raises and the
runner classifies it), optionally profile one launch for the kernel names (dispatch check) and compare with
an fp32 reference, read the peak memory of one launch, then time: warm up, pick a launch count k so one timed
batch takes about a millisecond, and take the median per-launch time over several event-timed batches. With
CUDA Graphs, one launch is captured and replayed instead. The per-process median is one sample; the parent
takes medians over separate processes.

With KB_BENCH_FAKE=1 the backend "fake-*" family runs without torch, for the CPU tests of the runner.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from kbtool.measure.grid import Config

TRIALS = 15
BATCH_MS = 1.0
MAX_K = 200
REL_TOL = 2e-2  # ||out - ref|| / ||ref|| for 16-bit inputs against an fp32 reference


def run(case: dict[str, Any]) -> dict[str, Any]:
    backend = str(case["backend"])
    if backend.startswith("fake-"):
        return _fake(case)
    if backend == "__copy__":
        return _copy_bandwidth(int(case.get("bytes") or 512 * 2**20))
    return _attempt(backend, Config.from_json(case["config"]), case)


# ---- timing helpers ---------------------------------------------------------------------------------


def _time_launches(torch: Any, launch: Any) -> list[float]:
    """Per-launch microseconds of TRIALS event-timed batches of k launches each."""
    for _ in range(3):
        launch()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(5):
        launch()
    e.record()
    e.synchronize()
    one_ms = max(s.elapsed_time(e) / 5, 1e-4)
    k = max(1, min(MAX_K, math.ceil(BATCH_MS / one_ms)))
    out = []
    for _ in range(TRIALS):
        s.record()
        for _ in range(k):
            launch()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1000.0 / k)
    return out


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# ---- the attempt ------------------------------------------------------------------------------------


def _inputs(torch: Any, cfg: Config, seed: int) -> tuple[Any, Any, Any]:
    from kbtool.bench.backends import _torch_dtype

    dt = _torch_dtype(torch, cfg.dtype)
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    nq = cfg.length if cfg.phase == "prefill" else 1
    q = torch.randn(cfg.batch, cfg.heads, nq, cfg.head_dim, generator=g, device="cuda", dtype=dt)
    k = torch.randn(cfg.batch, cfg.kv_heads, cfg.length, cfg.head_dim, generator=g, device="cuda", dtype=dt)
    v = torch.randn(cfg.batch, cfg.kv_heads, cfg.length, cfg.head_dim, generator=g, device="cuda", dtype=dt)
    return q, k, v


def _reference_error(torch: Any, cfg: Config, q: Any, k: Any, v: Any, out: Any) -> dict[str, Any]:
    """Max abs error and relative L2 error against fp32 attention computed one batch element at a time."""
    group = cfg.heads // cfg.kv_heads
    scale = 1.0 / math.sqrt(cfg.head_dim)
    causal = cfg.causal and cfg.phase == "prefill"
    max_abs, num, den = 0.0, 0.0, 0.0
    finite = True
    for i in range(cfg.batch):
        qi = q[i].float()
        ki = k[i].float().repeat_interleave(group, dim=0)
        vi = v[i].float().repeat_interleave(group, dim=0)
        s = torch.matmul(qi, ki.transpose(-1, -2)) * scale
        if causal:
            nq, nk = s.shape[-2], s.shape[-1]
            mask = torch.ones(nq, nk, dtype=torch.bool, device=s.device).tril(diagonal=nk - nq)
            s = s.masked_fill(~mask, float("-inf"))
        ref = torch.matmul(torch.softmax(s, dim=-1), vi)
        del s
        oi = out[i].float()
        finite = finite and bool(torch.isfinite(oi).all())
        diff = oi - ref
        max_abs = max(max_abs, float(diff.abs().max()))
        num += float((diff * diff).sum())
        den += float((ref * ref).sum())
    rel = math.sqrt(num / den) if den else float("inf")
    return {"max_abs_err": max_abs, "rel_l2_err": rel, "correct": bool(finite and rel < REL_TOL)}


def _kernel_names(torch: Any, fn: Any) -> list[str]:
    from torch.profiler import ProfilerActivity, profile  # type: ignore[import-not-found,unused-ignore]

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names: list[str] = []
    for ev in prof.events():
        if "cuda" not in str(getattr(ev, "device_type", "")).lower():
            continue
        name = str(ev.name)
        if name.lower().startswith(("memcpy", "memset")) or name in names:
            continue
        names.append(name[:200])
    return names[:12]


def _attempt(backend: str, cfg: Config, case: dict[str, Any]) -> dict[str, Any]:
    import torch  # type: ignore[import-not-found,unused-ignore]

    from kbtool.bench.backends import check_dispatch, prepare

    if not torch.cuda.is_available():
        return {"outcome": "ERROR", "message": "no CUDA device in the worker"}
    torch.manual_seed(int(case.get("seed", 0)))
    q, k, v = _inputs(torch, cfg, int(case.get("seed", 0)))
    fn, post = prepare(backend, cfg, q, k, v)
    out = fn()  # first launch: JIT compilation, autotuning, handle creation
    torch.cuda.synchronize()
    if case.get("warm"):  # compile-only pass: the kernels are now in the on-disk caches
        return {"outcome": "OK", "metrics": {"warm": True}}
    metrics: dict[str, Any] = {}
    kernels: list[str] = []
    if case.get("profile"):
        try:
            kernels = _kernel_names(torch, fn)
        except Exception as exc:  # the profiler is a check, not the measurement
            metrics["profiler_error"] = f"{type(exc).__name__}: {exc}"[:300]
        metrics["dispatch"] = check_dispatch(backend, kernels)
    max_abs = None
    if case.get("check"):
        err = _reference_error(torch, cfg, q, k, v, post(out))
        max_abs = err.pop("max_abs_err")
        metrics.update(err)
    del out
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    metrics["peak_bytes"] = int(torch.cuda.max_memory_allocated())
    metrics["extra_bytes"] = int(torch.cuda.max_memory_allocated() - base)
    launch = _graph(torch, fn) if cfg.graphs else fn
    per_launch = _time_launches(torch, launch)
    metrics["latency_us"] = _median(per_launch)
    metrics["trial_spread"] = (min(per_launch), max(per_launch))
    return {"outcome": "OK", "kernels": kernels, "max_abs_err": max_abs, "metrics": metrics}


def _graph(torch: Any, fn: Any) -> Any:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    except Exception as exc:
        raise RuntimeError(f"CUDA graph capture failed: {type(exc).__name__}: {exc}") from exc
    return graph.replay


def _copy_bandwidth(nbytes: int) -> dict[str, Any]:
    """Device-to-device copy of nbytes; bandwidth counts bytes read plus bytes written (2 * nbytes / t)."""
    import torch  # type: ignore[import-not-found,unused-ignore]

    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    per = _time_launches(torch, lambda: dst.copy_(src))
    us = _median(per)
    return {"outcome": "OK", "metrics": {"bytes": nbytes, "latency_us": us,
                                         "bandwidth_gbs": 2 * nbytes / (us * 1e-6) / 1e9,
                                         "convention": "bytes read + bytes written"}}


# ---- fake backends for CPU tests ----------------------------------------------------------------------


def _fake(case: dict[str, Any]) -> dict[str, Any]:
    """Deterministic stand-ins: fake-fast and fake-slow time by a formula, fake-crash kills the worker,
    fake-hang sleeps, fake-refuse raises a library-style refusal."""
    if os.environ.get("KB_BENCH_FAKE") != "1":
        raise NotImplementedError("fake backends run only with KB_BENCH_FAKE=1")
    name = case["backend"]
    cfg = Config.from_json(case["config"])
    if name == "fake-crash":  # dies the way a segfaulting kernel does: no cleanup, no answer
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)
    if name == "fake-hang":
        time.sleep(3600)
    if name == "fake-refuse":
        raise NotImplementedError(f"fake-refuse does not support head_dim {cfg.head_dim}")
    base = cfg.length * cfg.batch / 100.0 + 10.0
    jitter = 1.0 + 0.002 * (int(case.get("repeat", 0)) % 3)
    factor = {"fake-fast": 1.0, "fake-slow": 1.5, "fake-close": 1.02}.get(name, 2.0)
    return {"outcome": "OK", "kernels": [f"{name}_kernel"], "max_abs_err": 0.0,
            "metrics": {"latency_us": base * factor * jitter, "peak_bytes": 1000, "correct": True,
                        "dispatch": "match"}}
