"""Topic: a prose record in the format of seed 001, whose statements link to claims."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from .common import Basis, Record, Ref, Strict

XREF = re.compile(r"\[\[([^\]\s]+)\]\]")


class ParameterRow(Strict):
    parameter: Ref = Field(description="hardware-parameter record id")
    effect: str = Field(description="How the quantity moves this topic's cost or gate")
    basis: Basis = Field(default=Basis.recorded, description="Basis of the effect")
    values_for: list[Ref] = Field(default_factory=list, description="Accelerator ids the row applies to")
    magnitude: str | None = Field(default=None, description="Figure quoted with the effect, if any")


class Statement(Strict):
    text: str = Field(description="One statement the topic makes, in our words")
    claims: list[Ref] = Field(default_factory=list, description="Claims that carry this statement")


class StatedVerification(Strict):
    status: str = Field(description="Status as the source record states it, e.g. verified")
    level: str | None = Field(default=None, description="Stated level, e.g. medium")
    confidence: float | None = Field(default=None, ge=0, le=1, description="Stated confidence, 0..1")
    updated: str | None = Field(default=None, description="Date the source record was updated")


class Topic(Record):
    kind: Literal["topic"] = Field(description="Record kind")
    external: bool = Field(default=False, description="A stub for a record kb does not hold")
    original_id: str | None = Field(default=None, description="The id in the source knowledge base")
    area: str | None = Field(default=None, description="Area, e.g. inference/research")
    title: str | None = Field(default=None, description="The question the topic answers")
    topic_class: str | None = Field(default=None, alias="class", description="Class, e.g. custom_kernel")
    bound_by: str | None = Field(default=None, description="compute, memory, latency, ...")
    arithmetic_intensity: str | None = Field(default=None, description="Free text")
    scales_with: list[str] = Field(default_factory=list, description="Axes the cost scales with")
    hardware_parameters: list[ParameterRow] = Field(default_factory=list, description="Parameter rows")
    workarounds: list[str] = Field(default_factory=list, description="Workarounds")
    affected_accelerators: list[Ref] = Field(default_factory=list, description="Accelerators it depends on")
    statements: list[Statement] = Field(default_factory=list, description="Statements, linked to claims")
    stated: StatedVerification | None = Field(default=None, description="Verification as the source states it")

    def xrefs(self) -> list[str]:
        text = " ".join(
            [self.arithmetic_intensity or "", self.notes or "", *self.workarounds, *(s.text for s in self.statements)]
        )
        return XREF.findall(text)

    def refs(self) -> list[tuple[str, str]]:
        out = [("parameter", r.parameter) for r in self.hardware_parameters]
        out += [("values_for", a) for r in self.hardware_parameters for a in r.values_for]
        out += [("affects", a) for a in self.affected_accelerators]
        out += [("statement", c) for s in self.statements for c in s.claims]
        out += [("xref", x) for x in self.xrefs()]
        return out
