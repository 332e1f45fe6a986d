"""The loaded knowledge base: records by id, aliases, and where each record came from."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from kbtool.model import Record
from kbtool.names import resolve_name
from kbtool.store.records import Loaded, LoadResult, load_tree

if TYPE_CHECKING:
    from pathlib import Path

R = TypeVar("R", bound=Record)


@dataclass
class KB:
    """Validated records, indexed. Records with schema problems are not in it."""

    by_id: dict[str, Record] = field(default_factory=dict)
    where: dict[str, Loaded] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # lowercase alias or id -> id
    duplicates: list[Loaded] = field(default_factory=list)  # second and later files with a taken id
    # ids of records that were read but failed their schema: they exist, so references to them are not
    # dangling (their own finding says what is wrong; one problem, one finding)
    invalid: set[str] = field(default_factory=set)
    root: Path | None = None  # the records tree it was read from (the verdict seed lies there)
    renamed: dict[str, str] = field(default_factory=dict)  # a claim's former id -> its id (Claim.formerly)

    @classmethod
    def from_load(cls, result: LoadResult) -> KB:
        kb = cls()
        for item in result.loaded:
            if item.record is None:
                rid = item.data.get("id") if isinstance(item.data, dict) else None
                if isinstance(rid, str):
                    kb.invalid.add(rid)
                continue
            if item.record.id in kb.by_id:
                kb.duplicates.append(item)
            else:
                kb.add(item.record, item)
        kb.follow_renames()
        return kb

    def follow_renames(self) -> None:
        """Claims renamed (`formerly`) keep their evidence: each evidence record is read with today's claim ids
        (Evidence.renamed), and a former id finds the claim as an alias does. A former id that is another record's
        id or alias is left alone (KB207 reports it)."""
        from kbtool.model import Claim, Evidence

        self.renamed = {old: c.id for c in self.of_kind("claim", Claim) for old in c.formerly
                        if old not in self.by_id}
        if not self.renamed:
            return
        for old, new in self.renamed.items():
            self.aliases.setdefault(old.lower(), new)
        for ev in self.of_kind("evidence", Evidence):
            self.by_id[ev.id] = ev.renamed(self.renamed)

    @classmethod
    def from_records(cls, records: list[Record]) -> KB:
        kb = cls()
        for r in records:
            kb.add(r)
        kb.follow_renames()
        return kb

    def add(self, record: Record, where: Loaded | None = None) -> None:
        self.by_id[record.id] = record
        if where is not None:
            self.where[record.id] = where
        self.aliases.setdefault(record.id.lower(), record.id)
        for a in record.aliases:
            self.aliases.setdefault(a.lower(), record.id)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.by_id.values())

    def __len__(self) -> int:
        return len(self.by_id)

    def of_kind(self, kind: str, cls: type[R] | None = None) -> list[R]:  # noqa: ARG002  (cls types the result)
        return [r for r in self.by_id.values() if r.kind == kind]  # type: ignore[misc]

    def exists(self, id_: str) -> bool:
        """Whether a record has this id, valid or not (an invalid one has its own finding)."""
        return id_ in self.by_id or id_ in self.invalid

    def get(self, id_: str) -> Record | None:
        return self.by_id.get(id_)

    def resolve(self, name: str, kind: str | None = None) -> Record:
        """An id or alias, case-insensitive (of `kind`, when given); a miss names the three nearest ids."""
        pool = self.aliases if kind is None else {a: i for a, i in self.aliases.items() if self.by_id[i].kind == kind}
        return self.by_id[resolve_name(pool, name, kind)]

    def location(self, id_: str, *path: str | int) -> tuple[str | None, int | None]:
        w = self.where.get(id_)
        if w is None:
            return None, None
        return w.file, w.line(*path)


def load_kb(root: Path) -> tuple[KB, int]:
    """The one loader: the records under `root` that validate, indexed, and how many files were left out
    (unreadable, invalid or a duplicate id; `kb validate` says why)."""
    result = load_tree(root, cached=True)  # parsed files from the content-keyed cache (kbtool.store.doc_cache)
    kb = KB.from_load(result)
    kb.root = root
    bad = {f.file for f in result.findings if f.severity == "error"} | {d.file for d in kb.duplicates}
    return kb, len(bad)
