"""KB601 not-canonical: a record file is not in the form `kb fmt` writes (a warning).

The check and `kb fmt` share one formatter (kbtool/fmt/core.py: canonical, a ruamel round trip).
"""

from __future__ import annotations

from pathlib import Path

from kbtool.checks import FOCUS, check
from kbtool.errors import KbError
from kbtool.findings import Finding
from kbtool.kb import KB

EXCLUDED_KINDS = frozenset({"evidence"})  # written only by `kb probe run`; `kb fmt` never touches them


def first_difference(path: Path, text: str, display: str) -> int:
    """0 when `text` is canonical (or cannot be formatted: other checks report that), else the first line that
    differs."""
    from kbtool.fmt.core import canonical

    try:
        want = canonical(text, path, display)
    except KbError:
        return 0
    if want == text:
        return 0
    for i, (x, y) in enumerate(zip(text.splitlines(), want.splitlines(), strict=False), start=1):
        if x != y:
            return i
    return min(len(text.splitlines()), len(want.splitlines())) + 1


def finding(display: str, line: int) -> Finding:
    return Finding("KB601", "not in canonical form (key order, quoting or schema line)", display, line, "$",
                   severity="warning", fix="run `kb fmt` (see the change with `kb fmt --check`)",
                   check="not-canonical")


def find_not_canonical(path: Path, text: str, display: str) -> Finding | None:
    """A KB601 finding for one file's text, or None when it is canonical (or cannot be formatted)."""
    line = first_difference(path, text, display)
    return finding(display, line) if line else None


@check("KB601", "not-canonical", "the file is in the canonical form `kb fmt` writes (warning)")
def find_non_canonical_files(kb: KB) -> list[Finding]:
    focus = FOCUS.get()
    out = []
    for rid, where in kb.where.items():
        if kb.by_id[rid].kind in EXCLUDED_KINDS or (focus is not None and where.file not in focus):
            continue
        try:
            text = where.path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        got = find_not_canonical(where.path, text, where.file)
        if got is not None:
            out.append(got)
    return out
