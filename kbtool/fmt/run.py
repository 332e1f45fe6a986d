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

EXCLUDED_FOLDERS = ("evidence",)  # evidence is written only by `kb probe run`


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


def excluded(path: Path, root: Path) -> bool:
    try:
        rel = Path(path).resolve().relative_to(root.resolve())
    except ValueError:
        return "evidence" in Path(path).parts[:-1]
    return bool(rel.parts) and rel.parts[0] in EXCLUDED_FOLDERS


def format_paths(root: Path, paths: list[Path] | None = None, *, check: bool = False) -> FmtReport:
    """Format the given files or folders (default: the whole tree); with `check`, only report."""
    files, problems = discover(paths or [root], root)
    results = [FileResult(Path(f.file or "?"), f.file or "?", "error", message=f.text()) for f in problems]
    for f in files:
        results.append(format_file(f, root, check=check))
    return FmtReport(results, check)


def format_file(path: Path, root: Path, *, check: bool = False) -> FileResult:
    name = display(path, root)
    if excluded(path, root):
        return FileResult(path, name, "skipped", message="evidence records are written only by `kb probe run`")
    if check:
        return _format(path, name, write=False)
    with file_lock(path):  # read, format and replace under the lock another writer (kb probe) also takes
        return _format(path, name, write=True)


def _format(path: Path, name: str, *, write: bool) -> FileResult:
    try:
        text = path.read_text("utf-8")
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
