"""What vLLM's selection is, as data: each backend's check, the selection (the backend it uses, the list it walked,
every refusal), and the releases the priority records name."""

from __future__ import annotations

from kbtool.solve.conditions import version_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.image import Image
    from kbtool.solve.parts import Reason


class BackendCheck:
    """One backend's check: its status (ok | caveat | unknown | rejected) and the reasons behind it. Plain classes
    here: `dataclasses` (and the `inspect` it imports) would add 13 ms to every pasted-line query."""

    __slots__ = ("id", "name", "reasons", "status")

    def __init__(self, id: str, name: str, status: str, reasons: list[Reason] | None = None) -> None:
        self.id, self.name, self.status = id, name, status
        self.reasons: list[Reason] = [] if reasons is None else reasons

    def _fields(self) -> tuple[Any, ...]:
        return self.id, self.name, self.status, self.reasons

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __repr__(self) -> str:
        return f"BackendCheck(id={self.id!r}, name={self.name!r}, status={self.status!r}, reasons={self.reasons!r})"

    @property
    def valid(self) -> bool:
        return self.status in ("ok", "caveat")


class Selection:
    """What vLLM would do: the backend it uses, the list it walked, and every refusal with its reasons. `source`:
    where the answer comes from when it is not the release's records (its recorded grid, vllm/grid.py);
    `between`: for a release with no record at all, the recorded releases around it and what each does."""

    __slots__ = ("between", "checks", "error", "priority", "requested", "selected", "source", "version")

    def __init__(self, version: str | None, priority: list[str], checks: dict[str, BackendCheck],
                 selected: str | None, requested: str | None = None, error: str | None = None,
                 source: str | None = None, between: str | None = None) -> None:
        self.version, self.priority, self.checks, self.selected = version, priority, checks, selected
        self.requested, self.error, self.source, self.between = requested, error, source, between

    def _fields(self) -> tuple[Any, ...]:
        return (self.version, self.priority, self.checks, self.selected, self.requested, self.error, self.source,
                self.between)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Selection(version={self.version!r}, selected={self.selected!r}, requested={self.requested!r}, "
                f"error={self.error!r}, priority={self.priority!r})")

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
    return sorted(out, key=version_key)
