"""Probe: FlashInfer's other attention paths on this GPU: XQA and trtllm-gen paged decode, cuDNN decode and
prefill, and MLA (DeepSeek latent attention) decode and incremental prefill through the fa2 and fa3 backends;
since version 3 also attention sinks (xqa, trtllm-gen, fa2 paged decode), a sliding window on fa2 paged decode,
and FlashInfer's own FA3 feature gate for fp8 and NVFP4 KV caches.

Each case calls the public API once with a bf16 query and bf16 or fp8 (e4m3) KV, checks the output against an
fp32 reference computed from the very pages the kernel read, and records the library's refusal otherwise. A sink
case is compared with both the sink reference and the plain one: FlashInfer's standard fa2/fa3 paged run takes a
`sinks` argument but (0.7.2.post1, prefill.py `paged_run` fa2 branch, decode.py non-tensor-core `run`) never hands
it to the kernel, so output equal to the plain reference is recorded as "sinks ignored", a refusal of sinks.
trtllm-gen kernels are downloaded at first use; the probe host has no network, so a failure to fetch them is
recorded as its own gate ("needs network or the cubin package"), not as an architecture verdict.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec
from kbtool.probe.verdicts import untestable_here

SPEC = ProbeSpec(
    id="flashinfer-paths",
    version=3,
    order=45,
    title="FlashInfer XQA, trtllm-gen, cuDNN and MLA paths",
    claims=[
        "flashinfer-xqa-requires-sm90",
        "flashinfer-xqa-requires-nvidia",
        "flashinfer-trtllm-gen-requires-sm100",
        "flashinfer-trtllm-gen-requires-nvidia",
        "flashinfer-cudnn-requires-nvidia",
        "flashinfer-fa2-requires-nvidia",
        "flashinfer-fa3-requires-nvidia",
        "flashinfer-fa3-requires-sm90a",
        "flashinfer-arch-range",
        "flashinfer-fa2-q-kv-dtypes",
        "flashinfer-xqa-q-kv-dtypes",
        "flashinfer-trtllm-gen-q-kv-dtypes",
        "flashinfer-trtllm-gen-cubins",
        "flashinfer-xqa-sinks",
        "flashinfer-trtllm-gen-sinks",
        "flashinfer-trtllm-gen-tested-head-dims",
        "flashinfer-fa2-no-sinks",
        "flashinfer-fa2-sliding-window",
        "flashinfer-fa3-no-sinks",
        "flashinfer-fa3-sliding-window",
        "flashinfer-fa3-fp8-kv-needs-fp8-query",
        "flashinfer-fa3-no-nvfp4-kv",
        "flashinfer-fa2-nvfp4-kv-prefill-only",
    ],
    requires={"archs": None, "packages": ["torch", "flashinfer"]},
    timeout_s=300,
    workers=2,
    rejudges=(2,),  # version 3 only added cases; the version-2 cases kept their parameters
)


PAGE, KV_LEN, BATCH, QO_HEADS, KV_HEADS = 32, 1024, 4, 8, 2


NETWORK_GATE = "needs network or the cubin package"


NOT_ATTEMPTED = "not attempted"


TRTLLM_GEN_ARCHS = ("sm100", "sm103")


OFF_ARCH_UNTESTABLE = ("flashinfer-trtllm-gen-sinks", "flashinfer-trtllm-gen-tested-head-dims",
                       "flashinfer-trtllm-gen-q-kv-dtypes")


SUBJECT = {"xqa": "flashinfer-xqa", "trtllm-gen": "flashinfer-trtllm-gen", "cudnn": "flashinfer-cudnn",
           "mla-fa2": "flashinfer-fa2", "mla-fa3": "flashinfer-fa3", "decode-fa2": "flashinfer-fa2",
           "prefill-fa3": "flashinfer-fa3",
           "fa3-gate": "flashinfer-fa3", "nvfp4-prefill-fa2": "flashinfer-fa2", "nvfp4-decode-fa2": "flashinfer-fa2",
           "nvfp4-decode-fa2-tc": "flashinfer-fa2"}


def _label(p: dict[str, Any]) -> str:
    extra = "".join([" sinks" if p.get("sinks") else "",
                     f" window {p['sliding_window']}" if p.get("sliding_window") else "",
                     f" q {p['dtype']}" if p.get("dtype") else ""])
    return f"{p.get('path')} {p.get('phase')} hd{p.get('head_dim')} kv {p.get('kv_dtype')}{extra}"


def reason_of(obs: dict[str, Any]) -> str | None:
    """trtllm-gen's failed kernel download is the network gate; an API-usage error of this probe (fp8 MLA without
    scales, cuDNN prefill without offsets, in version 1) is no gate at all."""
    text = str(obs.get("message") or "")
    if "checksums.txt" in text or NETWORK_GATE in text:
        return "CUBINS"  # the reason code of flashinfer-trtllm-gen-cubins
    if text.startswith(NOT_ATTEMPTED):
        return "PROBE"
    if "ckv_scale or ckv_scale_arr is required" in text or "batch_offsets_q and batch_offsets_o are required" in text:
        return "PROBE"
    return default_reason(obs)


def variables(env: dict[str, Any]) -> Any:
    def bind(p: dict[str, Any]) -> dict[str, Any]:
        out = {"vendor": "nvidia", "sm": env.get("architecture"), "cuda": env.get("cuda"),
               "dtype": p.get("dtype", "bf16"), "kv_dtype": p.get("kv_dtype"),
               "kv_dtype_differs": p.get("kv_dtype") != p.get("dtype", "bf16"),
               "phase": p.get("phase"), "block_size": PAGE,
               "sinks": bool(p.get("sinks")), "sliding_window": int(p.get("sliding_window") or 0),
               "attention": "mla" if str(p.get("path", "")).startswith("mla-") else "gqa",  # 8 q / 2 KV heads
               # the probe host has no network (KINDS.md) and no flashinfer-cubin package unless it says so
               "trtllm_kernels": "flashinfer-cubin" in (env.get("libraries") or {})}
        out.update(env_vars(env))
        if not str(p.get("path", "")).startswith("mla-"):
            out["head_dim"] = out["head_dim_v"] = p.get("head_dim")
        return out
    return bind


FP8_KV_ATOL = 5e-2


def _with_fp8_budget(o: dict[str, Any]) -> dict[str, Any]:
    p, m = o.get("params") or {}, o.get("metrics") or {}
    if (p.get("path") == "xqa" and str(p.get("kv_dtype", "")).startswith("fp8")
            and isinstance(o.get("max_abs_err"), (int, float))):
        return {**o, "metrics": {**m, "correct": bool(o["max_abs_err"] <= FP8_KV_ATOL)}}
    return o


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    observations = [_with_fp8_budget(o) for o in observations]
    claims = env.get("claims") or {}
    gates = claim_gates(claims, SPEC.claims, lambda p: [SUBJECT.get(str(p.get("path")), "")], variables(env))
    version = (env.get("libraries") or {}).get("flashinfer")

    def scope_of(gate: Any) -> dict[str, Any]:
        subject = (claims.get(gate.claim) or {}).get("subject")
        gated = [o for o in observations if gate.expect(o.get("params") or {}) is not None]
        if gated:  # the scope of the cases the claim speaks about (a sink claim: the sink cases)
            picked = lambda p: gate.expect(p) is not None  # noqa: E731
        else:
            picked = lambda p: SUBJECT.get(str(p.get("path"))) == subject  # noqa: E731
        phases = values(observations, "phase", picked)
        out = {"sm": env.get("architecture"), "flashinfer": version, "paths": values(observations, "path", picked),
               "kv_dtypes": values(observations, "kv_dtype", picked)}
        if len(phases) == 1:
            out["phase"] = phases[0]
        return out

    out = judge_gates(gates, observations, scope_of, _label, reason_of=reason_of)
    if env.get("architecture") not in TRTLLM_GEN_ARCHS:
        untestable_here(out, OFF_ARCH_UNTESTABLE,
                        f"FlashInfer builds its trtllm-gen kernels for {'/'.join(TRTLLM_GEN_ARCHS)} only "
                        f"(flashinfer-trtllm-gen-requires-sm100), so a run on {env.get('architecture')} cannot show "
                        "what they take")
    return out


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for o in observations:
        p = o.get("params") or {}
        outcome = str(o.get("outcome"))
        if outcome == "OK" and (o.get("metrics") or {}).get("correct") is False:
            outcome = "OK-but-wrong"
        rows.append(f"{_label(p)}: {outcome}")
    return {"outcomes": rows}
