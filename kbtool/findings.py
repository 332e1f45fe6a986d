"""Finding: one problem in one record, located by file, line and path inside the record."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning"]
PathPart = str | int


def render_path(parts: tuple[PathPart, ...] | list[PathPart]) -> str:
    """('requires', 'any', 1, 'in') -> '$.requires.any[1].in'."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


@dataclass(frozen=True, order=True)
class Finding:
    code: str
    message: str
    file: str | None = None
    line: int | None = None
    path: str = "$"
    severity: Severity = "error"
    fix: str | None = field(default=None, compare=False)
    check: str | None = field(default=None, compare=False)

    def location(self) -> str:
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        return where

    def text(self) -> str:
        return f"{self.location()} {self.path}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
