"""Discover record files and turn them into located, validated records."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbtool.findings import Finding
from kbtool.model import Record
from kbtool.paths import Display, display
from kbtool.store.document import Document
from kbtool.store.untrusted import file_kind


@dataclass
class Loaded:
    """One record file: its data, its line map and, when it validated, its model."""

    doc: Document
    path: Path
    record: Record | None = None

    @property
    def file(self) -> str:
        return self.doc.file

    @property
    def data(self) -> Any:
        return self.doc.data

    def line(self, *parts: str | int) -> int | None:
        return self.doc.line_of(parts)


@dataclass
class LoadResult:
    root: Path
    loaded: list[Loaded] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def records(self) -> list[Record]:
        return [x.record for x in self.loaded if x.record is not None]


def _finding(path: Path, root: Path, message: str, fix: str) -> Finding:
    return Finding("KB100", message, display(path, root), None, "$", fix=fix, check="yaml")


def _is_record(name: str) -> bool:
    return name.endswith((".yaml", ".yml"))


MAX_FOLDERS = 5_000
"""Folders a records walk enters before it stops (the shipped tree has 12)."""


class _Walk:
    """The records tree walk: regular *.yaml/*.yml files, symlinks followed only while they stay in the tree
    (each folder once, so a link loop ends), and a finding for everything skipped."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real_root = Path(os.path.realpath(root))
        self.files: list[Path] = []
        self.findings: list[Finding] = []
        self.seen: set[tuple[int, int]] = set()
        self.linked: list[Path] = []
        self.folders = 0

    def run(self) -> None:
        while self.linked:
            self.folder(self.linked.pop(0))

    def leaves(self, p: Path) -> Path | None:
        real = Path(os.path.realpath(p))
        return None if real.is_relative_to(self.real_root) else real

    def folder(self, d: Path) -> None:
        """Walk `d` depth-first in name order, with a stack instead of recursion: a tree 1,200 folders deep is
        walked like any other (it ended in RecursionError)."""
        top = self._list(d)
        stack = [top] if top is not None else []
        while stack:
            if self.folders > MAX_FOLDERS:  # `--kb ~` or `--kb /tmp`: a cache of 100,000 folders is no records tree
                self.findings.append(_finding(d, self.root, f"more than {MAX_FOLDERS:,} folders under it: not a "
                                              f"records tree; stopped walking", "point --kb or KB_RECORDS at a "
                                              "records folder (claims/, models/, ...)"))
                return
            p = next(stack[-1], None)
            if p is None:
                stack.pop()
                continue
            try:
                sub = self.entry(p)
            except OSError as e:  # /proc/1/cwd and the like: a finding, not a crash
                self.findings.append(_finding(p, self.root, f"cannot read: {e.strerror or e}", "check the path"))
                continue
            if sub is not None:
                it = self._list(sub)
                if it is not None:
                    stack.append(it)

    def _list(self, d: Path) -> Iterator[Path] | None:
        """The entries of folder `d` in name order; None when it was seen (a link loop) or cannot be listed."""
        try:  # a folder is known by its inode: realpath per folder costs depth^2 lookups, cubic in a deep tree
            st = os.stat(d)
            key = (st.st_dev, st.st_ino)
            if key in self.seen:
                return None
            self.seen.add(key)
            self.folders += 1
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as e:
            self.findings.append(_finding(d, self.root, f"cannot list folder: {e.strerror or e}",
                                          "check its permissions"))
            return None
        return iter([Path(e.path) for e in entries])

    def entry(self, p: Path) -> Path | None:
        """Take one path into the walk; a real folder is returned for the caller to walk."""
        if p.is_symlink():
            real = self.leaves(p)
            if not p.exists():
                if _is_record(p.name):
                    self.findings.append(_finding(p, self.root, f"dangling symlink (to {os.readlink(p)})",
                                                  "remove the link, or point it at a record in the tree"))
                return None
            if real is not None:
                what = "folder" if p.is_dir() else "record"
                if p.is_dir() or _is_record(p.name):
                    self.findings.append(_finding(p, self.root, f"symlinked {what} leaves the records tree (to "
                                                  f"{real}); not read", f"copy the {what} into the tree instead"))
                return None
        try:
            mode = p.stat().st_mode
        except OSError as e:
            self.findings.append(_finding(p, self.root, f"cannot read: {e.strerror or e}", "check the path"))
            return None
        if stat.S_ISDIR(mode):
            if p.is_symlink():
                self.linked.append(p)  # after the real folders, so a record is found under its real path first
                return None
            return p
        if _is_record(p.name):
            if stat.S_ISREG(mode):
                self.files.append(p)
            else:
                self.findings.append(_finding(p, self.root, f"is {file_kind(mode)}, not a regular file; not read",
                                              "remove it; a record is a regular YAML file"))
        return None


def discover(paths: Iterable[Path], root: Path) -> tuple[list[Path], list[Finding]]:
    """Every regular *.yaml/*.yml under the given paths (kbtool.store.untrusted's rules): FIFOs, devices,
    dangling links and symlinks leading outside the tree are skipped, each with a finding naming the path as
    found in the tree (the link, not its target)."""
    walk = _Walk(root)
    for p in paths:
        if not (p.exists() or p.is_symlink()):
            walk.findings.append(Finding("KB100", "no such file or directory", str(p), None, "$",
                                         fix="check the path", check="yaml"))
        elif p.is_symlink():
            sub = walk.entry(p)  # a link given by name follows the tree's rules
            if sub is not None:
                walk.folder(sub)
        elif p.is_dir():
            walk.folder(p)
        else:
            mode = p.stat().st_mode
            if stat.S_ISREG(mode):
                walk.files.append(p)
            else:
                walk.findings.append(_finding(p, root, f"is {file_kind(mode)}, not a regular file; not read",
                                              "give a regular YAML file"))
    walk.run()
    return walk.files, walk.findings


def load_tree(root: Path, paths: Iterable[Path] | None = None, *, cached: bool = False) -> LoadResult:
    """Read and validate every record file. Never raises for bad content. With `cached`, files whose bytes did not
    change since the last cached run are not parsed again (kbtool.store.doc_cache)."""
    from kbtool.store.schema import validate_document

    result = LoadResult(root)
    files, result.findings = discover(list(paths) if paths else [root], root)
    docs = None
    if cached:
        from kbtool.store.doc_cache import DocCache

        docs = DocCache(root)
    name = Display(root)
    for f in files:
        if docs:
            doc, problems = docs.read(f, name(f))
        else:
            from kbtool.store.reader import read_document

            doc, problems = read_document(f, name(f))
        result.findings += problems
        if doc is None:
            continue
        item = Loaded(doc, f)
        record, problems = validate_document(doc)
        result.findings += problems
        item.record = record
        result.loaded.append(item)
    if docs:
        docs.save()
    return result
