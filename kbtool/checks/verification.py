"""Claims and their verification: sources, evidence behind statuses, disputes with sides."""

from __future__ import annotations

from typing import Any

from kbtool.checks import check, in_focus
from kbtool.findings import Finding
from kbtool.kb import KB
from kbtool.model import Claim, Evidence

_AGREES = {"verified": {"confirmed"}, "refuted": {"contradicted"}, "disputed": {"partial", "contradicted",
                                                                                "confirmed", "inconclusive"}}
def judged(kb: KB) -> Any:
    """evidence id -> claim -> {"verdict", "scope"}: what each evidence record says judged again today."""
    from kbtool.probe.judged import judged as rejudged

    return rejudged(kb)


def _claims(kb: KB) -> list[Claim]:
    return [r for r in kb if isinstance(r, Claim)]


@check("KB302", "status-without-evidence", "a verified or refuted claim lists evidence records that exist")
def find_status_without_evidence(kb: KB) -> list[Finding]:
    out = []
    for c in _claims(kb):
        v = c.verification
        if v.status in ("verified", "refuted") and not v.evidence:
            file, line = kb.location(c.id, "verification", "status")
            out.append(Finding("KB302", f"status '{v.status}' without evidence", file, line,
                               "$.verification.status",
                               fix=f"run `kb probe run --claim {c.id} --write`, or set the status to unverified",
                               check="status-without-evidence"))
        for i, e in enumerate(v.evidence):
            if not isinstance(kb.get(e), Evidence) and e not in kb.invalid:
                file, line = kb.location(c.id, "verification", "evidence", i)
                out.append(Finding("KB302", f"evidence '{e}' is not an evidence record", file, line,
                                   f"$.verification.evidence[{i}]", fix="cite an evidence record id",
                                   check="status-without-evidence"))
    return out


@check("KB303", "evidence-disagrees", "the evidence a claim cites agrees with its status")
def find_evidence_disagreement(kb: KB) -> list[Finding]:
    out = []
    for c in _claims(kb):
        if not in_focus(kb, c.id):  # `kb validate FILE`: only the claims in those files
            continue
        v = c.verification
        allowed = _AGREES.get(v.status)
        for i, eid in enumerate(v.evidence):
            ev = kb.get(eid)
            if not isinstance(ev, Evidence):
                continue
            on = judged(kb).get(eid, {}).get(c.id)
            verdicts = [on["verdict"]] if on else []
            if verdicts and (allowed is None or set(verdicts) & allowed):
                continue
            file, line = kb.location(c.id, "verification", "evidence", i)  # a line map is unpacked only here
            if not verdicts:
                out.append(Finding("KB303", f"evidence '{eid}' has no verdict on this claim (judged again today)",
                                   file, line,
                                   f"$.verification.evidence[{i}]", fix="cite the evidence that judged it",
                                   check="evidence-disagrees"))
            else:
                out.append(Finding("KB303", f"status '{v.status}' but evidence '{eid}' says {verdicts[0]}", file,
                                   line, "$.verification.status", fix="re-run `kb probe run --write` or fix status",
                                   check="evidence-disagrees"))
    return out


@check("KB304", "dispute-without-sides", "a disputed claim cites at least two sides")
def find_disputes_without_sides(kb: KB) -> list[Finding]:
    out = []
    for c in _claims(kb):
        v = c.verification
        if v.status == "disputed" and len(v.sides) < 2 and not v.evidence:
            file, line = kb.location(c.id, "verification", "status")
            out.append(Finding("KB304", f"disputed with {len(v.sides)} side(s)", file, line, "$.verification",
                               fix="add `sides:` with each position and its sources", check="dispute-without-sides"))
    return out


@check("KB305", "untestable-without-reason", "an untestable claim states why")
def find_untestable_without_reason(kb: KB) -> list[Finding]:
    out = []
    for c in _claims(kb):
        if c.verification.status == "untestable" and not c.verification.reason:
            file, line = kb.location(c.id, "verification", "status")
            out.append(Finding("KB305", "untestable without a reason", file, line, "$.verification",
                               fix="add `reason:` (e.g. no wheel installs on the probe host)",
                               check="untestable-without-reason"))
    return out



NOTES_UNSETTLED = ("unverified until", "status stays unverified", "not yet verified", "no timing has been measured",
                   "no probe has run", "has not been run", "never been run")
"""Phrases by which a note says the claim is not settled by a run: under a verified or refuted status they contradict
the verification block (issue 45). A note about one part of the claim names the part instead."""


@check("KB307", "notes-contradict-status", "a claim's notes do not call it unsettled while its status says verified or "
                                           "refuted")
def find_notes_contradicting_status(kb: KB) -> list[Finding]:
    out = []
    for c in _claims(kb):
        if c.verification.status not in ("verified", "refuted") or not c.notes:
            continue
        text = " ".join(c.notes.lower().split())
        hit = next((p for p in NOTES_UNSETTLED if p in text), None)
        if hit:
            file, line = kb.location(c.id, "notes")
            out.append(Finding("KB307", f"notes say '{hit}' while the status is {c.verification.status}", file, line,
                               "$.notes", fix="rewrite the notes to say what the evidence showed (kb show CLAIM)",
                               check="notes-contradict-status"))
    return out
