"""Claims and their verification: sources, evidence behind statuses, disputes with sides."""

from __future__ import annotations

from typing import Any

from kbtool.checks import check
from kbtool.findings import Finding
from kbtool.kb import KB
from kbtool.model import Claim, Evidence

_AGREES = {"verified": {"confirmed"}, "refuted": {"contradicted"}, "disputed": {"partial", "contradicted",
                                                                                "confirmed", "inconclusive"}}
_SCOPED = {"verified": "confirmed", "refuted": "contradicted", "untestable": "inconclusive"}
_JUDGED: list[tuple[KB, dict[str, dict[str, Any]]]] = []  # the last KB judged, held so its id is not reused


def _claims(kb: KB) -> list[Claim]:
    return [r for r in kb if isinstance(r, Claim)]


def judged(kb: KB) -> dict[str, dict[str, Any]]:
    """evidence id -> claim -> {"verdict", "scope"}: each record's cases judged by today's probe (kbtool.probe.rejudge;
    the record's own verdicts where its probe cannot judge it again). Computed once per KB."""
    if not _JUDGED or _JUDGED[0][0] is not kb:
        from kbtool.probe.rejudge import probes_by_id, rejudge

        claims = {c.id: c for c in _claims(kb)}
        probes = probes_by_id()
        out: dict[str, dict[str, Any]] = {}
        for ev in kb.of_kind("evidence", Evidence):
            again = rejudge(ev, claims, probes)
            out[ev.id] = {v.claim: {"verdict": v.verdict, "scope": v.scope} for v in again.verdicts}
        _JUDGED[:] = [(kb, out)]
    return _JUDGED[0][1]


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
        v = c.verification
        allowed = _AGREES.get(v.status)
        for i, eid in enumerate(v.evidence):
            ev = kb.get(eid)
            if not isinstance(ev, Evidence):
                continue
            on = judged(kb).get(eid, {}).get(c.id)
            verdicts = [on["verdict"]] if on else []
            file, line = kb.location(c.id, "verification", "evidence", i)
            if not verdicts:
                out.append(Finding("KB303", f"evidence '{eid}' has no verdict on this claim (judged again today)",
                                   file, line,
                                   f"$.verification.evidence[{i}]", fix="cite the evidence that judged it",
                                   check="evidence-disagrees"))
            elif allowed is not None and not set(verdicts) & allowed:
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


def _finding(kb: KB, c: Claim, message: str, path: tuple[str | int, ...], fix: str) -> Finding:
    file, line = kb.location(c.id, *path)
    return Finding("KB306", message, file, line, "$." + ".".join(str(p) for p in path), fix=fix,
                   check="scope-disagrees")


def _range_findings(kb: KB, c: Claim) -> list[Finding]:
    from kbtool.probe.scoping import in_range
    from kbtool.probe.verdicts import run_vars
    from kbtool.solve.conditions import compare_versions

    out = []
    fix = "re-run `kb probe apply records/evidence --write`, or correct the bound by hand and drop the evidence"
    for i, r in enumerate(c.scope):
        for j, eid in enumerate(r.evidence):
            ev = kb.get(eid)
            where = ("scope", i, "evidence", j)
            if not isinstance(ev, Evidence):
                out.append(_finding(kb, c, f"scope evidence '{eid}' is not an evidence record", where, fix))
                continue
            on = judged(kb).get(eid, {}).get(c.id)
            version = (on or {}).get("scope", {}).get(r.library) or run_vars(ev).get(r.library)
            if on is None or version is None:
                out.append(_finding(kb, c, f"evidence '{eid}' has no verdict on this claim with {r.library}", where,
                                    fix))
                continue
            version, verdict = str(version), on["verdict"]
            if r.fixed and not (verdict == "contradicted" and compare_versions(version, r.fixed) >= 0):
                out.append(_finding(kb, c, f"fixed {r.fixed} cites '{eid}', which says {verdict} on {r.library} "
                                           f"{version}", where, fix))
            elif not r.fixed and verdict == "contradicted" and not in_range(version, r):
                continue  # fails outside the range: what the range says
            elif not r.fixed and verdict != "confirmed":
                out.append(_finding(kb, c, f"{r.library} bound cites '{eid}', which says {verdict} on {version}",
                                    where, fix))
            elif not r.fixed and not in_range(version, r):
                out.append(_finding(kb, c, f"'{eid}' confirmed the claim on {r.library} {version}, outside the "
                                           f"range it moved", where, fix))
    return out


@check("KB306", "scope-disagrees", "per-scope verdicts and version-scope events agree with the evidence")
def find_scope_disagreement(kb: KB) -> list[Finding]:
    from kbtool.probe.scoping import in_range

    out = []
    for c in _claims(kb):
        out += _range_findings(kb, c)
        for i, sv in enumerate(c.verification.verdicts):
            want = _SCOPED[sv.status]
            for lib, version in sv.scope.libraries.items():
                ranges = [r for r in c.scope if r.library == lib]
                if ranges and not any(in_range(version, r) for r in ranges):
                    out.append(_finding(kb, c, f"verdict scope {lib} {version} lies outside the claim's version "
                                               "scope", ("verification", "verdicts", i, "scope"),
                                        "evidence outside the range moves the range (kb probe apply); it is no "
                                        "verdict inside it"))
            for j, eid in enumerate(sv.evidence):
                on = judged(kb).get(eid, {}).get(c.id)
                if on is None:
                    out.append(_finding(kb, c, f"evidence '{eid}' has no verdict on this claim",
                                        ("verification", "verdicts", i, "evidence", j), "cite the evidence that "
                                        "judged it"))
                elif on["verdict"] != want and not (sv.status == "refuted" and on["verdict"] == "contradicted"):
                    out.append(_finding(kb, c, f"verdict '{sv.status}' but evidence '{eid}' says {on['verdict']}",
                                        ("verification", "verdicts", i, "status"),
                                        "re-run `kb probe apply records/evidence --write`"))
    return out
