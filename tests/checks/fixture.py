"""The fixture KB (tests/data/kb_fixture) as records, and a way to change one record of it."""

from __future__ import annotations

from functools import cache
from typing import Any

from kbtool.kb import KB
from kbtool.model import Record
from kbtool.store.records import load_tree
from tests.util import DATA

ROOT = DATA / "kb_fixture"


@cache
def records() -> tuple[Record, ...]:
    return tuple(x.record for x in load_tree(ROOT).loaded if x.record is not None)


def kb_with(rid: str, **update: Any) -> KB:
    """The fixture KB with record `rid`'s fields replaced (validated again by its model)."""
    out = []
    for r in records():
        if r.id == rid:
            r = type(r).model_validate({**r.model_dump(mode="json", exclude_defaults=True, by_alias=True), **update})
        out.append(r)
    return KB.from_records(out)
