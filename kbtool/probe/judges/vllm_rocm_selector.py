"""Probe: vLLM's ROCm platform's attention-backend choice over the selector grid, without a GPU (issue 28).

Each case is one AMD GPU architecture (gfx942: MI300X/MI325X). `run` starts probes/_vllm_rocm_grid.py under the
interpreter that has vLLM (KB_VLLM_PYTHON, else this one). It imports vLLM's own ROCm platform with the GPU's
architecture name answered (vllm/platforms/rocm.py reads it once at import), and records, per grid point of
probes/_vllm_grid.py (head size x dtype x KV dtype x block size x layout x sinks), every backend's
`validate_configuration` reasons, the ROCm priority list and the backend `get_valid_backends` picks. The raw grid
is written to tests/data/vllm/<version>/rocm-<arch>.json.gz (KB_VLLM_RAW_DIR overrides the folder).

AITER (ROCm's kernel library) is not in the vllm wheel; the grid is what a stock install without AITER selects.
The probe judges no claim: its summary (what ROCm selects per layout) is the release's ROCm record, and the
release timelines (`kb show CLAIM`) read it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kbtool.probe.judges.vllm_selector import _raw, load, rows
from kbtool.probe.recorded import GridSuperseded, verified
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="vllm-rocm-selector",
    version=1,
    order=7,
    title="vLLM ROCm platform attention-backend selection (no GPU)",
    claims=[],
    requires={"gpu": False, "packages": ["vllm"]},
    timeout_s=900,
    untestable="The vLLM ROCm selector probe needs vLLM installed (KB_VLLM_PYTHON).",
)


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    return []


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, dict[str, int]] = {}
    version = None
    for obs in observations:
        m = obs.get("metrics") or {}
        if obs.get("outcome") != "OK" or not m.get("raw"):
            continue
        try:
            doc = load(verified(_raw(m["raw"]), m.get("sha256"), str(m["raw"])))
        except GridSuperseded:
            return {}  # replaced by a later run: the record's own summary, written when it ran, holds
        version = version or str(doc["vllm"])
        sel = Counter((p["cc"], p["layout"], str(p["selected"])) for p in rows(doc))
        for (arch, layout, chosen), n in sorted(sel.items()):
            table.setdefault(f"rocm {arch} {layout}", {})[chosen] = n
    return {"vllm": version, "platform": "rocm", "selected": table} if version else {}
