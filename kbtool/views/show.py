"""`kb show ID`: a record with its references resolved, its verification and a summary of its evidence."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kbtool.kb import KB
from kbtool.model import Accelerator, Claim, Evidence, Kernel, Record
from kbtool.model.common import ScopedVerdict


def _ref(kb: KB, rel: str, target: str) -> dict[str, Any]:
    rec = kb.get(target)
    return {"rel": rel, "id": target, "kind": rec.kind if rec else None, "name": rec.name if rec else None,
            "exists": rec is not None}


def evidence_row(ev: Evidence, claim: str | None = None) -> dict[str, Any]:
    """One evidence record in a line: where it ran, outcomes, and the verdict on `claim` (if given)."""
    outcomes = Counter(c.outcome for c in ev.cases)
    row: dict[str, Any] = {
        "id": ev.id, "probe": f"{ev.probe.id} v{ev.probe.version}", "gpu": ev.environment.gpu,
        "accelerator": ev.environment.accelerator, "started": ev.started, "cases": len(ev.cases),
        "outcomes": dict(sorted(outcomes.items())),
    }
    if claim is not None:
        v = next((v for v in ev.verdicts if v.claim == claim), None)
        row["verdict"] = v.verdict if v else None
        row["detail"] = v.detail if v else None
    else:
        row["verdicts"] = {v.claim: v.verdict for v in ev.verdicts}
    return row


def scoped_row(sv: ScopedVerdict) -> dict[str, Any]:
    """One per-scope verdict: where (sm, library versions, phase), what, and the evidence ids behind it."""
    libs = ", ".join(f"{k} {v}" for k, v in sv.scope.libraries.items())
    where = " ".join(x for x in (sv.scope.sm or "any arch", libs, sv.scope.phase or "") if x)
    return {"scope": where, "status": sv.status, "evidence": list(sv.evidence), "reason": sv.reason}


def _evidence_for_claim(kb: KB, c: Claim) -> list[dict[str, Any]]:
    ids = list(c.verification.evidence)
    for r in kb:
        if isinstance(r, Evidence) and r.id not in ids and any(v.claim == c.id for v in r.verdicts):
            ids.append(r.id)
    rows = []
    for i in ids:
        ev = kb.get(i)
        rows.append(evidence_row(ev, c.id) if isinstance(ev, Evidence) else {"id": i, "missing": True})
    return rows


def _claims_about(kb: KB, subject: str) -> list[dict[str, Any]]:
    from kbtool.views.parts import shown_status

    claims = sorted(kb.of_kind("claim", Claim), key=lambda c: c.id)
    by_id = {c.id: c for c in claims}
    return [{"id": c.id, "effect": c.effect, "status": shown_status(c, by_id), "name": c.name}
            for c in claims if c.subject == subject]


def show_data(kb: KB, name: str) -> dict[str, Any]:
    """Everything `kb show` prints, as JSON-able data. Unknown names raise NotFoundError with suggestions."""
    from kbtool.graph import build

    rec: Record = kb.resolve(name)
    g = build(kb)
    file, line = kb.location(rec.id)
    data: dict[str, Any] = {
        "id": rec.id, "kind": rec.kind, "name": rec.name, "file": file, "line": line,
        "record": rec.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
        "references": [_ref(kb, rel, t) for rel, t in rec.refs()],
        "referenced_by": sorted(({"rel": d["rel"], "id": src, "kind": g.nodes[src].get("kind")}
                                 for src, _, d in g.in_edges(rec.id, data=True)),
                                key=lambda x: (str(x["kind"]), x["id"], x["rel"])),
    }
    if isinstance(rec, Claim):
        v = rec.verification
        data["verification"] = {"status": v.status, "checked": v.checked, "reason": v.reason,
                                "sides": [s.position for s in v.sides], "evidence": list(v.evidence),
                                "verdicts": [scoped_row(sv) for sv in v.verdicts],
                                "scope_events": [{"library": r.library, "introduced": r.introduced, "fixed": r.fixed,
                                                  "last_affected": r.last_affected, "evidence": list(r.evidence)}
                                                 for r in rec.scope if r.evidence]}
        data["evidence"] = _evidence_for_claim(kb, rec)
        data["timeline"], data["version_events"] = _timeline(kb, rec.id)
        if rec.parts:
            from kbtool.views.parts import parts_data, shown_status

            by_id = {c.id: c for c in kb.of_kind("claim", Claim)}
            data["parts"] = parts_data(rec, by_id)
            data["verification"]["shown_status"] = shown_status(rec, by_id)
    elif isinstance(rec, Evidence):
        data["evidence"] = [evidence_row(rec)]
    else:
        data["evidence"] = [evidence_row(r) for r in sorted(kb.of_kind("evidence", Evidence), key=lambda r: r.id)
                            if _touches(kb, r, rec)]
    if isinstance(rec, Kernel) or rec.kind in ("engine-backend", "architecture", "accelerator"):
        data["claims"] = _claims_about(kb, rec.id)
    return data


def _timeline(kb: KB, claim: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The claim's outcome per swept vLLM release, and the version events where it changed (solve/timeline)."""
    from kbtool.solve.engines.vllm import timeline as tl

    points = tl.timelines(kb).get(claim, [])
    rows = [{"release": p.release, "outcome": p.outcome, "evidence": p.evidence, "detail": p.detail}
            for p in points]
    events = [{"field": e.field, "release": e.release,
               "before": [e.before.release, e.before.outcome, e.before.evidence],
               "after": [e.after.release, e.after.outcome, e.after.evidence]} for e in tl.events(points)]
    return rows, events


def _touches(kb: KB, ev: Evidence, rec: Record) -> bool:
    """Evidence that ran on this accelerator/architecture, or judged a claim about this record."""
    if isinstance(rec, Accelerator):
        return ev.environment.accelerator == rec.id
    if rec.kind == "architecture":
        return ev.environment.architecture == rec.id
    for v in ev.verdicts:
        c = kb.get(v.claim)
        if isinstance(c, Claim) and c.subject == rec.id:
            return True
    return False
