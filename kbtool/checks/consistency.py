"""KB306: per-scope verdicts and version-scope events agree with the evidence, judged again today
(kbtool.probe.judged)."""

from __future__ import annotations

from kbtool.checks import check, in_focus
from kbtool.findings import Finding
from kbtool.kb import KB
from kbtool.model import Claim, Evidence
from kbtool.probe.judged import judged
from kbtool.probe.scoping import in_range

_SCOPED = {"verified": "confirmed", "refuted": "contradicted", "untestable": "inconclusive"}


def _claims(kb: KB) -> list[Claim]:
    return [r for r in kb if isinstance(r, Claim)]


def _finding(kb: KB, c: Claim, message: str, path: tuple[str | int, ...], fix: str) -> Finding:
    file, line = kb.location(c.id, *path)
    return Finding("KB306", message, file, line, "$." + ".".join(str(p) for p in path), fix=fix,
                   check="scope-disagrees")


def _range_findings(kb: KB, c: Claim) -> list[Finding]:
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
            if on is None and version is not None and not in_range(str(version), r) and any(
                    v.claim == c.id and v.verdict == "contradicted" for v in ev.verdicts):
                continue  # the other side of a bound: outside today's range, so judged only when it was recorded
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
    out = []
    for c in _claims(kb):
        if not in_focus(kb, c.id):  # `kb validate FILE`: only the claims in those files
            continue
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
