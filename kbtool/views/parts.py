"""Two-part claims (issue 45): "X needs Y, or Z happens" is two statements, each with its own evidence. A claim
that lists `parts` shows the weakest status of its parts and its own, so a verdict on one half never reads as a
verdict on both; `kb show` lists each part with its status and evidence."""

from __future__ import annotations

from typing import Any

from kbtool.model.claim import STRENGTH, shown_status, weakest

__all__ = ["STRENGTH", "parts_data", "shown_status", "weakest"]


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
