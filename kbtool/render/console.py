"""Consoles for stdout (results) and stderr (diagnostics); NO_COLOR is respected by rich itself.

Every text segment rich writes passes kbtool.escape.escape first (rich's own style and control codes are kept):
a record name holding ESC]0; or U+009B reaches the terminal as visible text, whatever printed it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

from kbtool.escape import escape


class SafeConsole(Console):
    """A rich Console that escapes control characters in the text it renders."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        # rich drops BEL, backspace, VT, FF and CR from text before rendering; written as visible escapes first, a
        # record's "ESC]0;title BEL" shows whole (markup brackets are untouched: escape rewrites controls only)
        super().print(*(escape(o) if isinstance(o, str) else o for o in objects), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer([s if s.control else Segment(escape(s.text), s.style, s.control)
                                       for s in buffer])


out = SafeConsole(highlight=False, soft_wrap=True)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
