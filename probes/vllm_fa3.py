"""Probe: FlashAttention-3 as vLLM ships it (vllm-flash-attn, the FA-3 build inside the vllm wheel), on sm90.

Every case calls `flash_attn_varlen_func(..., fa_version=3)` of vllm/vllm_flash_attn/flash_attn_interface.py once,
forward only, and compares the output with an fp32 reference computed from the very (dequantized) inputs the
kernel read; a refusal is recorded with the library's message. Axes: q and KV dtypes (fp16, bf16, fp8 e4m3/e5m2,
mixed, fp4), the fp8 output dtype and descale shapes, head dims 64..512 and unequal QK/V pairs (the 192/128 MLA
prefill shape), GQA ratios, causal and sliding window, softcap, attention sinks (s_aux), paged KV with block sizes
1..512, varlen batches, split-KV (num_splits). The run says which library and release ran: `vllm-flash-attn-3` at
the vLLM release whose wheel it came from (vllm/KB_RELEASE). FA-3 runs only on sm90: elsewhere nothing runs and
the claims are untestable there.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import PROBE_FAULT, Gate, default_reason, judge_gates, outcome_rows, values
from kbtool.probe.spec import ProbeSpec
from kbtool.probe.verdicts import untestable_here

LIB = "vllm-flash-attn-3"
SPEC = ProbeSpec(
    id="vllm-fa3",
    version=1,
    order=40,
    title="FA-3 (vLLM's fork) gates and features",
    claims=[
        "fa3-requires-sm90", "fa3-head-dims", "fa3-fp8-e4m3-forward-only", "fa3-fp8-head-dim-multiple-16",
        "fa3-fp8-output-bf16", "fa3-fp8-kv-needs-fp8-query", "fa3-no-fp4-kv", "fa3-sinks",
        "flash-attention-3-sliding-window", "vllm-fa3-sinks-bf16-max-64-heads", "vllm-fa3-paged-any-block-size",
        "fa3-num-splits-max-256",
    ],
    requires={"archs": ["sm90"], "packages": ["torch", LIB]},
    timeout_s=240,
    untestable=("FA-3 here is vLLM's build inside the vllm wheel (vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so), "
                "unpacked without vLLM by ../shared/gpu/fetch-wheels.sh --vllm-kernels 0.24.0; it loads only "
                "against the torch build that release pins (2.11, CUDA 13)."),
)

BASE: dict[str, Any] = {"dtype": "bf16", "kv_dtype": "bf16", "head_dim": 128, "head_dim_v": 128, "heads": [8, 2],
                        "causal": True, "window": [-1, -1], "softcap": 0.0, "sinks": False, "block": 0,
                        "lens_q": [128, 64], "lens_k": [384, 200], "num_splits": 0, "descale": "batch_kvheads"}
DTYPE_GRID = ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]
HEAD_DIMS = [64, 80, 96, 128, 192, 256, 320, 512]
PAIRS = [(192, 128), (64, 512), (128, 256), (256, 128), (128, 96)]
GQA = [[8, 8], [8, 1], [32, 4], [64, 8], [128, 8], [6, 4]]
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


# ---- judge (pure) --------------------------------------------------------------------------------

_MESSAGES: tuple[tuple[str, str], ...] = (  # FA-3's own refusal strings (hopper/flash_api.cpp) -> reason codes
    ("head dimension at most", "HEAD_DIM"), ("headdim is different", "HEAD_DIM"), ("v headdim", "HEAD_DIM"),
    ("head_size should be a multiple", "HEAD_DIM"), ("head_size_v should be a multiple", "HEAD_DIM"),
    ("query and key must have the same dtype", "Q_DTYPE"), ("same dtype as query", "Q_DTYPE"),
    ("only supports fp16, bf16, and fp8_e4m3", "DTYPE"), ("output must have dtype", "OUT_DTYPE"),
    ("descale must have shape", "DESCALE"), ("s aux", "SINKS"), ("query heads <= 64", "SINKS"),
    ("num_splits > 256", "SPLITS"), ("number of heads in key/value must divide", "GQA"),
)


def reason_of(obs: dict[str, Any]) -> str | None:
    text = str(obs.get("message") or "").lower()
    for phrase, code in _MESSAGES:
        if phrase in text:
            return code
    if "unexpected keyword" in text or ("takes" in text and "positional" in text):
        return PROBE_FAULT
    return default_reason(obs)


def _hd_ok(p: dict[str, Any], mult: int = 8) -> bool:
    a, b = int(p["head_dim"]), int(p["head_dim_v"])
    if a > 256 or a % mult or b % mult:
        return False
    if a == b:
        return True
    return (128 < a <= 192 and 96 < b <= 128) or (a <= 64 and b <= 512)


def _plain(p: dict[str, Any]) -> bool:
    """A case that varies nothing but dtype and head dims (the default GQA, mask and layout)."""
    return (p["heads"] == BASE["heads"] and not p["sinks"] and not p["softcap"] and p["descale"] == "batch_kvheads"
            and not p.get("out_dtype") and p["window"] == [-1, -1] and p["causal"])


def _v_le_256(p: dict[str, Any]) -> bool:
    """head_dim_v above 256 has a rule of its own ("HeaddimV > 256 requires fp16 and bf16"), no claim's here."""
    return int(p["head_dim_v"]) <= 256


def _fp8(p: dict[str, Any]) -> bool:
    return str(p["dtype"]).startswith("fp8") or str(p["kv_dtype"]).startswith("fp8")


