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

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates
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
        "flashinfer-fa3-fp8-kv-needs-fp8-query",
        "flashinfer-fa3-requires-sm90a",
        "flashinfer-fa2-requires-nvidia",
        "flashinfer-fa3-requires-nvidia",
        "flashinfer-arch-range",
        "flashinfer-fa2-q-kv-dtypes",
    ],
    requires={"archs": None, "packages": ["torch", "flashinfer"]},
    timeout_s=420,
    workers=4,
    rejudges=(1,),  # version 1 had the same cases; it forced FA3 compiles and recorded the JIT arch gate as ERROR
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


SUBJECT = {"prefill-fa3": "flashinfer-fa3", "prefill-fa2": "flashinfer-fa2", "decode-paged": "flashinfer-fa2",
           "decode-single": "flashinfer-fa2"}


def subjects(p: dict[str, Any]) -> list[str]:
    """The kernel a case exercises. FA3 with fp8 KV and a bf16 query is refused by FlashInfer's own helper
    (is_fa3_backend_supported) before any head-dim or arch check, so those cases gate no FA3 claim here."""
    if p.get("path") == "prefill-fa3" and p.get("kv_dtype") != "bf16":
        return []
    return [SUBJECT.get(str(p.get("path")), "")]


def reason_of(obs: dict[str, Any]) -> str | None:
    """The gate a refusal names: FlashInfer's JIT arch gate, the FA3 helpers the probe asks, else keywords."""
    text = str(obs.get("message") or "")
    if "No supported CUDA architectures" in text:
        return "ARCH"
    if "is_fa3_backend_supported" in text:
        return "KV_DTYPE"
    if "is_fa3_prefill_head_dim_supported" in text or "Unsupported head_dim" in text:
        return "HEAD_DIM"
    if "is_sm90a_supported" in text:
        return "ARCH"
    return default_reason(obs)


def variables(env: dict[str, Any]) -> Any:
    def bind(p: dict[str, Any]) -> dict[str, Any]:
        path = str(p.get("path", ""))
        out = {"vendor": "nvidia", "sm": env.get("architecture"), "cuda": env.get("cuda"), "dtype": "bf16",
               "kv_dtype": p.get("kv_dtype"), "kv_dtype_differs": p.get("kv_dtype") != "bf16",
               "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim"),
               "phase": "decode" if path.startswith("decode") else "prefill"}
        out.update(env_vars(env))
        return out
    return bind


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Every claim's prediction per case comes from its own `when`/`requires` (env['claims']); the head-dim claims
    judge only the bf16 query paths they name. A refusal is read by its message (reason_of)."""
    claims = env.get("claims") or {}
    gates = claim_gates(claims, SPEC.claims, subjects, variables(env))
    version = (env.get("libraries") or {}).get("flashinfer")

    def scope_of(gate: Any) -> dict[str, Any]:
        subject = (claims.get(gate.claim) or {}).get("subject")
        when = variables(env)
        picked = [o for o in observations if SUBJECT.get(str((o.get("params") or {}).get("path"))) == subject
                  and gate.expect(o.get("params") or {}) is not None]
        params = [o.get("params") or {} for o in picked]
        phases = sorted({when(p)["phase"] for p in params})
        out: dict[str, Any] = {"sm": env.get("architecture"), "flashinfer": version,
                               "paths": sorted({str(p.get("path")) for p in params}),
                               "head_dims": sorted({int(p.get("head_dim", 0)) for p in params}),
                               "kv_dtypes": sorted({str(p.get("kv_dtype")) for p in params})}
        if len(phases) == 1:
            out["phase"] = phases[0]
        return out

    return judge_gates(gates, observations, scope_of, _label, reason_of=reason_of)


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
