"""Probe: FlashInfer's MLA wrapper (BatchMLAPagedAttentionWrapper, backend="auto"), planned as SGLang's flashinfer
backend plans it (FlashInferMLAIndicesUpdaterDecode/Prefill: kv_lora_rank, qk_rope_head_dim, page size 1, causal
for extends): the program (cases and run).

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/flashinfer_mla.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.flashinfer_mla import HEADS, NO_BACKEND, SPEC, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']

DIMS = [(512, 64), (256, 64), (448, 64), (512, 32)]
"""(head_dim_ckv, head_dim_kpe): DeepSeek's, another the fa2/fa3 templates take, and one off each multiple."""

DTYPES = [("fp16", "fp16"), ("bf16", "fp8_e4m3"), ("fp16", "bf16"), ("fp8_e4m3", "fp8_e4m3")]
"""q/KV pairs asked at DeepSeek's dims besides bf16/bf16: one each the dtype claim takes or refuses on some arch."""

PHASES = ["decode", "prefill"]

KV_LENS = [256, 100]
"""Two requests' KV lengths (a prefill request's last QO_LEN tokens are its queries)."""

QO_LEN = 8

PAGE = 1

TOLERANCE = 3e-2  # max |out - ref| / max |ref|


def cases() -> list[dict[str, Any]]:
    out = [{"phase": ph, "ckv": c, "kpe": k, "q_dtype": "bf16", "kv_dtype": "bf16", "page_size": PAGE}
           for ph in PHASES for c, k in DIMS]
    out += [{"phase": ph, "ckv": 512, "kpe": 64, "q_dtype": q, "kv_dtype": kv, "page_size": PAGE}
            for ph in PHASES for q, kv in DTYPES]
    return out


def _reference(q_nope: Any, q_pe: Any, ckv: Any, kpe: Any, scale: float, causal: bool) -> Any:
    """Absorbed MLA for one request in fp32: q_nope [n, H, ckv], q_pe [n, H, kpe], ckv [L, ckv], kpe [L, kpe] ->
    [n, H, ckv]; with `causal`, query i (position L - n + i) sees keys up to its own position."""
    import torch

    s = (torch.einsum("qhc,kc->hqk", q_nope.float(), ckv.float())
         + torch.einsum("qhr,kr->hqk", q_pe.float(), kpe.float())) * scale
    if causal:
        n, length = q_nope.shape[0], ckv.shape[0]
        mask = torch.ones(n, length, dtype=torch.bool, device=s.device).triu(length - n + 1)
        s = s.masked_fill(mask, float("-inf"))
    return torch.einsum("hqk,kc->qhc", torch.softmax(s, dim=-1), ckv.float())


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from flashinfer.mla import BatchMLAPagedAttentionWrapper

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_e4m3": torch.float8_e4m3fn}
    q_dtype, kv_dtype = dtypes[case["q_dtype"]], dtypes[case["kv_dtype"]]
    ckv_dim, kpe_dim, page = case["ckv"], case["kpe"], case["page_size"]
    causal = case["phase"] == "prefill"
    qo_lens = [QO_LEN if causal else 1 for _ in KV_LENS]
    dev = "cuda"
    torch.manual_seed(0)
    pages = [-(-n // page) for n in KV_LENS]
    total = sum(pages)
    ckv_cache = (torch.randn(total, page, ckv_dim, device=dev, dtype=torch.bfloat16) / 2).to(kv_dtype)
    kpe_cache = (torch.randn(total, page, kpe_dim, device=dev, dtype=torch.bfloat16) / 2).to(kv_dtype)
    n_q = sum(qo_lens)
    q_nope = torch.randn(n_q, HEADS, ckv_dim, device=dev, dtype=torch.bfloat16).to(q_dtype)
    q_pe = torch.randn(n_q, HEADS, kpe_dim, device=dev, dtype=torch.bfloat16).to(q_dtype)

    def indptr(xs: list[int]) -> Any:
        return torch.tensor([0, *torch.tensor(xs).cumsum(0).tolist()], device=dev, dtype=torch.int32)

    qo_indptr, kv_indptr = indptr(qo_lens), indptr(pages)
    kv_indices = torch.arange(total, device=dev, dtype=torch.int32)
    kv_len_arr = torch.tensor(KV_LENS, device=dev, dtype=torch.int32)
    scale = (128 + 64) ** -0.5  # DeepSeek's softmax scale over its q/k head dim (nope 128 + rope 64)
    workspace = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device=dev)
    wrapper = BatchMLAPagedAttentionWrapper(workspace, backend="auto")
    try:
        wrapper.plan(qo_indptr, kv_indptr, kv_indices, kv_len_arr, HEADS, ckv_dim, kpe_dim, page, causal, scale,
                     q_dtype, kv_dtype)
    except (ValueError, RuntimeError, TypeError, NotImplementedError) as exc:
        message = f"{type(exc).__name__}: {exc}"
        if NO_BACKEND not in message and "backend" not in message:
            raise
        return {"outcome": "UNSUPPORTED", "message": message}
    backend = getattr(wrapper, "_planned_backend_name", None) or getattr(wrapper, "_backend", None)
    fp8 = kv_dtype == torch.float8_e4m3fn and q_dtype != torch.float8_e4m3fn
    out = wrapper.run(q_nope, q_pe, ckv_cache, kpe_cache, **({"ckv_scale": 1.0, "kpe_scale": 1.0} if fp8 else {}))
    torch.cuda.synchronize()
    refs, q0, p0 = [], 0, 0
    for n, length, npg in zip(qo_lens, KV_LENS, pages, strict=True):
        ckv = ckv_cache[p0:p0 + npg].reshape(-1, ckv_dim)[:length]
        kpe = kpe_cache[p0:p0 + npg].reshape(-1, kpe_dim)[:length]
        refs.append(_reference(q_nope[q0:q0 + n], q_pe[q0:q0 + n], ckv, kpe, scale, causal))
        q0, p0 = q0 + n, p0 + npg
    ref = torch.cat(refs)
    err = (out.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    finite = bool(torch.isfinite(out.float()).all().item())
    return {"outcome": "OK", "max_abs_err": err,
            "metrics": {"rel_err": rel, "correct": bool(finite and rel <= TOLERANCE), "backend": backend}}
