"""Claim: one gate or fact that can be true or false, with its scope and verification."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Condition, Id, Record, Ref, Strict, Verification, VersionRange


class Reason(Strict):
    code: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$", description="Stable reason code, e.g. HEAD_DIM")
    message: str = Field(description="Template; {var} placeholders are filled from the query")
    workaround: str | None = Field(default=None, description="What to do instead, where something helps")


class Claim(Record):
    kind: Literal["claim"] = Field(description="Record kind")
    subject: Ref = Field(description="Kernel, engine backend, architecture or accelerator the claim is about")
    statement: str = Field(description="The claim in one sentence")
    effect: Literal["reject", "caveat", "fails", "supports"] = Field(
        description="What the solver does with it (fails: the engine accepts it, then fails at first use)")
    when: Condition | None = Field(default=None, description="Where the claim applies (default: always)")
    requires: Condition | None = Field(default=None, description="What must hold for the subject to run")
    reason: Reason = Field(description="Reason code, message template and workaround")
    scope: list[VersionRange] = Field(default_factory=list, description="Library/CUDA versions it holds for")
    archs: list[Ref] = Field(default_factory=list, description="Architectures the claim is about, if limited")
    verification: Verification = Field(default_factory=Verification, description="Status and evidence")
    supersedes: Ref | None = Field(default=None, description="An older claim this one replaces")
    related: list[Ref] = Field(default_factory=list, description="Other records it bears on")
    formerly: list[Id] = Field(default_factory=list, description="Ids this claim had before it was renamed (a "
                               "release-specific id made neutral): evidence records, which are never edited, name "
                               "the claim by the id of their day, and their verdicts and release outcomes under a "
                               "former id are read as this claim's (KB207: no other record or alias has it)")
    parts: list[Ref] = Field(default_factory=list, description="Claims that each state one part of this one (\"X "
                             "needs Y\" and \"without Y, Z happens\"), each judged by its own evidence; the status "
                             "shown for this claim is the weakest of theirs and its own (kbtool/views/parts.py)")
    handles: list[Ref] = Field(default_factory=list, description="Caveat claims this one settles where it holds (an "
                               "engine's build keeps on the fix the other claim asks for): the solver shows those "
                               "caveats as handled, citing this claim, and they no longer demote the kernel")

    def refs(self) -> list[tuple[str, str]]:
        out = [("subject", self.subject)]
        out += [("arch", a) for a in self.archs]
        out += [("evidence", e) for e in self.verification.evidence]
        if self.supersedes:
            out.append(("supersedes", self.supersedes))
        out += [("related", r) for r in self.related]
        out += [("part", r) for r in self.parts]
        out += [("handles", r) for r in self.handles]
        return out


STRENGTH = {"verified": 4, "untestable": 3, "unverified": 2, "disputed": 1, "refuted": 0}
"""How much a status says for a claim, strongest first: the weaker of two parts is the one that says less."""


def weakest(statuses: list[str]) -> str:
    return min(statuses, key=lambda s: STRENGTH.get(s, 2))


def shown_status(claim: Claim, by_id: dict[str, Claim]) -> str:
    """A claim's status as shown: its own, or a weaker one of its parts' (issue 45: "X needs Y, or Z happens" is two
    statements; a verdict on one half never reads as a verdict on both)."""
    parts = [by_id[p] for p in claim.parts if p in by_id]
    return weakest([claim.verification.status, *(p.verification.status for p in parts)])

