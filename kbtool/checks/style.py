"""KB601 not-canonical: a record file is not in the form `kb fmt` writes (a warning)."""

from __future__ import annotations

from pathlib import Path

from kbtool.checks import check
from kbtool.errors import KbError
from kbtool.findings import Finding
from kbtool.kb import KB

EXCLUDED_KINDS = frozenset({"evidence"})  # written only by `kb probe run`; `kb fmt` never touches them


def find_not_canonical(path: Path, text: str, display: str) -> Finding | None:
    """A KB601 finding for one file's text, or None when it is canonical (or cannot be formatted)."""
    from kbtool.fmt.core import canonical

    try:
        want = canonical(text, path, display)
    except KbError:
        return None  # unreadable or unformattable files are reported by other checks
    if want == text:
        return None
    line = _first_difference(text, want)
    return Finding("KB601", "not in canonical form (key order, quoting or schema line)", display, line, "$",
                   severity="warning", fix="run `kb fmt` (see the change with `kb fmt --check`)",
                   check="not-canonical")


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False), start=1):
        if x != y:
            return i
    return min(len(a.splitlines()), len(b.splitlines())) + 1


@check("KB601", "not-canonical", "the file is in the canonical form `kb fmt` writes (warning)")
def find_non_canonical_files(kb: KB) -> list[Finding]:
    from kbtool.fmt.cache import KnownCanonical

    known = KnownCanonical()
    out = []
    for rid, where in kb.where.items():
        rec = kb.by_id[rid]
        if rec.kind in EXCLUDED_KINDS:
            continue
        try:
            text = where.path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if known.has(where.file, text):
            continue
        finding = find_not_canonical(where.path, text, where.file)
        if finding is None:
            known.add(where.file, text)
        else:
            out.append(finding)
    known.save()
    return out
