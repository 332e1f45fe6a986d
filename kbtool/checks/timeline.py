"""A claim's version scope against its release timeline (issue 28): what each swept release's evidence shows."""

from __future__ import annotations

from kbtool.checks import check, in_focus
from kbtool.findings import Finding
from kbtool.kb import KB
from kbtool.model import Claim
from kbtool.solve.engines.vllm import timeline as tl

_LAST: list[tuple[KB, dict[str, list[tl.Point]]]] = []  # the last KB's timelines, held so its id is not reused


def _timelines(kb: KB) -> dict[str, list[tl.Point]]:
    """The release timelines of `kb`'s claims, worked out once for both checks below (KB320, KB321)."""
    if not _LAST or _LAST[0][0] is not kb:
        _LAST[:] = [(kb, tl.timelines(kb))]
    return _LAST[0][1]


def refuted_at(claim: Claim, lib: str = "vllm") -> dict[str, set[str]]:
    """Release -> the evidence of the claim's refuted verdicts there. A refuted claim keeps the release in its scope
    (the verdict must lie inside it, KB306) and the solver no longer enforces it there: its range at that release
    is the scope of the refutation, supported by the refuting evidence, not a disagreement with the timeline."""
    out: dict[str, set[str]] = {}
    for v in claim.verification.verdicts:
        if v.status == "refuted" and lib in v.scope.libraries:
            out.setdefault(v.scope.libraries[lib], set()).update(v.evidence)
    return out


def scope_findings(claim: Claim, points: list[tl.Point], lib: str = "vllm") -> list[tuple[int, str, str]]:
    """(range index or -1, message, fix) for each release whose outcome the claim's `lib` scope contradicts:
    a release where the claim holds left outside every range, or one where it does not hold inside one (unless
    the claim's verdict there is refuted, citing that release's evidence: `refuted_at`)."""
    ranges = [(i, r.model_dump(mode="json", exclude_defaults=True)) for i, r in enumerate(claim.scope)
              if r.library == lib]
    if not ranges:
        return []  # not scoped to releases of `lib`: its timeline is shown, not enforced
    want = tl.ranges(points)
    fix = (f"run `kb probe events --write` (the releases give {lib} ranges "
           f"{'; '.join(_range_text(r) for r in want) or 'none'})")
    out = []
    refuted = refuted_at(claim, lib)
    for p in points:
        inside = [i for i, r in ranges if tl.covers(r, p.release)]
        if p.outcome == "holds" and not inside:
            out.append((-1, f"holds on {lib} {p.release} ({p.evidence}) but its {lib} scope leaves {p.release} out",
                        fix))
        elif p.outcome == "fails" and inside and p.evidence not in refuted.get(p.release, set()):
            out.append((inside[0], f"does not hold on {lib} {p.release} ({p.evidence}: {p.detail}) but its scope "
                        f"includes {p.release}", fix))
    return out


def _range_text(r: dict[str, object]) -> str:
    lo = r.get("introduced") or "any"
    hi = r.get("last_affected") or (f"<{r['fixed']}" if r.get("fixed") else "newest")
    return f"{lo}..{hi}"


@check("KB320", "scope-disagrees-with-releases", "a claim's version scope agrees with each swept release's evidence")
def find_scope_disagreement(kb: KB) -> list[Finding]:
    out = []
    lines = _timelines(kb)
    for cid, points in sorted(lines.items()):
        c = kb.get(cid)
        if not isinstance(c, Claim) or not in_focus(kb, cid):
            continue
        for index, message, fix in scope_findings(c, points):
            path: tuple[str | int, ...] = ("scope", index) if index >= 0 else ("scope",)
            file, line = kb.location(cid, *path)
            out.append(Finding("KB320", message, file, line, "$.scope" + (f"[{index}]" if index >= 0 else ""),
                               fix=fix, check="scope-disagrees-with-releases", severity="warning"))
    return out


BOUNDS = ("introduced", "fixed", "last_affected")


def unsupported_ranges(claim: Claim, points: list[tl.Point], lib: str = "vllm") -> list[tuple[int, str, str]]:
    """(range index, message, fix) for each `lib` range with a bound at a release the claim's timeline records
    that cites no evidence: a bound the sweep could support is held only by what the record says (issue 46). A
    bound at a release where the claim is refuted by that release's evidence is the refutation's scope, supported
    by the verdict's evidence (`refuted_at`)."""
    swept = {p.release: p for p in points if p.outcome in ("holds", "fails")}
    refuted = refuted_at(claim, lib)
    out = []
    for i, r in enumerate(claim.scope):
        if r.library != lib or r.evidence:
            continue
        at = [(k, v) for k in BOUNDS if (v := getattr(r, k)) and v in swept
              and swept[v].evidence not in refuted.get(v, set())]
        if at:
            k, v = at[0]
            out.append((i, f"its {lib} range's {k} {v} cites no evidence, although {lib} {v} was swept "
                        f"({swept[v].evidence}: {_word(swept[v].outcome)})",
                        f"run `kb probe events {claim.id}` to see what the releases support, or cite the evidence "
                        f"that shows the bound in the range's `evidence`"))
    return out


def _word(outcome: str) -> str:
    return "holds" if outcome == "holds" else "does not hold"


@check("KB321", "range-without-evidence", "a claim's version range bounded at a swept release cites evidence")
def find_unsupported_ranges(kb: KB) -> list[Finding]:
    out = []
    for cid, points in sorted(_timelines(kb).items()):
        c = kb.get(cid)
        if not isinstance(c, Claim) or not in_focus(kb, cid):
            continue
        for index, message, fix in unsupported_ranges(c, points):
            file, line = kb.location(cid, "scope", index)
            out.append(Finding("KB321", message, file, line, f"$.scope[{index}]", fix=fix,
                               check="range-without-evidence", severity="warning"))
    return out
