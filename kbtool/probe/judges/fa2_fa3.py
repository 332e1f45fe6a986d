"""Probe: FlashAttention-2 and FlashAttention-3 gates (architecture, head dims, dtypes), where installed.

Neither installs from a wheel on the probe hosts: PyPI has flash-attn only as a source distribution and
flash-attn-3 only as a 0.0.0 placeholder, so both need a source build. Where neither is installed the runner
marks the claims untestable with that reason; where one is, its cases run (forward only, (2, 512, 8:2, D)).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import gate_verdict, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="fa2-fa3",
    version=1,
    title="FlashAttention-2/3 gates",
    claims=["fa2-requires-sm80", "fa2-head-dim-max-256", "fa3-requires-sm90", "fa3-head-dims",
            "fa3-fp8-e4m3-forward-only",
            # no case of this probe judges these yet; listed so that a host without FA-2/FA-3 marks them untestable
            "fa2-dtypes-fp16-bf16", "fa2-paged-block-size-256", "fa3-fp8-head-dim-multiple-16", "fa3-fp8-output-bf16",
            "fa3-requires-cuda-12-3", "fa3-requires-nvidia", "fp8-kv-head-dim-256-prefill-cost",
            # PyTorch's FA3 SDP path (activate_flash_attention_impl("FA3")) calls torch.ops.flash_attn_3, i.e. FA-3
            "torch-sdpa-flash-fp8-fa3-opt-in",
            # feature claims (sinks, sliding window, FP8/FP4 forms): their cases need FA-2/FA-3 installed
            "fa2-no-sinks", "fa3-sinks", "flash-attention-2-sliding-window", "flash-attention-3-sliding-window",
            "fa3-fp8-kv-needs-fp8-query", "fa3-no-fp4-kv",
            # vLLM's FA fork (vllm-flash-attn) is compiled only inside the vllm wheel (see `untestable`)
            "vllm-fa-fork-paged-block-size-16"],
    requires={"archs": None, "packages": ["torch", "flash-attn|flash-attn-3"]},
    timeout_s=300,
    untestable=("No wheel installs there: PyPI has flash-attn (FA-2) only as a source distribution and flash-attn-3 "
                "only as a 0.0.0 placeholder (checked 2026-11-30), and FA-3 (hopper/) is built from source; a "
                "source build of either is needed to probe these gates, and it takes longer than a device lease "
                "(10 minutes a command, 30 a session). vLLM's fork, compiled inside the vllm wheel, runs in "
                "probes/vllm_fa3.py and vllm_fa2.py and judges the claims whose code it shares (fork ranges); "
                "what is left here is upstream's own build and behaviour."),
)


def _label(p: dict[str, Any]) -> str:
    return f"{p.get('lib')} hd{p.get('head_dim')} {p.get('dtype')}"


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    sm = env.get("architecture")
    cc = float(env.get("compute_capability") or 0)
    libs = env.get("libraries") or {}

    def scope(lib: str) -> dict[str, Any]:
        picked = lambda p: p.get("lib") == lib  # noqa: E731
        name = "flash-attn" if lib == "fa2" else "flash-attn-3"
        return {"sm": sm, "flash-attn": libs.get(name), "lib": lib, "phase": "prefill",
                "head_dims": values(observations, "head_dim", picked), "dtypes": values(observations, "dtype", picked)}

    half = ("bf16", "fp16")

    def fa2(p: dict[str, Any]) -> bool:
        return p.get("lib") == "fa2"

    def fa3(p: dict[str, Any]) -> bool:
        return p.get("lib") == "fa3"

    out = []
    if any(fa2(o.get("params") or {}) for o in observations):
        out += [
            gate_verdict("fa2-requires-sm80", observations,
                         lambda p: cc >= 8.0 if fa2(p) and p["dtype"] in half and p["head_dim"] <= 256 else None,
                         scope("fa2"), _label),
            gate_verdict("fa2-head-dim-max-256", observations,
                         lambda p: p["head_dim"] <= 256 and p["head_dim"] % 8 == 0
                         if fa2(p) and p["dtype"] in half and cc >= 8.0 else None,
                         scope("fa2"), _label),
        ]
    if any(fa3(o.get("params") or {}) for o in observations):
        out += [
            gate_verdict("fa3-requires-sm90", observations,
                         lambda p: sm == "sm90" if fa3(p) and p["dtype"] == "bf16" and p["head_dim"] == 128 else None,
                         scope("fa3"), _label),
            gate_verdict("fa3-head-dims", observations,
                         lambda p: p["head_dim"] <= 256 and p["head_dim"] % 8 == 0
                         if fa3(p) and p["dtype"] == "bf16" and sm == "sm90" else None,
                         scope("fa3"), _label),
            gate_verdict("fa3-fp8-e4m3-forward-only", observations,
                         lambda p: p["dtype"] == "fp8_e4m3" and sm == "sm90"
                         if fa3(p) and p["dtype"].startswith("fp8") and p["head_dim"] <= 256 else None,
                         scope("fa3"), _label),
        ]
    return out
