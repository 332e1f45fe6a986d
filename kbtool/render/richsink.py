"""The rich sink: each line's segments become one rich Text (styles kept), printed on a Console."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from kbtool.render.sink import Sink

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kbtool.render.sink import Seg


class RichSink(Sink):
    def __init__(self, console: Console) -> None:
        self.console = console

    def line(self, segs: Sequence[Seg]) -> None:
        text = Text()
        for t, style in segs:
            text.append(t, style or None)
        self.console.print(text)

    def rule(self, title: str) -> None:
        self.console.rule(Text(title))
