"""Probe: vLLM's ROCm platform's attention-backend choice over the selector grid, without a GPU (issue 28).

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_rocm_selector.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbtool.probe.judges.vllm_rocm_selector import SPEC, judge, summarize
from probes.vllm_selector import run_grid

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


GRID = Path(__file__).with_name("_vllm_rocm_grid.py")


ARCHS = ["gfx942"]


def cases() -> list[dict[str, Any]]:
    return [{"platform": "rocm", "arch": a} for a in ARCHS]


def run(case: dict[str, Any]) -> dict[str, Any]:
    return run_grid(GRID, ["--arch", case["arch"]], f"rocm-{case['arch']}.json.gz", SPEC.timeout_s - 30,
                    accepted=False)
