"""KB601 not-canonical: a record file is not in the form `kb fmt` writes (a warning)."""

from __future__ import annotations

from pathlib import Path

from kbtool.checks import FOCUS, check
from kbtool.errors import KbError
from kbtool.findings import Finding
from kbtool.kb import KB

EXCLUDED_KINDS = frozenset({"evidence"})  # written only by `kb probe run`; `kb fmt` never touches them


def first_difference(path: Path, text: str, display: str, kind: str | None = None) -> int:
    """0 when `text` is canonical (or cannot be formatted: other checks report that), else the first line that
    differs. A missing or stale schema line is found without formatting."""
    line = _quick_difference(path, text, kind)
    if line is not None:
        return line
    from kbtool.fmt.core import canonical

    try:
        want = canonical(text, path, display)
    except KbError:
        return 0
    return _differs(text, want)


def _quick_difference(path: Path, text: str, kind: str | None) -> int | None:
    """first_difference without ruamel's round trip (kbtool/fmt/fast.py), or None when that cannot decide."""
    from kbtool.fmt.core import schema_line
    from kbtool.fmt.fast import fast_canonical

    if kind is not None and text.partition("\n")[0] != schema_line(path, kind):
        return 1
    want = fast_canonical(text, path)
    return None if want is None else _differs(text, want)


def _differs(text: str, want: str) -> int:
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
    from kbtool.fmt.cache import Verdicts

    known = Verdicts()
    focus = FOCUS.get()
    seen: list[tuple[str, int | None]] = []
    todo: list[tuple[Path, str, str, str]] = []
    for rid, where in kb.where.items():
        rec = kb.by_id[rid]
        if rec.kind in EXCLUDED_KINDS or (focus is not None and where.file not in focus):
            continue
        try:
            text = where.path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        line = known.get(where.file, text)
        if line is None:
            todo.append((where.path, text, where.file, rec.kind))
        seen.append((where.file, line))
    lines = _first_differences(todo)
    for (_, text, name, _), line in zip(todo, lines, strict=True):
        known.put(name, text, line)
    fresh = iter(lines)
    out = []
    for name, line in seen:
        if line is None:
            line = next(fresh)
        if line:
            out.append(finding(name, line))
    known.save()
    return out


PARALLEL_MIN = 64  # files to format before a second process pays for itself


def _one(job: tuple[Path, str, str, str]) -> int:
    return first_difference(*job)


def _first_differences(todo: list[tuple[Path, str, str, str]]) -> list[int]:
    """first_difference for each job; many jobs are spread over forked workers, one per CPU (KB_JOBS=N caps
    that; 1 turns it off). Formatting is pure Python, so only processes run it in parallel. Most files are
    decided without ruamel (kbtool/fmt/fast.py), but even that is worth two processes for a large KB."""
    return _round_trips(todo)


def _round_trips(todo: list[tuple[Path, str, str, str]]) -> list[int]:
    import os

    jobs = min(int(os.environ.get("KB_JOBS") or (os.cpu_count() or 1)), 8, len(todo) // PARALLEL_MIN)
    result: list[int] = []
    if jobs >= 2:
        import multiprocessing

        if "fork" in multiprocessing.get_all_start_methods():
            try:
                with multiprocessing.get_context("fork").Pool(jobs) as pool:
                    result = pool.map(_one, todo, chunksize=max(1, len(todo) // (jobs * 8)))
            except Exception:  # no processes to be had, or a worker failed: do it here (errors re-raise here)
                result = []
    if len(result) != len(todo):
        result = [_one(j) for j in todo]
    return result
