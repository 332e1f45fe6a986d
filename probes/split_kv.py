"""Probe: does splitting the KV sequence across SMs (split-KV, flash-decoding) matter for FlashInfer decode?.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/split_kv.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.split_kv import SPEC, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


QO_HEADS, KV_HEADS, D, PAGE = 32, 8, 128, 16


LENGTHS = [8192, 32768, 131072]


KV_CHUNKS = 8


"""Chunks per request of the forced split: fixed_split_size = ctx / PAGE / KV_CHUNKS pages."""


def cases() -> list[dict[str, Any]]:
    out = [{"batch": b, "ctx": n, "split": s, "tensor_cores": tc}
           for tc in (False, True) for b in (1, 32) for n in LENGTHS for s in (True, False)]
    forced = [{"batch": 32, "ctx": n, "split": True, "tensor_cores": True,
               "fixed_split_pages": n // PAGE // KV_CHUNKS} for n in LENGTHS]
    return out + forced


def run(case: dict[str, Any]) -> dict[str, Any]:
    import flashinfer
    import torch

    torch.manual_seed(0)
    b, n = case["batch"], case["ctx"]
    per_seq = n // PAGE
    pages = b * per_seq
    cache = torch.randn(pages, 2, KV_HEADS, PAGE, D, device="cuda", dtype=torch.bfloat16)
    indptr = torch.arange(0, pages + 1, per_seq, device="cuda", dtype=torch.int32)
    indices = torch.arange(pages, device="cuda", dtype=torch.int32)
    last = torch.full((b,), PAGE, device="cuda", dtype=torch.int32)
    workspace = torch.zeros(512 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    # backend="fa2": FlashInfer 0.7's "auto" may hand an unpinned plan to cuDNN (decode.py, BatchDecodeWithPaged-
    # KVCacheWrapper docstring) but keeps fa2 when a split control is passed, so the pair would compare two backends
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "HND", backend="fa2",
                                                            use_tensor_cores=case.get("tensor_cores", False))
    forced = {"fixed_split_size": case["fixed_split_pages"]} if case.get("fixed_split_pages") else {}
    wrapper.plan(indptr, indices, last, QO_HEADS, KV_HEADS, D, PAGE, q_data_type=torch.bfloat16,
                 kv_data_type=torch.bfloat16, disable_split_kv=not case["split"], **forced)
    q = torch.randn(b, QO_HEADS, D, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        out = wrapper.run(q, cache)
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = wrapper.run(q, cache)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        wrapper.run(q, cache)
        torch.cuda.synchronize()
    kernels = sorted({e.name[:120] for e in prof.events() if "cuda" in str(getattr(e, "device_type", "")).lower()})
    k = cache[:per_seq, 0].permute(0, 2, 1, 3).reshape(n, KV_HEADS, D).float().repeat_interleave(4, dim=1)
    v = cache[:per_seq, 1].permute(0, 2, 1, 3).reshape(n, KV_HEADS, D).float().repeat_interleave(4, dim=1)
    s = torch.einsum("hd,khd->hk", q[0].float(), k) / D ** 0.5
    ref = torch.einsum("hk,khd->hd", torch.softmax(s, dim=-1), v)
    rel = (out[0].float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-12)
    times.sort()
    merged = any("merge" in x.lower() for x in kernels)
    return {"outcome": "OK", "kernels": kernels[:8],
            "metrics": {"ms": times[len(times) // 2], "ms_min": times[0], "rel_err": rel, "correct": bool(rel <= 3e-2),
                        "merge_kernel": merged}}
