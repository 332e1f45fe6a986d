"""Probe: FA-3 FP8 error against context length with ONE-level accumulation (the half of: the program (cases and run).

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_fa3_fp8_one_level.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.vllm_fa3_fp8_one_level import SPEC, judge, summarize
from probes import vllm_fa3_fp8_accuracy as two

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


def cases() -> list[dict[str, Any]]:
    out = [{"path": "fp8", "ctx": n, "head_dim": 128, "gqa": g} for g in (1, 8) for n in two.CONTEXTS]
    out.append({"path": "fp8", "ctx": two.LONG, "head_dim": 128, "gqa": 1})
    return out


run = two.run
