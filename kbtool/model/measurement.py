"""Measurement: a timing, bandwidth or count from a source or a benchmark run, with its conditions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .common import Basis, Record, Ref
from .evidence import Environment


class Measurement(Record):
    kind: Literal["measurement"] = Field(description="Record kind")
    quantity: str = Field(description="latency, bandwidth, sm_count, l2, outcome-count, mismatch-rate, ...")
    value: float | int | str = Field(description="The figure")
    unit: str = Field(description="ms, us, GB/s, TB/s, MB, count, percent, ratio")
    basis: Basis = Field(default=Basis.recorded, description="recorded from a source or measured by kb")
    accelerator: Ref | None = Field(default=None, description="Accelerator it was measured on")
    kernel: Ref | None = Field(default=None, description="Kernel it measures, if one")
    phase: Literal["prefill", "decode"] | None = Field(default=None, description="Phase, if attention")
    conditions: dict[str, Any] = Field(default_factory=dict, description="Shape, dtype, batch, ...")
    samples: list[float] = Field(default_factory=list, description="Per-launch medians (benchmarks)")
    evidence: Ref | None = Field(default=None, description="Run record it came from, if measured by kb")
    outcome: Literal["OK", "UNSUPPORTED", "OOM_PREDICTED", "OOM", "ERROR", "TIMEOUT"] | None = Field(
        default=None, description="Outcome class of a benchmark attempt (kb bench)"
    )
    message: str | None = Field(default=None, description="The library's own message, for attempts that did not run")
    environment: Environment | None = Field(default=None, description="Where it was measured (kb bench)")
    metrics: dict[str, Any] = Field(
        default_factory=dict, description="Other observations: kernels that ran, error, peak memory, bandwidth"
    )

    def refs(self) -> list[tuple[str, str]]:
        out = []
        if self.accelerator:
            out.append(("measured_on", self.accelerator))
        if self.kernel:
            out.append(("measures", self.kernel))
        return out
