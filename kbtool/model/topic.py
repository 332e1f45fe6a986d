"""Topic: a prose record in the format of seed 001, whose statements link to claims.

Every field of that format has a home here, so a topic can be imported and exported without loss:
area, title, stated verification (status, level, confidence, updated date), class, bound by, arithmetic
intensity, scales-with axes, hardware-parameter rows (with magnitude), workarounds, notes, `[[id]]`
cross-references, cross-reference groups (e.g. "Hardware-dependent (5)") and the affected accelerators.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from .common import Basis, Record, Ref, Strict

XREF = re.compile(r"\[\[([^\]\s]+)\]\]")

TopicStatus = Literal[
    "verified", "partly-verified", "unverified", "untestable", "disputed", "partly-refuted", "refuted"
]
Level = Literal["high", "medium", "low"]


class ParameterRow(Strict):
    parameter: Ref = Field(description="hardware-parameter record id")
    effect: str = Field(description="How the quantity moves this topic's cost or gate")
    basis: Basis = Field(default=Basis.recorded, description="Basis of the effect")
    values_for: list[Ref] = Field(default_factory=list, description="Accelerator ids the row applies to")
    magnitude: str | None = Field(default=None, description="Figure quoted with the effect, if any")


class Statement(Strict):
    text: str = Field(description="One statement the topic makes, in our words")
    claims: list[Ref] = Field(default_factory=list, description="Claims that carry this statement")
    origin: str | None = Field(
        default=None, description="Field of the topic the statement comes from, e.g. notes or arithmetic_intensity"
    )


class StatedVerification(Strict):
    """Verification as the source record states it (provenance; kb derives its own from the claims)."""

    status: str = Field(description="Status as the source record states it, e.g. verified")
    level: str | None = Field(default=None, description="Stated level, e.g. medium")
    confidence: float | None = Field(default=None, ge=0, le=1, description="Stated confidence, 0..1")
    updated: str | None = Field(default=None, description="Date the source record was updated (YYYY-MM-DD)")


class TopicVerification(Strict):
    """kb's own statement of the topic's verification; `kb validate` checks it against the derived one."""

    status: TopicStatus = Field(description="Status derived from the linked claims (docs/topics.md)")
    level: Level | None = Field(default=None, description="high >= 0.85 > medium >= 0.60 > low")
    confidence: float = Field(ge=0, le=1, description="Confidence by the formula in docs/topics.md, 2 decimals")


class XrefGroup(Strict):
    """A group of cross-references as the source page lists them, e.g. 'Hardware-dependent (5)'."""

    group: str = Field(description="Group label, e.g. Hardware-dependent")
    count: int | None = Field(default=None, ge=0, description="Count the source shows beside the label")
    ids: list[Ref] = Field(default_factory=list, description="Records in the group, where the source names them")


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
    cross_references: list[XrefGroup] = Field(default_factory=list, description="Cross-reference groups")
    statements: list[Statement] = Field(default_factory=list, description="Statements, linked to claims")
    stated: StatedVerification | None = Field(default=None, description="Verification as the source states it")
    verification: TopicVerification | None = Field(
        default=None, description="kb's stated verification; must agree with the one derived from the claims"
    )
    id_map: dict[str, str] = Field(
        default_factory=dict, description="kb id -> the source's spelling, for ids renamed on import"
    )

    def prose(self) -> list[tuple[tuple[str | int, ...], str]]:
        """(path inside the record, text) for every prose field that may hold `[[id]]` references."""
        out: list[tuple[tuple[str | int, ...], str]] = []
        for key in ("title", "arithmetic_intensity", "notes"):
            val = getattr(self, key)
            if val:
                out.append(((key,), val))
        out += [(("scales_with", i), s) for i, s in enumerate(self.scales_with)]
        out += [(("workarounds", i), s) for i, s in enumerate(self.workarounds)]
        out += [(("hardware_parameters", i, "effect"), r.effect) for i, r in enumerate(self.hardware_parameters)]
        out += [(("statements", i, "text"), s.text) for i, s in enumerate(self.statements)]
        return out

    def xrefs(self) -> list[str]:
        return [x for _, text in self.prose() for x in XREF.findall(text)]

    def claim_ids(self) -> list[str]:
        """Distinct claim ids linked from statements, in order of first appearance."""
        return list(dict.fromkeys(c for s in self.statements for c in s.claims))

    def refs(self) -> list[tuple[str, str]]:
        out = [("parameter", r.parameter) for r in self.hardware_parameters]
        out += [("values_for", a) for r in self.hardware_parameters for a in r.values_for]
        out += [("affects", a) for a in self.affected_accelerators]
        out += [("xref_group", x) for g in self.cross_references for x in g.ids]
        out += [("statement", c) for s in self.statements for c in s.claims]
        out += [("xref", x) for x in self.xrefs()]
        return out
