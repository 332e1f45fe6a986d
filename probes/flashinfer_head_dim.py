"""Probe: FlashInfer head-dim gates at the library level (not vLLM's engine gate): the program (cases and run).

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/flashinfer_head_dim.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.flashinfer_head_dim import SPEC, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


PATHS = ["prefill-fa3", "prefill-fa2", "decode-paged", "decode-single"]  # slowest compiles first


HEAD_DIMS = [64, 128, 256, 512]


KV_DTYPES = ["bf16", "fp8_e4m3"]


QO_HEADS, KV_HEADS = 8, 2


KV_LEN, QO_LEN, BATCH, PAGE = 1024, 512, 4, 16


TOLERANCE = 3e-2  # max |out - ref| / max |ref|, bf16 output


def cases() -> list[dict[str, Any]]:
    return [{"path": p, "head_dim": d, "kv_dtype": kv} for p in PATHS for d in HEAD_DIMS for kv in KV_DTYPES]


def _reference(q: Any, k: Any, v: Any, causal: bool) -> Any:
    """fp32 attention; q [n_q, Hq, D], k/v [n_k, Hkv, D] -> [n_q, Hq, D] (GQA by repeating KV heads)."""
    import torch

    group = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.float(), kf) / q.shape[-1] ** 0.5
    if causal:
        n_q, n_k = q.shape[0], k.shape[0]
        mask = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).triu(n_k - n_q + 1)
        s = s.masked_fill(mask, float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), vf)


def run(case: dict[str, Any]) -> dict[str, Any]:
    import flashinfer
    import torch
    from flashinfer import utils as fi_utils

    d, path = case["head_dim"], case["path"]
    kv_dtype = {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}[case["kv_dtype"]]
    torch.manual_seed(0)
    dev = "cuda"

    def kv(n: int) -> Any:
        return torch.randn(n, KV_HEADS, d, device=dev, dtype=torch.bfloat16).to(kv_dtype)

    metrics: dict[str, Any] = {}
    if path == "decode-single":
        q = torch.randn(QO_HEADS, d, device=dev, dtype=torch.bfloat16)
        k, v = kv(KV_LEN), kv(KV_LEN)
        out = flashinfer.single_decode_with_kv_cache(q, k, v)
        ref = _reference(q[None], k, v, causal=False)[0]
    elif path == "decode-paged":
        pages_per_seq = KV_LEN // PAGE
        n_pages = BATCH * pages_per_seq
        cache = torch.randn(n_pages, 2, PAGE, KV_HEADS, d, device=dev, dtype=torch.bfloat16).to(kv_dtype)
        indptr = torch.arange(0, n_pages + 1, pages_per_seq, device=dev, dtype=torch.int32)
        indices = torch.arange(n_pages, device=dev, dtype=torch.int32)
        last = torch.full((BATCH,), PAGE, device=dev, dtype=torch.int32)
        workspace = torch.zeros(128 * 1024 * 1024, dtype=torch.uint8, device=dev)
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
        wrapper.plan(indptr, indices, last, QO_HEADS, KV_HEADS, d, PAGE,
                     q_data_type=torch.bfloat16, kv_data_type=kv_dtype)
        q = torch.randn(BATCH, QO_HEADS, d, device=dev, dtype=torch.bfloat16)
        out = wrapper.run(q, cache)
        refs = []
        for b in range(BATCH):
            pages = cache[b * pages_per_seq:(b + 1) * pages_per_seq]
            k = pages[:, 0].reshape(KV_LEN, KV_HEADS, d)
            v = pages[:, 1].reshape(KV_LEN, KV_HEADS, d)
            refs.append(_reference(q[b][None], k, v, causal=False)[0])
        ref = torch.stack(refs)
    else:
        backend = path.split("-")[1]
        q = torch.randn(QO_LEN, QO_HEADS, d, device=dev, dtype=torch.bfloat16)
        k, v = kv(KV_LEN), kv(KV_LEN)
        auto = fi_utils.determine_attention_backend(
            q.device, 0, False, False, q.dtype, kv_dtype, head_dim_qk=d, head_dim_vo=d)
        metrics["auto_backend"] = auto
        if backend == "fa3":
            if not fi_utils.is_sm90a_supported(q.device):
                return {"outcome": "UNSUPPORTED", "metrics": metrics,
                        "message": "flashinfer.utils.is_sm90a_supported() is False: FA3 kernels need sm90a"}
            if not fi_utils.is_fa3_backend_supported(0, False, False, q.dtype, kv_dtype):
                return {"outcome": "UNSUPPORTED", "metrics": metrics,
                        "message": f"flashinfer.utils.is_fa3_backend_supported(q=bf16, kv={case['kv_dtype']}) "
                                   f"is False (FA3 FP8 KV cache requires an FP8 query); auto picks {auto}"}
            if not fi_utils.is_fa3_prefill_head_dim_supported(d, d):
                return {"outcome": "UNSUPPORTED", "metrics": metrics,
                        "message": f"flashinfer.utils.is_fa3_prefill_head_dim_supported({d}, {d}) is False; "
                                   f"auto picks {auto}"}
        out = flashinfer.single_prefill_with_kv_cache(q, k, v, causal=True, backend=backend)
        ref = _reference(q, k, v, causal=True)
    torch.cuda.synchronize()
    err = (out.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    finite = bool(torch.isfinite(out.float()).all().item())
    metrics.update(rel_err=rel, correct=bool(finite and rel <= TOLERANCE))
    return {"outcome": "OK", "max_abs_err": err, "metrics": metrics}
