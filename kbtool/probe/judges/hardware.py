"""Probe: the GPU's own numbers, measured, compared with the KB's accelerator and architecture records.

Cases: device properties (compute capability, SMs, memory, L2, shared memory per SM and per block opt-in),
whether an fp8 tensor-core matmul runs (torch._scaled_mm, e4m3), and device-to-device copy bandwidth
(1 GiB copies, bytes read plus written, median of 20 after warm-up, timed with CUDA events). The evidence
record's `data` holds each value with basis `measured` beside the value the KB records and whether they agree.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="hardware",
    version=1,
    order=10,
    title="GPU properties, fp8 matmul and copy bandwidth",
    claims=[],
    requires={"archs": None, "packages": ["torch"]},
    timeout_s=120,
)


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    return []  # no claims: the measured values go to the evidence record's data


def _metrics(observations: list[dict[str, Any]], what: str) -> dict[str, Any] | None:
    for o in observations:
        if (o.get("params") or {}).get("measure") == what and o.get("outcome") == "OK":
            return dict(o.get("metrics") or {})
    return None


def _fact(kb: dict[str, Any], key: str) -> Any:
    value = kb.get(key)
    return value.get("value") if isinstance(value, dict) else value


def _row(measured: Any, unit: str, kb_value: Any = None, kb_unit_scale: float = 1.0, rel_tol: float = 0.0,
         ) -> dict[str, Any]:
    row: dict[str, Any] = {"value": measured, "unit": unit, "basis": "measured"}
    if kb_value is not None and measured is not None:
        row["kb_value"] = kb_value
        expected = float(kb_value) * kb_unit_scale
        row["agrees"] = abs(float(measured) - expected) <= rel_tol * abs(expected)
    return row


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    """Measured values beside the KB's (env['kb'] carries the accelerator and architecture records)."""
    kb = env.get("kb") or {}
    acc = kb.get("accelerator") or {}
    arch = kb.get("architecture") or {}
    props = _metrics(observations, "properties") or {}
    copy = _metrics(observations, "copy-bandwidth")
    fp8 = next((o for o in observations if (o.get("params") or {}).get("measure") == "fp8-scaled-mm"), None)
    measured: dict[str, Any] = {}
    if props:
        measured["compute_capability"] = {"value": props.get("compute_capability"), "basis": "measured",
                                          "kb_value": arch.get("compute_capability")}
        measured["sm_count"] = _row(props.get("sm_count"), "SMs", _fact(acc, "sm_count"))
        measured["memory"] = _row(props.get("memory_bytes"), "bytes", _fact(acc, "memory_gb"), 1e9, 0.1)
        measured["l2"] = _row(props.get("l2_bytes"), "bytes", _fact(acc, "l2_mb"), 1e6, 0.05)
        measured["smem_per_sm"] = _row(props.get("smem_per_sm_bytes"), "bytes", _fact(arch, "smem_per_sm_kib"),
                                       1024, 0.0)
        measured["smem_per_block_optin"] = _row(props.get("smem_per_block_optin_bytes"), "bytes",
                                                _fact(arch, "smem_per_block_kib"), 1024, 0.0)
    if fp8 is not None:
        measured["fp8_tensor_core_matmul"] = {"value": fp8.get("outcome") == "OK", "basis": "measured",
                                              "kb_value": _fact(arch, "fp8_tensor_cores"),
                                              "message": fp8.get("message")}
    if copy:
        measured["d2d_copy_bandwidth"] = {"value": round(copy["tb_per_s"], 3), "unit": "TB/s (read + write)",
                                          "basis": "measured",
                                          "kb_hbm_bandwidth_tbs": _fact(acc, "memory_bandwidth_tbs")}
    return {"accelerator": env.get("accelerator"), "architecture": env.get("architecture"), "measured": measured}
