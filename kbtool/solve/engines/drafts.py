"""A release's engine-release record as an engine drafts it from the release's own probe evidence
(Engine.draft_release, kbtool/solve/engines/base.py), and what the drafting found. Its own module, apart from
results.py, which every query imports: only `kb probe sweep` and `kb probe release-record` draft."""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


DRAFT_MARK = "Drafted by `kb probe sweep`"  # opens the notes of a drafted record (one without it was read by hand)


@dataclass
class ReleaseDraft:
    """An engine-release record an engine drafted from a release's own probe evidence (Engine.draft_release), and
    what the drafting found: `changed` (field, the previous release's value, the new one), `carried` (shown equal
    by the evidence: the previous record's citation kept), `unpinned` (the evidence does not decide them: carried,
    basis unverified), `unresolved` (differences from the evidence no candidate removed), the points replayed, and
    `why` nothing was drafted. `path`, `existing` ("draft", "read" or None) and `written` are filled by the writer
    (kbtool/probe/release_record.py); `differs`: where a record read by hand disagrees with the draft."""

    release: str
    label: str = ""  # the engine, as people write it
    previous: str | None = None
    record: dict[str, Any] | None = None
    changed: list[tuple[str, Any, Any]] = field(default_factory=list)
    carried: list[str] = field(default_factory=list)
    unpinned: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    points: int = 0
    planning_points: int = 0
    why: str | None = None
    path: str | None = None
    existing: str | None = None
    written: bool = False
    differs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release, "label": self.label, "previous": self.previous, "path": self.path,
                "existing": self.existing,
                "written": self.written, "changed": [list(c) for c in self.changed], "carried": self.carried,
                "unpinned": self.unpinned, "unresolved": self.unresolved, "differs": self.differs,
                "points": self.points, "planning_points": self.planning_points, "why": self.why}