def gates(sm: str | None) -> list[Gate]:
    hopper = sm == "sm90"

    def head_dims(p: dict[str, Any]) -> bool | None:
        if not _plain(p) or p["dtype"] not in ("bf16", "fp16") or p["dtype"] != p["kv_dtype"]:
            return None
        return hopper and _hd_ok(p)

    def fp8_dtypes(p: dict[str, Any]) -> bool | None:
        if not _fp8(p) or not _plain(p) or p["dtype"] != p["kv_dtype"] or not _hd_ok(p, 16) or not _v_le_256(p):
            return None
        return hopper and p["kv_dtype"] == "fp8_e4m3"

    def fp8_mult16(p: dict[str, Any]) -> bool | None:
        if p["dtype"] != "fp8_e4m3" or p["kv_dtype"] != "fp8_e4m3" or not _plain(p) or not _hd_ok(p) \
                or not _v_le_256(p):
            return None
        return _hd_ok(p, 16)

    def fp8_query(p: dict[str, Any]) -> bool | None:
        if p["kv_dtype"] != "fp8_e4m3" or not _plain(p) or p["head_dim"] != 128 or p["head_dim_v"] != 128:
            return None
        return p["dtype"] == "fp8_e4m3"

    def no_fp4(p: dict[str, Any]) -> bool | None:
        return False if p["kv_dtype"] == "fp4" else None

    def arch(p: dict[str, Any]) -> bool | None:
        return hopper if _plain(p) and p["dtype"] == p["kv_dtype"] == "bf16" and p["head_dim"] == 128 else None

    def sinks(p: dict[str, Any]) -> bool | None:
        return True if p["sinks"] and p["dtype"] == "bf16" and p["heads"][0] <= 64 else None

    def window(p: dict[str, Any]) -> bool | None:
        return True if p["window"][0] >= 0 else None

    def any_block(p: dict[str, Any]) -> bool | None:
        return True if p["block"] and not p["num_splits"] else None

    def splits(p: dict[str, Any]) -> bool | None:
        return p["num_splits"] <= 256 if p["num_splits"] else None

    def sink_heads(p: dict[str, Any]) -> bool | None:  # the fp16 cases pass an fp16 sink tensor: another gate
        return p["heads"][0] <= 64 if p["sinks"] and p["dtype"] != "fp16" else None

    return [Gate("fa3-requires-sm90", arch, "ARCH"), Gate("fa3-head-dims", head_dims, "HEAD_DIM"),
            Gate("fa3-fp8-e4m3-forward-only", fp8_dtypes, "DTYPE"),
            Gate("fa3-fp8-head-dim-multiple-16", fp8_mult16, "HEAD_DIM"),
            Gate("fa3-fp8-kv-needs-fp8-query", fp8_query, "Q_DTYPE"), Gate("fa3-no-fp4-kv", no_fp4, None),
            Gate("fa3-sinks", sinks, "SINKS"), Gate("flash-attention-3-sliding-window", window, "SLIDING_WINDOW"),
            Gate("vllm-fa3-sinks-bf16-max-64-heads", sink_heads, "SINKS"),
            Gate("vllm-fa3-paged-any-block-size", any_block, "BLOCK_SIZE"),
            Gate("fa3-num-splits-max-256", splits, "SPLITS")]


def _output_verdict(obs: list[dict[str, Any]], scope: dict[str, Any]) -> dict[str, Any]:
    """fa3-fp8-output-bf16: fp8 inputs give bf16 output; descales of shape (batch, num_heads_k) are taken and
    others refused."""
    def find(name: str) -> dict[str, Any] | None:
        return next((o for o in obs if (o.get("params") or {}).get("name") == name), None)

    base, other = find("dtype fp8_e4m3 hd128"), find("fp8 descale batch_qheads")
    if base is None or base.get("outcome") != "OK":
        return {"claim": "fa3-fp8-output-bf16", "verdict": "inconclusive", "scope": scope,
                "detail": "the fp8 hd128 case did not run"}
    got = (base.get("metrics") or {}).get("out_dtype")
    shape_refused = (other is not None and other.get("outcome") in ("UNSUPPORTED", "ERROR")
                     and reason_of(other) == "DESCALE")
    correct = (base.get("metrics") or {}).get("correct")
    said = (other or {}).get("message") or (other or {}).get("outcome")
    detail = (f"fp8 q/k/v gave {got} output (correct: {correct}); descales of shape (batch, num_heads_q) "
              f"{'refused' if shape_refused else 'not refused'}: {said}")
    ok = got == "bfloat16" and correct and shape_refused
    return {"claim": "fa3-fp8-output-bf16", "verdict": "confirmed" if ok else "contradicted" if got != "bfloat16"
            else "inconclusive", "scope": scope, "detail": detail}


def _label(p: dict[str, Any]) -> str:
    return str(p.get("name"))


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    sm = env.get("architecture")
    version = (env.get("libraries") or {}).get(LIB)
    gs = gates(sm)

    def scope_of(gate: Gate) -> dict[str, Any]:
        picked = lambda p: gate.expect(p) is not None  # noqa: E731
        decode = all(set(p["lens_q"]) == {1} for p in (o.get("params") or {} for o in observations) if picked(p))
        return {"sm": sm, LIB: version, "phase": "decode" if decode and any(
                    picked(o.get("params") or {}) for o in observations) else "prefill",
                "dtypes": values(observations, "dtype", picked), "head_dims": values(observations, "head_dim", picked)}

    out = judge_gates(gs, observations, scope_of, _label, reason_of=reason_of)
    out.append(_output_verdict(observations, {"sm": sm, LIB: version, "dtypes": ["fp8_e4m3"]}))
    if sm != "sm90":
        untestable_here(out, SPEC.claims, f"vLLM's FA-3 build is compiled for sm90a only; {sm} runs none of it")
    return out


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    return {"outcomes": outcome_rows(observations, _label)}
