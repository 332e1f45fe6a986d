"""A parsed record file: its data and the line of every node. Apart from the parser (kbtool.store.reader), so a run
whose files all come from the parse cache (kbtool.store.doc_cache) never imports the YAML library."""

from __future__ import annotations

import marshal
from dataclasses import dataclass, field
from typing import Any

from kbtool.findings import PathPart


@dataclass
class Document:
    """A parsed YAML file: its data and, for every path in it, the 1-based line."""

    file: str
    data: Any
    lines: dict[tuple[PathPart, ...], int] = field(default_factory=dict)
    # True when the reader saw no non-finite number and no control character in any key or string: the NaN and
    # control-character checks then have nothing to find in it (False: not known, they look)
    clean: bool = False
    # the line map as the parse cache stores it (marshal bytes), unpacked by the first line_of: most runs never ask
    packed: bytes | None = None

    def line_of(self, path: tuple[PathPart, ...] | list[PathPart]) -> int | None:
        if self.packed is not None:
            self.lines, self.packed = {**marshal.loads(self.packed), **self.lines}, None
        p = tuple(path)
        while p not in self.lines and p:
            p = p[:-1]
        return self.lines.get(p)
