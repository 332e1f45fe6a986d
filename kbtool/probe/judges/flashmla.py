"""Probe: FlashMLA decode gates (architecture, KV dtype), where FlashMLA is installed.

FlashMLA has no wheels (PyPI has no flash-mla distribution; it is built from source with nvcc >= 12.8, or
12.9 for sm100), so on the probe hosts the runner marks its claims untestable with that reason. Where it is
installed, the dense decode path (MQA, head dims 576/512, page size 64) runs with a bf16 and an fp8 KV cache
through get_mla_metadata + flash_mla_with_kvcache (the API of the releases that still have dense decode).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import gate_verdict
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="flashmla",
    version=1,
    title="FlashMLA decode gates",
    claims=[
        "flashmla-requires-sm100-cuda-13-1",
        "flashmla-kv-format-fp8-fp4-only",
        "flashmla-fp8-kv-bytes-per-token",
        "flashmla-dense-decode-requires-sm90a",
        "flashmla-dense-decode-kv-dtype",
        "flashmla-sparse-decode-arch",
        # no case of this probe judges these yet; listed so that a host without FlashMLA marks them untestable
        "flashmla-cuda-12-8", "flashmla-dense-decode-requires-nvidia", "flashmla-dense-decode-shape",
        "flashmla-fp4-kv-bytes-per-token", "flashmla-hopper-pinned-checkout", "flashmla-kv-format-not-portable",
        "flashmla-prefill-dense-sm100", "flashmla-prefill-requires-nvidia", "flashmla-sparse-decode-requires-nvidia",
        "flashmla-sparse-decode-shape",
        # vLLM's FLASHMLA fp8 KV against FlashMLA's own source: settling it needs FlashMLA's dense decode with fp8 KV
        "vllm-flashmla-dense-fp8-kv-vs-flashmla-source",
    ],
    requires={"archs": None, "packages": ["torch", "flashmla"]},
    timeout_s=300,
    untestable=("No wheel installs there: PyPI has no flash-mla distribution (checked 2026-11-30); FlashMLA is "
                "built from source (nvcc >= 12.8, >= 12.9 for sm100), which takes longer than a device lease "
                "(10 minutes a command, 30 a session). vLLM's copy (upstream 48c6dc4 plus an out= argument) "
                "runs in probes/vllm_flashmla.py and judges the claims whose code it shares."),
)


KV_DTYPES = ["bf16", "fp8_e4m3"]


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    sm = env.get("architecture")
    scope = {"sm": sm, "flashmla": (env.get("libraries") or {}).get("flashmla"), "phase": "decode",
             "cuda": env.get("cuda"), "kv_dtypes": KV_DTYPES}

    def label(p: dict[str, Any]) -> str:
        return f"{p.get('path')} kv {p.get('kv_dtype')}"

    return [
        gate_verdict("flashmla-dense-decode-requires-sm90a", observations,
                     lambda p: sm == "sm90" if p.get("kv_dtype") == "bf16" else None, scope, label),
        gate_verdict("flashmla-dense-decode-kv-dtype", observations,
                     lambda p: p.get("kv_dtype") == "bf16" if sm == "sm90" else None, scope, label),
    ]
