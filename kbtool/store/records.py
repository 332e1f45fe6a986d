"""Discover record files and turn them into located, validated records."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbtool.findings import Finding
from kbtool.model import Record
from kbtool.paths import Display, display
from kbtool.store.reader import Document, read_document
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


class _Walk:
    """The records tree walk: regular *.yaml/*.yml files, symlinks followed only while they stay in the tree
    (each folder once, so a link loop ends), and a finding for everything skipped."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real_root = Path(os.path.realpath(root))
        self.files: list[Path] = []
        self.findings: list[Finding] = []
        self.seen: set[str] = set()
        self.linked: list[Path] = []

    def run(self) -> None:
        while self.linked:
            self.folder(self.linked.pop(0))

    def leaves(self, p: Path) -> Path | None:
        real = Path(os.path.realpath(p))
        return None if real.is_relative_to(self.real_root) else real

    def folder(self, d: Path) -> None:
        real = os.path.realpath(d)
        if real in self.seen:
            return
        self.seen.add(real)
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as e:
            self.findings.append(_finding(d, self.root, f"cannot list folder: {e.strerror or e}",
                                          "check its permissions"))
            return
        for entry in entries:
            self.entry(Path(entry.path))

    def entry(self, p: Path) -> None:
        if p.is_symlink():
            real = self.leaves(p)
            if not p.exists():
                if _is_record(p.name):
                    self.findings.append(_finding(p, self.root, f"dangling symlink (to {os.readlink(p)})",
                                                  "remove the link, or point it at a record in the tree"))
                return
            if real is not None:
                what = "folder" if p.is_dir() else "record"
                if p.is_dir() or _is_record(p.name):
                    self.findings.append(_finding(p, self.root, f"symlinked {what} leaves the records tree (to "
                                                  f"{real}); not read", f"copy the {what} into the tree instead"))
                return
        try:
            mode = p.stat().st_mode
        except OSError as e:
            self.findings.append(_finding(p, self.root, f"cannot read: {e.strerror or e}", "check the path"))
            return
        if stat.S_ISDIR(mode):
            if p.is_symlink():
                self.linked.append(p)  # after the real folders, so a record is found under its real path first
            else:
                self.folder(p)
        elif _is_record(p.name):
            if stat.S_ISREG(mode):
                self.files.append(p)
            else:
                self.findings.append(_finding(p, self.root, f"is {file_kind(mode)}, not a regular file; not read",
                                              "remove it; a record is a regular YAML file"))


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
            walk.entry(p)  # a link given by name follows the tree's rules
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
        doc, problems = docs.read(f, name(f)) if docs else read_document(f, name(f))
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
