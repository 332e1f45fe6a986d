"""Format record files: compute each file's canonical form, report the diff, write it unless checking."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from kbtool.errors import KbError
from kbtool.fmt.core import canonical
from kbtool.paths import display
from kbtool.store.records import discover
from kbtool.store.writer import atomic_write, file_lock

EXCLUDED_FOLDERS = {  # written only by kb, already canonical
    "evidence": "evidence records are written only by `kb probe run`",
    "measurements": "measurement records are written only by kb (`kb probe apply`, `kb bench`), in canonical form",
}
MAX_ITEMS = 5_000
"""Lines plus flow-style items a file may have for `kb fmt`: the round-trip parser costs about a millisecond each,
and the largest shipped hand-written record has 1,613 lines (engine-priorities/sglang-0.5.23-cuda.yaml)."""


@dataclass(frozen=True)
class FileResult:
    path: Path
    name: str
    status: str  # "ok" (already canonical), "changed", "skipped", "error"
    diff: str = ""
    message: str = ""


@dataclass
class FmtReport:
    results: list[FileResult]
    check: bool

    def of(self, status: str) -> list[FileResult]:
        return [r for r in self.results if r.status == status]

    @property
    def exit_code(self) -> int:
        return 1 if self.of("error") or (self.check and self.of("changed")) else 0


def excluded(path: Path, root: Path) -> str | None:
    """Why kb fmt leaves `path` alone (a folder of records kb writes itself), or None."""
    try:
        parts = Path(path).resolve().relative_to(root.resolve()).parts[:1]
    except ValueError:
        parts = Path(path).parts[:-1]
    return next((why for folder, why in EXCLUDED_FOLDERS.items() if folder in parts), None)


def format_paths(root: Path, paths: list[Path] | None = None, *, check: bool = False) -> FmtReport:
    """Format the given files or folders (default: the whole tree); with `check`, only report."""
    files, problems = discover(paths or [root], root)
    results = [FileResult(Path(f.file or "?"), f.file or "?", "error", message=f.text()) for f in problems]
    for f in files:
        results.append(format_file(f, root, check=check))
    return FmtReport(results, check)


def format_file(path: Path, root: Path, *, check: bool = False) -> FileResult:
    name = display(path, root)
    why = excluded(path, root)
    if why:
        return FileResult(path, name, "skipped", message=why)
    if check:
        return _format(path, name, write=False)
    with file_lock(path):  # read, format and replace under the lock another writer (kb probe) also takes
        return _format(path, name, write=True)


def _format(path: Path, name: str, *, write: bool) -> FileResult:
    try:
        text = path.read_text("utf-8")
        items = text.count("\n") + text.count(",")
        if items > MAX_ITEMS:
            return FileResult(path, name, "error", message=(
                f"{name}: {items:,} lines and flow items, more than kb fmt formats ({MAX_ITEMS:,})\n"
                f"  fix: split the record; a condition lists values in one leaf's `in:`, not one `any:` branch each"))
        new = canonical(text, path, name)
    except (OSError, UnicodeDecodeError) as e:
        return FileResult(path, name, "error", message=f"{name}: cannot read: {e}")
    except KbError as e:
        return FileResult(path, name, "error", message=str(e))
    if new == text:
        return FileResult(path, name, "ok")
    diff = "".join(difflib.unified_diff(text.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{name}", f"b/{name}"))
    if write:
        atomic_write(path, new)
    return FileResult(path, name, "changed", diff=diff)
