"""Derived verification of a topic: the shares of its claims by status, and a confidence number.

The formula is documented in docs/topics.md; keep the two in step.

Units. Every distinct claim linked from a statement is one unit; every statement that links no claim
is one more unit (an "unlinked" statement counts like an unverified claim). A linked id that is not a
claim record in the KB counts as unverified too (`kb validate` reports it separately).

Confidence = sum(weight(unit)) / number of units, rounded to 2 decimals, with the weights in WEIGHTS.
A topic with no units has confidence PRIOR (nothing to go on but the prose).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbtool.kb import KB
from kbtool.model import Claim
from kbtool.model.topic import Topic

STATUSES = ("verified", "refuted", "unverified", "disputed", "untestable")

WEIGHTS: dict[str, float] = {
    "verified": 1.0,    # a probe confirmed it inside its scope
    "unverified": 0.5,  # sourced, not yet probed: no evidence either way
    "untestable": 0.5,  # no probe can run on it where probes have run: no evidence either way
    "unlinked": 0.5,    # a statement no claim carries yet: treated as unverified
    "disputed": 0.25,   # sources disagree: less than a coin flip that the topic's wording holds
    "refuted": 0.0,     # a probe contradicted it
}
PRIOR = 0.5
HIGH = 0.85
MEDIUM = 0.60
TOLERANCE = 0.005  # stated and derived confidence agree when they round to the same 2 decimals


@dataclass
class ClaimState:
    id: str
    status: str  # one of STATUSES, or "missing" when the id is not a claim record
    evidence: list[str] = field(default_factory=list)
    statement: str | None = None


@dataclass
class Derived:
    claims: list[ClaimState]
    unlinked: int  # statements that link no claim
    counts: dict[str, int]
    confidence: float
    status: str
    level: str

    @property
    def units(self) -> int:
        return len(self.claims) + self.unlinked

    def share(self, status: str) -> float:
        return self.counts.get(status, 0) / len(self.claims) if self.claims else 0.0

    def shares(self) -> dict[str, float]:
        return {s: round(self.share(s), 4) for s in STATUSES}

    @property
    def refuted(self) -> list[ClaimState]:
        return [c for c in self.claims if c.status == "refuted"]

    def as_dict(self) -> dict[str, object]:
        return {"status": self.status, "level": self.level, "confidence": self.confidence,
                "claims": len(self.claims), "unlinked_statements": self.unlinked,
                "counts": dict(self.counts), "shares": self.shares(),
                "refuted": [c.id for c in self.refuted]}


def claim_state(kb: KB, cid: str) -> ClaimState:
    rec = kb.get(cid)
    if not isinstance(rec, Claim):
        return ClaimState(cid, "missing")
    v = rec.verification
    return ClaimState(cid, str(v.status), list(v.evidence), rec.statement)


def level_of(confidence: float) -> str:
    return "high" if confidence >= HIGH else "medium" if confidence >= MEDIUM else "low"


def status_of(counts: dict[str, int], units: int) -> str:
    """Topic status from claim counts (missing claims count as unverified) and the number of units."""
    r, d = counts.get("refuted", 0), counts.get("disputed", 0)
    v, t = counts.get("verified", 0), counts.get("untestable", 0)
    if r:
        return "refuted" if r == units else "partly-refuted"
    if d:
        return "disputed"
    if units and v == units:
        return "verified"
    if v:
        return "partly-verified"
    if units and t == units:
        return "untestable"
    return "unverified"


def derive(topic: Topic, kb: KB) -> Derived:
    states = [claim_state(kb, c) for c in topic.claim_ids()]
    unlinked = sum(1 for s in topic.statements if not s.claims)
    counts: dict[str, int] = {}
    for st in states:
        counts[st.status] = counts.get(st.status, 0) + 1
    units = len(states) + unlinked
    if units:
        total = sum(WEIGHTS.get(st.status, WEIGHTS["unverified"]) for st in states) + WEIGHTS["unlinked"] * unlinked
        confidence = round(total / units, 2)
    else:
        confidence = PRIOR
    return Derived(states, unlinked, counts, confidence, status_of(counts, units), level_of(confidence))


def statement_status(states: list[ClaimState]) -> str:
    """The status shown beside one statement: the worst of its claims' statuses."""
    if not states:
        return "unlinked"
    order = ("refuted", "missing", "disputed", "unverified", "untestable", "verified")
    return min((s.status for s in states), key=lambda s: order.index(s) if s in order else 1)


def agrees(stated: float | None, derived: float) -> bool:
    return stated is not None and abs(stated - derived) <= TOLERANCE
