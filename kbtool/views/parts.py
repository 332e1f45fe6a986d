"""Two-part claims (issue 45): "X needs Y, or Z happens" is two statements, each with its own evidence. A claim
that lists `parts` shows the weakest status of its parts and its own, so a verdict on one half never reads as a
verdict on both; `kb show` lists each part with its status and evidence."""

from __future__ import annotations

from typing import Any

STRENGTH = {"verified": 4, "untestable": 3, "unverified": 2, "disputed": 1, "refuted": 0}
"""How much a status says for the claim, strongest first: the weaker of two parts is the one with less."""


def weakest(statuses: list[str]) -> str:
    return min(statuses, key=lambda s: STRENGTH.get(s, 2))


def shown_status(claim: Any, by_id: dict[str, Any]) -> str:
    """The claim's own status, or a weaker one of its parts'."""
    parts = [by_id[p] for p in getattr(claim, "parts", []) if p in by_id]
    return weakest([claim.verification.status, *(p.verification.status for p in parts)])


def parts_data(claim: Any, by_id: dict[str, Any]) -> list[dict[str, Any]]:
    """Each part: id, statement, status, evidence and the verification's reason."""
    out = []
    for pid in getattr(claim, "parts", []):
        p = by_id.get(pid)
        if p is None:
            continue
        v = p.verification
        out.append({"id": p.id, "statement": p.statement, "status": v.status, "evidence": list(v.evidence),
                    "reason": v.reason})
    return out
