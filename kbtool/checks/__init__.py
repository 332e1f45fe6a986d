"""Named validation checks with stable codes. Each is a pure function KB -> findings."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from kbtool.findings import Finding
from kbtool.kb import KB

CheckFn = Callable[[KB], list[Finding]]

# Files the caller will report on (None: all). Checks whose cost is per file (KB601) may skip the others.
FOCUS: ContextVar[frozenset[str] | None] = ContextVar("kb_check_focus", default=None)


def in_focus(kb: KB, record_id: str) -> bool:
    """Whether the record's file is one the caller reports on (`kb validate FILE ...`; always, without files)."""
    focus = FOCUS.get()
    return focus is None or kb.location(record_id)[0] in focus


@dataclass(frozen=True)
class Check:
    code: str
    name: str
    description: str
    fn: CheckFn | None  # None: done while loading (KB100, KB101)


REGISTRY: dict[str, Check] = {}


def check(code: str, name: str, description: str) -> Callable[[CheckFn], CheckFn]:
    def deco(fn: CheckFn) -> CheckFn:
        REGISTRY[code] = Check(code, name, description, fn)
        return fn

    return deco


REGISTRY["KB100"] = Check("KB100", "yaml", "file is readable, safe, well-formed YAML (no tags, bombs, tabs, "
                          "duplicate keys, bad encoding)", None)
REGISTRY["KB101"] = Check("KB101", "schema", "record matches its kind's model (and so its published JSON Schema)", None)


def all_checks() -> list[Check]:
    from kbtool.checks import axes, references, style, timeline, topics, values, verification  # noqa: F401  (registration)

    return [REGISTRY[c] for c in sorted(REGISTRY)]
