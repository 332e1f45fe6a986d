"""Probe: the GPU's own numbers, measured, compared with the KB's accelerator and architecture records.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/hardware.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.hardware import SPEC, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


COPY_BYTES = 1 << 30


REPEATS = 20


def cases() -> list[dict[str, Any]]:
    return [{"measure": "properties"}, {"measure": "fp8-scaled-mm"}, {"measure": "copy-bandwidth"}]


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    what = case["measure"]
    if what == "properties":
        p = torch.cuda.get_device_properties(0)
        metrics = {
            "name": p.name,
            "compute_capability": f"{p.major}.{p.minor}",
            "sm_count": p.multi_processor_count,
            "memory_bytes": p.total_memory,
            "l2_bytes": getattr(p, "L2_cache_size", None),
            "smem_per_sm_bytes": getattr(p, "shared_memory_per_multiprocessor", None),
            "smem_per_block_optin_bytes": getattr(p, "shared_memory_per_block_optin", None),
        }
        return {"outcome": "OK", "metrics": metrics}
    if what == "fp8-scaled-mm":
        a = torch.randn(256, 512, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(512, 256, device="cuda").to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.ones((), device="cuda")
        out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        ref = a.float() @ b.float()
        rel = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        return {"outcome": "OK", "max_abs_err": rel, "metrics": {"rel_err": rel, "correct": rel < 2e-2}}
    if what == "copy-bandwidth":
        src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        times = []
        for _ in range(REPEATS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        times.sort()
        median = times[len(times) // 2]
        return {"outcome": "OK", "metrics": {"bytes_moved": 2 * COPY_BYTES, "median_s": median,
                                             "tb_per_s": 2 * COPY_BYTES / median / 1e12}}
    raise ValueError(f"unknown measurement {what!r}")
