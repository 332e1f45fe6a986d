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


LOADING = (
    Check("KB100", "yaml", "file is readable, safe, well-formed YAML (no tags, bombs, tabs, duplicate keys, bad "
          "encoding)", None),
    Check("KB101", "schema", "record matches its kind's model (and so its published JSON Schema)", None),
)


def check(code: str, name: str, description: str) -> Callable[[CheckFn], CheckFn]:
    """Name a check function (its code, name and description, read by `all_checks`); registers nothing."""

    def deco(fn: CheckFn) -> CheckFn:
        setattr(fn, "kb_check", Check(code, name, description, fn))  # noqa: B010  (an attribute mypy cannot see)
        return fn

    return deco


def check_of(fn: CheckFn) -> Check:
    found = getattr(fn, "kb_check", None)
    if not isinstance(found, Check):
        raise TypeError(f"{fn.__qualname__} is not decorated with @check")
    return found


def all_checks() -> list[Check]:
    """Every check, by code: the one explicit list (what is imported elsewhere changes nothing)."""
    from kbtool.checks import axes, consistency, naming, references, style, timeline, topics, values, verification

    fns: list[CheckFn] = [
        references.find_duplicate_ids, references.find_dangling_refs, references.find_alias_collisions,
        references.find_former_id_collisions,
        references.find_cycles, references.find_self_refs, references.find_misplaced,
        values.find_unsourced_facts, values.find_bad_values, values.find_unknown_condition_values,
        values.find_control_characters,
        verification.find_status_without_evidence, verification.find_evidence_disagreement,
        verification.find_disputes_without_sides, verification.find_untestable_without_reason,
        verification.find_notes_contradicting_status,
        consistency.find_scope_disagreement, timeline.find_scope_disagreement,
        timeline.find_unsupported_ranges, naming.find_release_named_claims,
        axes.find_kernels_missing_axes,
        topics.find_dangling_xrefs, topics.find_confidence_mismatch, topics.find_wrong_kinds,
        topics.find_unlinked, topics.find_fat_stubs,
        style.find_non_canonical_files,
    ]
    return sorted([*LOADING, *(check_of(f) for f in fns)], key=lambda c: c.code)


def by_code() -> dict[str, Check]:
    return {c.code: c for c in all_checks()}
