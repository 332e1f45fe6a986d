"""Loading the records for queries (cold): read with the fast safe YAML reader, validated with pydantic only.

It never imports jsonschema, networkx or ruamel. Records that fail to load are skipped and reported (run
`kb validate`). kbtool/store/cache.py caches the result, and the query image built from it
(kbtool/solve/image.py), which is what warm queries read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from kbtool.errors import UsageError
from kbtool.kb import KB
from kbtool.model import MODELS
from kbtool.paths import display
from kbtool.store.reader import read_document
from kbtool.store.records import Loaded, discover


@dataclass
class LoadReport:
    kb: KB
    skipped: list[str] = field(default_factory=list)  # "file: why" for records left out


def load_kb_report(root: Path) -> LoadReport:
    if not root.is_dir():
        raise UsageError(f"records tree not found: {root}", fix="pass --kb PATH or set KB_RECORDS")
    files, problems = discover([root], root)
    kb = KB()
    skipped = [f"{p.file}: {p.message}" for p in problems]
    for f in files:
        name = display(f, root)
        doc, errs = read_document(f, name)
        if doc is None or errs:
            skipped.append(f"{name}: {errs[0].message if errs else 'unreadable'}")
            continue
        data = doc.data
        kind = data.get("kind") if isinstance(data, dict) else None
        cls = MODELS.get(kind) if isinstance(kind, str) else None
        if cls is None:
            skipped.append(f"{name}: no known kind")
            continue
        try:
            record = cls.model_validate(data)
        except ValidationError as e:
            skipped.append(f"{name}: {e.errors()[0]['msg']}")
            continue
        if record.id in kb.by_id:
            skipped.append(f"{name}: duplicate id {record.id}")
            continue
        kb.add(record, Loaded(doc, f, record))
    return LoadReport(kb, skipped)


def load_kb(root: Path) -> KB:
    """The validated records under `root`, indexed (bad records are left out)."""
    return load_kb_report(root).kb
