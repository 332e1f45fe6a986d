"""Choosing a sink: plain text when rich would write no styles, else rich (kbtool/render/richsink.py).

Apart from kbtool/render/sink.py so that the plain sink never needs the rich one (no import cycle); rich is
only imported on the rich path.
"""

from __future__ import annotations

import sys

from kbtool.render.sink import PlainSink, Sink, wants_rich

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

    from rich.console import Console


def pick_sink(stream: TextIO | None = None) -> Sink:
    """The plain sink when rich would emit no styles to `stream` (default sys.stdout), else the rich sink."""
    target = sys.stdout if stream is None else stream
    if not wants_rich(target):
        return PlainSink(stream)
    from kbtool.render.richsink import RichSink

    if stream is None or stream is sys.stdout:
        from kbtool.render.console import out

        return RichSink(out)
    from rich.console import Console

    return RichSink(Console(file=stream, highlight=False, soft_wrap=True))


def as_sink(target: Sink | Console) -> Sink:
    """A sink as is; a rich Console wrapped in the rich sink."""
    if isinstance(target, Sink):
        return target
    from kbtool.render.richsink import RichSink

    return RichSink(target)
