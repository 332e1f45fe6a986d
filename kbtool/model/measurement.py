"""Measurement: one table of figures from one source or one run, with what the figures share said once.

A record is a bench run (`kb bench run`: the environment once, one row per attempt), a probe run's measured
values (`kb probe run --write`), or one table of a seed (one row per cell). Every row says its quantity, value and
unit; record-level `accelerator`, `kernel`, `phase`, `conditions` and `metrics` hold what every row shares, a
row gives only what is its own, and its own values win (`Measurement.cells()` merges the two for readers).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .common import Basis, Record, Ref, Strict
from .evidence import Environment

Phase = Literal["prefill", "decode"]
Outcome = Literal["OK", "UNSUPPORTED", "OOM_PREDICTED", "OOM", "ERROR", "TIMEOUT"]


class Row(Strict):
    """One figure. Fields left out take the record's value."""

    label: str | None = Field(default=None, description="What the figure is, in a few words (a table's row heading)")
    quantity: str = Field(description="latency, bandwidth, sm_count, outcome-count, ...")
    value: float | int | str = Field(description="The figure")
    unit: str = Field(description="ms, us, GB/s, TB/s, MB, count, percent, ratio, class")
    accelerator: Ref | None = Field(default=None, description="Accelerator it was measured on")
    kernel: Ref | None = Field(default=None, description="Kernel it measures, if one")
    phase: Phase | None = Field(default=None, description="Phase, if attention")
    conditions: dict[str, Any] = Field(default_factory=dict, description="Shape, dtype, batch, backend, ...")
    samples: list[float] = Field(default_factory=list, description="Per-process medians (benchmarks)")
    outcome: Outcome | None = Field(default=None, description="Outcome class of a benchmark attempt (kb bench)")
    message: str | None = Field(default=None, description="The library's own message, for attempts that did not run")
    metrics: dict[str, Any] = Field(
        default_factory=dict, description="Other observations: kernels that ran, error, peak memory, bandwidth"
    )
    notes: str | None = Field(default=None, description="What only this row needs said")


class Measurement(Record):
    kind: Literal["measurement"] = Field(description="Record kind")
    basis: Basis = Field(default=Basis.recorded, description="recorded from a source or measured by kb")
    accelerator: Ref | None = Field(default=None, description="Accelerator of every row that does not name its own")
    kernel: Ref | None = Field(default=None, description="Kernel of every row that does not name its own")
    phase: Phase | None = Field(default=None, description="Phase of every row that does not name its own")
    conditions: dict[str, Any] = Field(default_factory=dict, description="Conditions every row shares")
    environment: Environment | None = Field(default=None, description="Where it was measured (kb bench)")
    started: str | None = Field(default=None, description="UTC start time of the run, ISO 8601 (kb bench)")
    evidence: Ref | None = Field(default=None, description="Probe run record it came from, if measured by a probe")
    metrics: dict[str, Any] = Field(default_factory=dict, description="Observations of the run as a whole")
    rows: list[Row] = Field(min_length=1, description="The figures: one per bench attempt, probe value or table cell")
    artifacts: list[str] = Field(
        default_factory=list, description="Plots drawn from the rows, as paths from the repository root"
    )

    def cells(self) -> list[Row]:
        """The rows with the record's shared values filled in (row values win; conditions and metrics merge)."""
        shared = {k: getattr(self, k) for k in ("accelerator", "kernel", "phase")}
        out = []
        for r in self.rows:
            upd: dict[str, Any] = {k: v for k, v in shared.items() if getattr(r, k) is None}
            if self.conditions:
                upd["conditions"] = {**self.conditions, **r.conditions}
            if self.metrics:
                upd["metrics"] = {**self.metrics, **r.metrics}
            out.append(r.model_copy(update=upd) if upd else r)
        return out

    def refs(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for rel, attr in (("measured_on", "accelerator"), ("measures", "kernel")):
            for target in dict.fromkeys([getattr(self, attr), *(getattr(r, attr) for r in self.rows)]):
                if target:
                    out.append((rel, target))
        return out
