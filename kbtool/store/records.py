"""Discover record files and turn them into located, validated records."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbtool.findings import Finding
from kbtool.model import Record
from kbtool.paths import display
from kbtool.store.reader import Document, read_document


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


def discover(paths: Iterable[Path], root: Path) -> tuple[list[Path], list[Finding]]:
    """Every *.yaml/*.yml under the given paths; symlinks leading outside the tree are findings."""
    out: list[Path] = []
    findings: list[Finding] = []
    real_root = root.resolve()
    for p in paths:
        if p.is_dir():
            for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
                dirnames.sort()
                for name in sorted(filenames):
                    if name.endswith((".yaml", ".yml")):
                        out.append(Path(dirpath) / name)
        elif p.exists() or p.is_symlink():
            out.append(p)
        else:
            findings.append(Finding("KB100", "no such file or directory", str(p), None, "$",
                                    fix="check the path", check="yaml"))
    kept = []
    for f in out:
        if f.is_symlink():
            target = f.resolve()
            if not target.is_relative_to(real_root) or not target.exists():
                findings.append(Finding("KB100", f"symlink points outside the records tree (to {target})",
                                        display(f, root), None, "$", fix="copy the record in instead",
                                        check="yaml"))
                continue
        kept.append(f)
    return kept, findings


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
    for f in files:
        doc, problems = docs.read(f, display(f, root)) if docs else read_document(f, display(f, root))
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
