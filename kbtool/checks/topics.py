"""Topics: `[[id]]` cross-references resolve, stated confidence agrees with the derived one, links go to the
right kinds of record, statements are linked, external stubs stay stubs."""

from __future__ import annotations

from kbtool.checks import check
from kbtool.findings import Finding, render_path
from kbtool.kb import KB
from kbtool.model.topic import XREF, Topic
from kbtool.topic.derive import agrees, derive


def _topics(kb: KB) -> list[Topic]:
    return [r for r in kb if isinstance(r, Topic)]


def _original_ids(kb: KB) -> set[str]:
    return {t.original_id for t in _topics(kb) if t.original_id}


def resolves(kb: KB, target: str, originals: set[str] | None = None) -> bool:
    """An `[[id]]` names a record by id or alias, or a topic by its id in the source knowledge base."""
    if kb.exists(target) or target.lower() in kb.aliases:
        return True
    return target in (originals if originals is not None else _original_ids(kb))


def _xref_line(kb: KB, rid: str, path: tuple[str | int, ...], target: str) -> int | None:
    """The line of the file that holds `[[target]]`, searching from the line of the field."""
    w = kb.where.get(rid)
    if w is None:
        return None
    start = w.line(*path) or 1
    try:
        lines = w.path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return start
    needle = f"[[{target}]]"
    for i in range(start - 1, len(lines)):
        if needle in lines[i]:
            return i + 1
    return start


@check("KB501", "dangling-xref", "every [[id]] cross-reference in a topic names a record (or an external stub)")
def find_dangling_xrefs(kb: KB) -> list[Finding]:
    originals = _original_ids(kb)
    out = []
    for t in _topics(kb):
        for path, text in t.prose():
            for target in XREF.findall(text):
                if resolves(kb, target, originals):
                    continue
                file = kb.where[t.id].file if t.id in kb.where else None
                out.append(Finding("KB501", f"[[{target}]] names no record", file, _xref_line(kb, t.id, path, target),
                                   render_path(path), check="dangling-xref",
                                   fix=f"add records/topics/{target}.yaml (with `external: true` for a record kb "
                                       "does not hold), or fix the id"))
    return out


@check("KB502", "topic-confidence", "a topic's stated verification agrees with the one derived from its claims")
def find_confidence_mismatch(kb: KB) -> list[Finding]:
    out = []
    for t in _topics(kb):
        if t.external:
            continue
        d = derive(t, kb)
        v = t.verification
        if v is not None:
            wrong = []
            if not agrees(v.confidence, d.confidence):
                wrong.append(f"confidence {v.confidence} but derived {d.confidence}")
            if v.status != d.status:
                wrong.append(f"status '{v.status}' but derived '{d.status}'")
            if v.level is not None and v.level != d.level:
                wrong.append(f"level '{v.level}' but derived '{d.level}'")
            if wrong:
                file, line = kb.location(t.id, "verification")
                out.append(Finding("KB502", "; ".join(wrong), file, line, "$.verification", check="topic-confidence",
                                   fix=f"set verification to {{status: {d.status}, level: {d.level}, "
                                       f"confidence: {d.confidence}}} (see `kb show {t.id}`)"))
        s = t.stated
        if s is not None and s.confidence is not None and not agrees(s.confidence, d.confidence):
            file, line = kb.location(t.id, "stated", "confidence")
            out.append(Finding("KB502", f"the source states confidence {s.confidence}; its claims give "
                                        f"{d.confidence} ({d.status})", file, line, "$.stated.confidence",
                               severity="warning", check="topic-confidence",
                               fix="nothing to edit: the source's figure is kept as provenance; probe the claims"))
    return out


def _links(t: Topic) -> list[tuple[tuple[str | int, ...], str, str]]:
    """(path, target, wanted kind) for every typed link of a topic."""
    out: list[tuple[tuple[str | int, ...], str, str]] = []
    for i, s in enumerate(t.statements):
        out += [(("statements", i, "claims", j), c, "claim") for j, c in enumerate(s.claims)]
    for i, r in enumerate(t.hardware_parameters):
        out.append((("hardware_parameters", i, "parameter"), r.parameter, "hardware-parameter"))
        out += [(("hardware_parameters", i, "values_for", j), a, "accelerator") for j, a in enumerate(r.values_for)]
    out += [(("affected_accelerators", i), a, "accelerator") for i, a in enumerate(t.affected_accelerators)]
    return out


@check("KB503", "topic-link-kind", "topic links name the right kind: statements claims, rows hardware "
                                   "parameters and accelerators")
def find_wrong_kinds(kb: KB) -> list[Finding]:
    out = []
    for t in _topics(kb):
        for path, target, want in _links(t):
            rec = kb.get(target)
            if rec is None or rec.kind == want:
                continue
            file, line = kb.location(t.id, *path)
            out.append(Finding("KB503", f"'{target}' is a {rec.kind}, not a {want}", file, line, render_path(path),
                               check="topic-link-kind", fix=f"link a {want} record here"))
    return out


@check("KB504", "unlinked-statement", "every statement of a topic is carried by at least one claim")
def find_unlinked(kb: KB) -> list[Finding]:
    out = []
    for t in _topics(kb):
        for i, s in enumerate(t.statements):
            if not s.claims:
                file, line = kb.location(t.id, "statements", i)
                out.append(Finding("KB504", f"statement {i} links no claim: {s.text[:60]}", file, line,
                                   f"$.statements[{i}]", severity="warning", check="unlinked-statement",
                                   fix="add the claim ids that carry it under `claims`, or write the claim"))
    return out


@check("KB505", "external-stub", "an external topic is a stub: no statements, rows or stated verification")
def find_fat_stubs(kb: KB) -> list[Finding]:
    out = []
    for t in _topics(kb):
        if not t.external:
            continue
        for key in ("statements", "hardware_parameters", "verification"):
            if getattr(t, key):
                file, line = kb.location(t.id, key)
                out.append(Finding("KB505", f"external stub has {key}", file, line, f"$.{key}",
                                   check="external-stub",
                                   fix="drop `external: true` to hold the topic in kb, or remove the field"))
    return out
