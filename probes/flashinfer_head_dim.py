"""Probe: FlashInfer head-dim gates at the library level (not vLLM's engine gate).

Paths: single decode, paged batch decode, single prefill with backend fa2 and with backend fa3, for head dims
64, 128, 256, 512 with a bf16 query and bf16 or fp8 (e4m3) KV. Every output is compared with an fp32
reference computed from the very (dequantized) K and V the kernel read. Kernels are JIT-compiled on first use
and cached on disk, so several workers compile different variants at once and later runs reuse them.

FA3 prefill: FlashInfer itself decides whether FA3 takes a shape (`is_fa3_prefill_head_dim_supported`,
`is_fa3_backend_supported`; backend="auto" falls back to fa2 otherwise). Where that gate says no, the case is
recorded UNSUPPORTED with the gate's answer instead of forcing a compile of a kernel FlashInfer never builds.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import accepted, gate_verdict, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="flashinfer-head-dim",
    version=2,
    order=40,
    title="FlashInfer head-dim gates",
    claims=[
        "flashinfer-decode-head-dims",
        "flashinfer-prefill-fa2-head-dims",
        "flashinfer-prefill-fa3-head-dims",
        "flashinfer-head-dim-256-512-unsupported",
        "flashinfer-fp8-kv-head-dim-512-needs-sm100",
    ],
    requires={"archs": None, "packages": ["torch", "flashinfer"]},
    timeout_s=420,
    workers=4,
)

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


# ---- judge (pure) --------------------------------------------------------------------------------


def _label(p: dict[str, Any]) -> str:
    return f"{p.get('path')} hd{p.get('head_dim')} kv {p.get('kv_dtype')}"


ARCH_REFUSAL = "No supported CUDA architectures found"  # FlashInfer's JIT arch gate (compilation_context.py)
FP8_LARGE_HEAD_MAJORS = (10, 11, 12)  # _fa2_head_dim_nvcc_flags: one-byte KV, head dim > 256


def _cc_major(env: dict[str, Any]) -> int | None:
    try:
        return int(str(env.get("compute_capability")).split(".")[0])
    except ValueError:
        return None


def _fp8_large_head_verdict(observations: list[dict[str, Any]], env: dict[str, Any],
                            paths: list[str], scope: dict[str, Any]) -> dict[str, Any]:
    """flashinfer-fp8-kv-head-dim-512-needs-sm100 on the FA2 library paths with fp8 KV.

    hd > 256: the claim says it runs only on majors 10-12. A refusal counts for the claim only when it carries the
    arch-gate message (an earlier runner recorded that refusal as ERROR; the message decides, not the label); a
    refusal for another reason says nothing about this gate. hd <= 256 is the control: fp8 KV itself must run there,
    or the refusal at 512 is not about the head dim."""
    major = _cc_major(env)

    def fp8(p: dict[str, Any]) -> bool:
        return p.get("path") in paths and str(p.get("kv_dtype", "")).startswith("fp8")

    def expect(p: dict[str, Any]) -> bool | None:
        if not fp8(p) or major is None:
            return None
        return True if p["head_dim"] <= 256 else major in FP8_LARGE_HEAD_MAJORS

    def relabel(o: dict[str, Any]) -> dict[str, Any]:
        p = o.get("params") or {}
        if not fp8(p) or p.get("head_dim", 0) <= 256 or o.get("outcome") not in ("UNSUPPORTED", "ERROR"):
            return o
        gated = ARCH_REFUSAL.lower() in str(o.get("message") or "").lower()
        return {**o, "outcome": "UNSUPPORTED" if gated else "ERROR"}

    scope = {**scope, "cc": env.get("compute_capability"), "head_dims": values(observations, "head_dim", fp8),
             "kv_dtypes": values(observations, "kv_dtype", fp8)}
    relabelled = [relabel(o) for o in observations]
    verdict = gate_verdict("flashinfer-fp8-kv-head-dim-512-needs-sm100", relabelled, expect, scope, _label)
    clear = {(o.get("params") or {}).get("head_dim", 0) > 256 for o in relabelled
             if fp8(o.get("params") or {}) and accepted(o) is not None}
    if verdict["verdict"] == "confirmed" and clear != {True, False}:
        # Agreement on one side only (controls ran, or large heads were refused with fp8 KV refused everywhere
        # unseen) does not show the head-dim gate.
        verdict = {**verdict, "verdict": "inconclusive",
                   "detail": verdict["detail"] + "; needs a clear answer both above and at or below head dim 256"}
    return verdict


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    sm = env.get("architecture")
    version = (env.get("libraries") or {}).get("flashinfer")

    def scope(phase: str, paths: list[str], **extra: Any) -> dict[str, Any]:
        picked = lambda p: p.get("path") in paths  # noqa: E731
        return {"sm": sm, "flashinfer": version, "phase": phase, "paths": paths,
                "head_dims": values(observations, "head_dim", picked),
                "kv_dtypes": values(observations, "kv_dtype", picked), **extra}

    decode = ["decode-single", "decode-paged"]
    fa2 = ["prefill-fa2"]
    library = [*decode, *fa2]
    fa3_ok = {64, 128, 256}
    return [
        gate_verdict("flashinfer-decode-head-dims", observations,
                     lambda p: p["head_dim"] in (64, 128, 256, 512) if p.get("path") in decode else None,
                     scope("decode", decode), _label),
        gate_verdict("flashinfer-prefill-fa2-head-dims", observations,
                     lambda p: p["head_dim"] in (64, 128, 256, 512) if p.get("path") in fa2 else None,
                     scope("prefill", fa2), _label),
        gate_verdict("flashinfer-prefill-fa3-head-dims", observations,
                     lambda p: p["head_dim"] in fa3_ok
                     if p.get("path") == "prefill-fa3" and p.get("kv_dtype") == "bf16" else None,
                     scope("prefill", ["prefill-fa3"], kv_dtypes=["bf16"]), _label),
        gate_verdict("flashinfer-head-dim-256-512-unsupported", observations,
                     # The seed asserts refusals only; 64 and 128 running says nothing about it.
                     lambda p: False if p.get("path") in library and p["head_dim"] in (256, 512) else None,
                     {k: v for k, v in scope("", library).items() if k != "phase"}, _label),
        _fp8_large_head_verdict(observations, env, library,
                                {k: v for k, v in scope("", library).items() if k != "phase"}),
    ]


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    """Outcome grid: path -> kv dtype -> head dim -> outcome (OK! when the result was wrong)."""
    grid: dict[str, dict[str, dict[str, str]]] = {}
    for o in observations:
        p = o.get("params") or {}
        outcome = str(o.get("outcome"))
        if outcome == "OK" and (o.get("metrics") or {}).get("correct") is False:
            outcome = "OK-but-wrong"
        grid.setdefault(p.get("path", "?"), {}).setdefault(p.get("kv_dtype", "?"), {})[str(p.get("head_dim"))] = (
            outcome)
    return {"outcomes": grid}
