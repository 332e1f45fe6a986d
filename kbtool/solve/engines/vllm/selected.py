"""What vLLM's selection is, as data: each backend's check, the selection (the backend it uses, the list it walked,
every refusal), and the releases the priority records name."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from kbtool.solve.conditions import compare_versions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.answer import Reason
    from kbtool.solve.image import Image


@dataclass
class BackendCheck:
    id: str
    name: str
    status: str  # ok | caveat | unknown | rejected
    reasons: list[Reason] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.status in ("ok", "caveat")


@dataclass
class Selection:
    """What vLLM would do: the backend it uses, the list it walked, and every refusal with its reasons."""

    version: str | None
    priority: list[str]
    checks: dict[str, BackendCheck]
    selected: str | None
    requested: str | None = None
    error: str | None = None
    source: str | None = None
    """Where the answer comes from when it is not the release's records: its recorded grid (vllm/grid.py)"""
    between: str | None = None
    """For a release with no record at all: the recorded releases around it and what each does"""

    def as_dict(self) -> dict[str, Any]:
        extra = {k: v for k, v in (("source", self.source), ("between", self.between)) if v}
        return {
            "vllm": self.version, "selected": self.selected, "requested": self.requested, "error": self.error,
            **extra,
            "priority": self.priority,
            "backends": [{"id": c.id, "name": c.name, "status": c.status,
                          "reasons": [r.message for r in c.reasons]} for c in
                         (self.checks[b] for b in self.priority if b in self.checks)],
        }


def versions(img: Image, engine: str = "vllm") -> list[str]:
    """The releases the priority records name, oldest first."""
    out: set[str] = set()
    for _id, _e, _p, scope, _lists in img.priorities(engine):
        for _lib, introduced, fixed, last in scope:
            for v in (introduced, last):
                if v:
                    out.add(v)
            del fixed
    return sorted(out, key=functools.cmp_to_key(compare_versions))
