"""Probe: FlashAttention-3 as vLLM ships it (vllm-flash-attn, the FA-3 build inside the vllm wheel), on sm90.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_fa3.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.vllm_fa3 import BASE, GQA, SPEC, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


DTYPE_GRID = ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]


HEAD_DIMS = [64, 80, 96, 128, 192, 256, 320, 512]


PAIRS = [(192, 128), (64, 512), (128, 256), (256, 128), (128, 96)]


BLOCKS = [1, 8, 16, 32, 64, 128, 256, 512]


TOL = {"half": 1e-2, "fp8": 6e-2}


"""rel L2 error against fp32 on the same inputs: bf16/fp16 kernels land near 3e-3 (bf16 P and O rounding); FA-3's
fp8 path also rounds P to e4m3 (3 mantissa bits, ~3e-2 relative per element, averaging down), so 6e-2."""


def _case(name: str, **over: Any) -> dict[str, Any]:
    return {**BASE, **over, "name": name}


def cases() -> list[dict[str, Any]]:
    out = [_case(f"dtype {d} hd{h}", dtype=d, kv_dtype=d, head_dim=h, head_dim_v=h)
           for d in DTYPE_GRID for h in HEAD_DIMS]
    out += [_case(f"pair {a}/{b} {d}", dtype=d, kv_dtype=d, head_dim=a, head_dim_v=b)
            for a, b in PAIRS for d in ("bf16", "fp8_e4m3")]
    out += [_case("mixed q bf16 kv fp8", kv_dtype="fp8_e4m3"), _case("mixed q fp8 kv bf16", dtype="fp8_e4m3"),
            _case("mixed q fp16 kv bf16", dtype="fp16"), _case("kv fp4", kv_dtype="fp4"),
            _case("fp8 out fp16", dtype="fp8_e4m3", kv_dtype="fp8_e4m3", out_dtype="fp16"),
            _case("fp8 out fp32", dtype="fp8_e4m3", kv_dtype="fp8_e4m3", out_dtype="fp32")]
    out += [_case(f"fp8 descale {s}", dtype="fp8_e4m3", kv_dtype="fp8_e4m3", descale=s)
            for s in ("none", "scalar", "batch_qheads")]
    out += [_case(f"gqa {h[0]}:{h[1]} {d}", heads=h, dtype=d, kv_dtype=d) for h in GQA for d in ("bf16", "fp8_e4m3")]
    out += [_case(f"noncausal {d}", causal=False, dtype=d, kv_dtype=d) for d in ("bf16", "fp8_e4m3")]
    out += [_case(f"window {d}", window=[63, 0], dtype=d, kv_dtype=d) for d in ("bf16", "fp8_e4m3")]
    out += [_case(f"softcap {d}", softcap=30.0, dtype=d, kv_dtype=d) for d in ("bf16", "fp16", "fp8_e4m3")]
    out += [_case(f"sinks {d} {h[0]}:{h[1]}", sinks=True, heads=h, dtype=d, kv_dtype=d)
            for d in ("bf16", "fp16", "fp8_e4m3") for h in ([8, 2], [64, 8], [128, 8])]
    out += [_case(f"paged b{b} {d}", block=b, dtype=d, kv_dtype=d, lens_q=[1, 1, 1], lens_k=[1000, 777, 64])
            for b in BLOCKS for d in ("bf16", "fp8_e4m3")]
    out += [_case(f"paged prefill b{b}", block=b, lens_q=[128, 17], lens_k=[700, 17]) for b in (16, 64)]
    out += [_case("varlen", lens_q=[1, 100, 257, 9], lens_k=[1000, 100, 900, 4000])]
    out += [_case(f"splits {n} {d}", num_splits=n, block=64, dtype=d, kv_dtype=d, lens_q=[1, 1], lens_k=[8192, 5000])
            for n in (1, 4, 16, 300) for d in ("bf16", "fp8_e4m3")]
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    """One call of the fork's varlen entry point (fa_version from the case: 3 here, 2 for probes/vllm_fa2.py)."""
    import torch

    from probes import _vllm_kernels as kx

    fa = kx.flash_attn()
    torch.manual_seed(0)
    dev = "cuda"
    hq, hk = case["heads"]
    d, dv = case["head_dim"], case["head_dim_v"]
    lq, lk = case["lens_q"], case["lens_k"]
    q = torch.randn(sum(lq), hq, d, device=dev)
    k = torch.randn(sum(lk), hk, d, device=dev)
    v = torch.randn(sum(lk), hk, dv, device=dev)
    q8, qs, qf = kx.quantize(q, case["dtype"])
    k8, ks, kf = kx.quantize(k, case["kv_dtype"])
    v8, vs, vf = kx.quantize(v, case["kv_dtype"])
    batch = len(lq)
    kwargs: dict[str, Any] = {}
    descale = case["descale"]
    for name, s in (("q", qs), ("k", ks), ("v", vs)):
        if s is None or descale == "none":
            continue
        heads = hq if descale == "batch_qheads" else hk
        kwargs[f"{name}_descale"] = s.reshape(1) if descale == "scalar" else s.expand(batch, heads).contiguous()
    if descale == "none":  # no descale: the kernel multiplies by 1, so the reference reads the raw fp8 values
        qf, kf, vf = (x.float() if x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else f
                      for x, f in ((q8, qf), (k8, kf), (v8, vf)))
    sinks = torch.randn(hq, device=dev, dtype=torch.bfloat16 if case["dtype"] != "fp16" else torch.float16) + 2.0 \
        if case["sinks"] else None
    if sinks is not None and case["dtype"] in kx.FP8:
        sinks = sinks.to(torch.bfloat16)
    cu_q = torch.tensor([0, *torch.tensor(lq).cumsum(0).tolist()], device=dev, dtype=torch.int32)
    scale = d ** -0.5
    if case["block"]:
        kc, vc, table = kx.paged(k8.view(torch.uint8) if k8.element_size() == 1 else k8,
                                 v8.view(torch.uint8) if v8.element_size() == 1 else v8, lk, case["block"])
        if k8.element_size() == 1:
            kc, vc = kc.view(k8.dtype), vc.view(v8.dtype)
        kv = {"k": kc, "v": vc, "block_table": table,
              "seqused_k": torch.tensor(lk, device=dev, dtype=torch.int32)}
    else:
        cu_k = torch.tensor([0, *torch.tensor(lk).cumsum(0).tolist()], device=dev, dtype=torch.int32)
        kv = {"k": k8, "v": v8, "cu_seqlens_k": cu_k}
    out_buf = None
    if case.get("out_dtype"):
        out_buf = torch.empty(sum(lq), hq, dv, device=dev, dtype=kx.DTYPES[case["out_dtype"]])
    window = case["window"]
    alibi = torch.rand(hq, device=dev) * 0.1 if case.get("alibi") else None
    res = fa.flash_attn_varlen_func(q8, max_seqlen_q=max(lq), cu_seqlens_q=cu_q, max_seqlen_k=max(lk),
                                    softmax_scale=scale, causal=case["causal"], window_size=window,
                                    softcap=case["softcap"], s_aux=sinks, num_splits=case["num_splits"],
                                    out=out_buf, fa_version=case.get("fa_version", 3), alibi_slopes=alibi,
                                    **kv, **kwargs)
    out = res[0] if isinstance(res, tuple) else res
    torch.cuda.synchronize()
    refs, qo, ko = [], 0, 0
    for b in range(batch):
        refs.append(kx.reference(qf[qo:qo + lq[b]], kf[ko:ko + lk[b]], vf[ko:ko + lk[b]], causal=case["causal"],
                                 window=(window[0], window[1]), softcap=case["softcap"], sinks=sinks, scale=scale,
                                 alibi=alibi))
        qo, ko = qo + lq[b], ko + lk[b]
    ref = torch.cat(refs)
    m = kx.compare(out, ref)
    fp8 = case["dtype"] in kx.FP8 or case["kv_dtype"] in kx.FP8
    tol = TOL["fp8" if fp8 else "half"]
    metrics = {**m, "out_dtype": str(out.dtype).removeprefix("torch."), "tolerance": tol,
               "correct": m["finite"] and m["rel_l2"] <= tol}
    if sinks is not None:  # a kernel that ignored the sinks matches the plain reference instead
        plain = torch.cat([kx.reference(qf[sum(lq[:b]):sum(lq[:b + 1])], kf[sum(lk[:b]):sum(lk[:b + 1])],
                                        vf[sum(lk[:b]):sum(lk[:b + 1])], causal=case["causal"], window=(-1, -1),
                                        softcap=0.0, sinks=None, scale=scale) for b in range(batch)])
        metrics["rel_l2_vs_no_sinks"] = kx.compare(out, plain)["rel_l2"]
    return {"outcome": "OK", "max_abs_err": float((out.float() - ref).abs().max()), "metrics": metrics}
