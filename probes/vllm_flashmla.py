"""Probe: FlashMLA as vLLM ships it (vllm/_flashmla_C and _flashmla_extension_C in the vllm wheel), on sm90.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_flashmla.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.vllm_flashmla import D_QK, D_V, DS_MLA_BYTES, SPEC, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


TOL = {"bf16": 1e-2, "fp8": 6e-2}


def _case(path: str, **over: Any) -> dict[str, Any]:
    base = {"path": path, "dtype": "bf16", "kv_dtype": "bf16", "heads": 64, "page": 64, "s_q": 1, "d_qk": D_QK,
            "lens": [1000, 333, 64, 2048], "topk": 0, "sink": False}
    return {**base, **over}


def cases() -> list[dict[str, Any]]:
    out = [_case("dense", page=p) for p in (32, 64, 128)]
    out += [_case("dense", heads=h) for h in (16, 128)]
    out += [_case("dense", s_q=2), _case("dense", dtype="fp16", kv_dtype="fp16"), _case("dense", d_qk=512),
            _case("dense", kv_dtype="fp8_e4m3"), _case("dense", dtype="fp8_e4m3", kv_dtype="fp8_e4m3")]
    out += [_case("dense-fp8", dtype="fp8_e4m3", kv_dtype="fp8_e4m3", heads=h) for h in (16, 64, 128)]
    out += [_case("dense-fp8", dtype="fp8_e4m3", kv_dtype="fp8_e4m3", page=32),
            _case("dense-fp8", dtype="bf16", kv_dtype="fp8_e4m3")]
    out += [_case("sparse", kv_dtype="fp8_ds_mla", heads=h, topk=t) for h in (64, 128) for t in (128, 2048)]
    out += [_case("sparse", kv_dtype="fp8_ds_mla", heads=64, topk=128, sink=True),
            _case("sparse", kv_dtype="fp8_ds_mla", heads=64, topk=100),
            _case("sparse", kv_dtype="bf16", heads=64, topk=128)]
    out += [_case("prefill", heads=h, topk=t, d_qk=d) for h in (64, 128) for t in (128, 2048) for d in (576, 512)]
    return out


def _quant(x: Any) -> tuple[Any, Any, Any]:
    import torch

    scale = (x.abs().amax() / 448.0).clamp(min=1e-6).float().reshape(1)
    x8 = (x / scale).to(torch.float8_e4m3fn)
    return x8, scale, x8.float() * scale


def _ds_mla(latent: Any) -> tuple[Any, Any]:
    """The fp8_ds_mla layout of (N, 576) float tokens: (N, 656) bytes and the dequantized (N, 576) copy."""
    import torch

    n = latent.shape[0]
    nope, rope = latent[:, :D_V], latent[:, D_V:]
    tiles = nope.reshape(n, 4, 128)
    scales = (tiles.abs().amax(-1) / 448.0).clamp(min=1e-6).float()
    q8 = (tiles / scales[..., None]).to(torch.float8_e4m3fn)
    raw = torch.empty(n, DS_MLA_BYTES, dtype=torch.uint8, device=latent.device)
    raw[:, :512] = q8.reshape(n, 512).view(torch.uint8)
    raw[:, 512:528] = scales.contiguous().view(torch.uint8).reshape(n, 16)
    rope16 = rope.to(torch.bfloat16).contiguous()
    raw[:, 528:] = rope16.view(torch.uint8).reshape(n, 128)
    deq = torch.cat([(q8.float() * scales[..., None]).reshape(n, 512), rope16.float()], dim=1)
    return raw, deq


def _attend(q: Any, k: Any, v: Any, scale: float, causal_offset: int | None, sink: Any = None) -> Any:
    """q (Lq, H, D), k (Lk, D), v (Lk, Dv), one latent head; causal aligned bottom-right when offset given."""
    import torch

    s = torch.einsum("qhd,kd->hqk", q.float(), k.float()) * scale
    if causal_offset is not None:
        i = torch.arange(q.shape[0], device=q.device)[:, None] + causal_offset
        s = s.masked_fill(torch.arange(k.shape[0], device=q.device)[None, :] > i, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.einsum("hqk,kd->qhd", torch.softmax(s, dim=-1), v.float())
    if sink is not None:  # FlashMLA: output times exp(lse) / (exp(lse) + exp(sink))
        o = o * torch.sigmoid(lse - sink[:, None].float()).transpose(0, 1)[..., None]
    return o


def _check(out: Any, ref: Any, fp8: bool, extra: dict[str, Any]) -> dict[str, Any]:
    import torch

    diff = out.float() - ref
    rel = float(diff.norm() / ref.norm().clamp(min=1e-12))
    tol = TOL["fp8" if fp8 else "bf16"]
    finite = bool(torch.isfinite(out.float()).all())
    return {"outcome": "OK", "max_abs_err": float(diff.abs().max()),
            "metrics": {"rel_l2": rel, "tolerance": tol, "finite": finite, "correct": finite and rel <= tol,
                        "out_dtype": str(out.dtype).removeprefix("torch."), **extra}}


def _pages(lens: list[int], page: int, width: int, dtype: Any) -> tuple[Any, Any, Any]:
    import math

    import torch

    per = [math.ceil(n / page) for n in lens]
    total = sum(per)
    cache = torch.randn(total, page, 1, width, device="cuda").to(dtype) if dtype != torch.uint8 else None
    table = torch.zeros(len(lens), max(per), dtype=torch.int32, device="cuda")
    order = torch.randperm(total, device="cuda").to(torch.int32)
    start = 0
    for b, n in enumerate(per):
        table[b, :n] = order[start:start + n]
        start += n
    return cache, table, torch.tensor(lens, dtype=torch.int32, device="cuda")


def _seq(cache: Any, table_row: Any, n: int) -> Any:
    return cache[table_row.long()].reshape(-1, cache.shape[-1])[:n]


def _dense(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.third_party.flashmla import flash_mla_interface as fm

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_e4m3": torch.float8_e4m3fn}
    b, h, sq, d = len(case["lens"]), case["heads"], case["s_q"], case["d_qk"]
    cache, table, lens = _pages(case["lens"], case["page"], d, dt[case["kv_dtype"]])
    q = torch.randn(b, sq, h, d, device="cuda").to(dt[case["dtype"]])
    meta, _ = fm.get_mla_metadata()
    scale = d ** -0.5
    out, _ = fm.flash_mla_with_kvcache(q, cache, table, lens, D_V, meta, softmax_scale=scale, causal=sq > 1)
    ref = torch.cat([_attend(q[i].float(), _seq(cache, table[i], n).float(), _seq(cache, table[i], n)[:, :D_V].float(),
                             scale, n - sq if sq > 1 else None) for i, n in enumerate(case["lens"])])
    return _check(out.reshape(-1, h, D_V), ref, "fp8" in case["kv_dtype"], {})


def _dense_fp8(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    import vllm._flashmla_extension_C  # noqa: F401

    b, h = len(case["lens"]), case["heads"]
    lat, table, lens = _pages(case["lens"], case["page"], D_QK, torch.float32)
    k8, ks, kf = _quant(lat)
    qf32 = torch.randn(b, 1, h, D_QK, device="cuda")
    if case["dtype"] == "fp8_e4m3":
        q8, qs, qf = _quant(qf32)
    else:
        q8, qs, qf = qf32.to(torch.bfloat16), torch.ones(1, device="cuda"), qf32.to(torch.bfloat16).float()
    ext = torch.ops._flashmla_extension_C
    meta, splits = ext.get_mla_decoding_metadata_dense_fp8(lens, h, 1)
    scale = D_QK ** -0.5
    out, _ = ext.fwd_kvcache_mla_fp8(q8, k8, D_V, lens, table, scale, False, meta, splits, qs, ks)
    ref = torch.cat([_attend(qf[i], _seq(kf, table[i], n), _seq(kf, table[i], n)[:, :D_V], scale, None)
                     for i, n in enumerate(case["lens"])])
    return _check(out.reshape(-1, h, D_V), ref, True, {})


def _sparse(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.third_party.flashmla import flash_mla_interface as fm

    b, h, topk, page = len(case["lens"]), case["heads"], case["topk"], case["page"]
    lat, table, _ = _pages(case["lens"], page, D_QK, torch.float32)
    flat = lat.reshape(-1, D_QK)
    if case["kv_dtype"] == "fp8_ds_mla":
        raw, deq = _ds_mla(flat)
        cache = raw.reshape(lat.shape[0], page, 1, DS_MLA_BYTES)
        fp8 = True
    else:
        cache = flat.to(torch.bfloat16).reshape(lat.shape[0], page, 1, D_QK)
        deq, fp8 = flat.to(torch.bfloat16).float(), False
    q = torch.randn(b, 1, h, D_QK, device="cuda").to(torch.bfloat16)
    idx = torch.full((b, 1, topk), -1, dtype=torch.int32, device="cuda")
    refs = []
    sink = torch.randn(h, device="cuda") if case["sink"] else None
    for i, n in enumerate(case["lens"]):
        pick = torch.randperm(n, device="cuda")[:min(topk, n)]
        slots = table[i][pick // page].long() * page + pick % page
        idx[i, 0, :len(slots)] = slots.to(torch.int32)
        refs.append(_attend(q[i].float(), deq[slots], deq[slots][:, :D_V], D_QK ** -0.5, None, sink))
    meta, _ = fm.get_mla_metadata()
    out, _ = fm.flash_mla_with_kvcache(q, cache, None, None, D_V, meta, softmax_scale=D_QK ** -0.5,
                                       is_fp8_kvcache=fp8, indices=idx, attn_sink=sink)
    return _check(out.reshape(-1, h, D_V), torch.cat(refs), fp8, {"bytes_per_token": int(cache.shape[-1])
                                                                  * cache.element_size()})


def _prefill(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.third_party.flashmla import flash_mla_interface as fm

    sq, skv, h, topk, d = 64, 4096, case["heads"], case["topk"], case["d_qk"]
    q = torch.randn(sq, h, d, device="cuda").to(torch.bfloat16)
    kv = torch.randn(skv, 1, d, device="cuda").to(torch.bfloat16)
    idx = torch.stack([torch.randperm(skv, device="cuda")[:topk] for _ in range(sq)]).to(torch.int32)[:, None, :]
    scale = d ** -0.5
    res = fm.flash_mla_sparse_fwd(q, kv, idx, scale, D_V)
    out = res[0]
    ref = torch.stack([_attend(q[i:i + 1], kv[idx[i, 0].long(), 0], kv[idx[i, 0].long(), 0, :D_V], scale, None)[0]
                       for i in range(sq)])
    return _check(out, ref, False, {})


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    return {"dense": _dense, "dense-fp8": _dense_fp8, "sparse": _sparse, "prefill": _prefill}[case["path"]](case)


SUBJECT = {"dense": "flashmla-dense-decode", "dense-fp8": "flashmla-dense-decode", "sparse": "flashmla-sparse-decode",
           "prefill": "flashmla-sparse-prefill"}
