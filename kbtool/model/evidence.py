"""Evidence: one probe run. Written only by `kb probe run`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from .common import Record, Ref, Strict


class ProbeRef(Strict):
    id: str = Field(description="Probe id")
    version: int = Field(ge=1, description="Probe version")


class Environment(Strict):
    gpu: str = Field(description="GPU name as the driver reports it")
    compute_capability: str = Field(description="e.g. 9.0")
    sm_count: int | None = Field(default=None, description="Multiprocessors")
    memory_bytes: int | None = Field(default=None, description="Device memory, bytes")
    driver: str | None = Field(default=None, description="Driver version")
    cuda: str | None = Field(default=None, description="CUDA runtime version torch was built with")
    torch: str | None = Field(default=None, description="torch version")
    python: str | None = Field(default=None, description="Python version")
    libraries: dict[str, str] = Field(default_factory=dict, description="Versions of the libraries probed")
    install_overrides: list[str] | None = Field(
        default=None, description="Requirements that replaced the probed library's own pins when its environment was "
        "installed (`kb probe sweep` with probes/sweep-overrides.yaml or --override), e.g. flashinfer-python==0.7.4")
    accelerator: Ref | None = Field(default=None, description="Matching accelerator record, if known")
    architecture: Ref | None = Field(default=None, description="Matching architecture record, e.g. sm90")

    @model_serializer(mode="wrap")
    def _without_unset_overrides(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A record installed without overrides dumps as before the field existed (record digests stay)."""
        data: dict[str, Any] = handler(self)
        if data.get("install_overrides") is None:
            data.pop("install_overrides", None)
        return data


class Case(Strict):
    params: dict[str, Any] = Field(description="Case parameters")
    outcome: Literal["OK", "UNSUPPORTED", "OOM", "ERROR", "TIMEOUT", "SKIPPED"] = Field(description="Outcome")
    message: str | None = Field(default=None, description="The library's own message, for non-OK outcomes")
    kernels: list[str] = Field(default_factory=list, description="GPU kernel names that ran (profiler)")
    max_abs_err: float | None = Field(default=None, description="Max abs error against the reference")
    seconds: float | None = Field(default=None, description="Wall time of the case")
    metrics: dict[str, Any] = Field(default_factory=dict, description="Other observations")


class VerdictEntry(Strict):
    claim: Ref = Field(description="Claim id")
    verdict: Literal["confirmed", "contradicted", "partial", "inconclusive"] = Field(description="Verdict")
    scope: dict[str, Any] = Field(default_factory=dict, description="The scope the run covered")
    detail: str | None = Field(default=None, description="Why, in one or two sentences")


class Evidence(Record):
    kind: Literal["evidence"] = Field(description="Record kind")
    probe: ProbeRef = Field(description="Which probe ran")
    environment: Environment = Field(description="Where it ran")
    started: str = Field(description="UTC start time, ISO 8601")
    finished: str | None = Field(default=None, description="UTC end time, ISO 8601")
    cases: list[Case] = Field(default_factory=list, description="Per-case outcomes")
    verdicts: list[VerdictEntry] = Field(default_factory=list, description="Per-claim verdicts")
    artifacts: list[str] = Field(default_factory=list, description="Files written beside the record (plots)")
    data: dict[str, Any] = Field(default_factory=dict, description="Raw curves and tables the verdicts rest on")

    def renamed(self, current: Mapping[str, str]) -> Evidence:
        """This record as today's claims name it (`current`: former claim id -> id, from the claims' `formerly`):
        its verdicts and its per-claim release outcomes (`data.outcomes`) under a former id are the renamed claim's.
        The file is never edited; the record itself when it names no former id."""
        outcomes = self.data.get("outcomes")
        keyed = isinstance(outcomes, dict) and any(k in current for k in outcomes)
        if not keyed and not any(v.claim in current for v in self.verdicts):
            return self
        update: dict[str, Any] = {"verdicts": [v.model_copy(update={"claim": current[v.claim]})
                                               if v.claim in current else v for v in self.verdicts]}
        if keyed and isinstance(outcomes, dict):
            update["data"] = {**self.data, "outcomes": {current.get(k, k): e for k, e in outcomes.items()}}
        return self.model_copy(update=update)

    def refs(self) -> list[tuple[str, str]]:
        out = [("verdict", v.claim) for v in self.verdicts]
        if self.environment.accelerator:
            out.append(("ran_on", self.environment.accelerator))
        return out
