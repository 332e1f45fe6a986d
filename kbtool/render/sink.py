"""Where rendered lines go: plain text to a stream (no rich), or rich Text to a Console (styles, terminals).

A line is a list of (text, style) segments; the style is a rich style name ("bold", "dim", "green", ...) or ""
for none. The plain sink writes the segments' text exactly as rich writes it when it emits no styles: rich
drops five control characters (bell, backspace, vertical tab, form feed, carriage return) and expands tabs to
8-column stops, so the plain sink does too. `wants_rich` says whether rich would write escape codes to a
stream (rich's Console.is_terminal, 15.x): TTY_COMPATIBLE=0 -> plain, =1 -> rich; else a set FORCE_COLOR ->
rich unless empty; else the stream's isatty(). TTY_INTERACTIVE only changes rich's live displays, not what it
prints, so it does not count. NO_COLOR on a terminal still goes to rich (it keeps bold and dim and drops
colour itself). `pick_sink` (kbtool/render/choose.py) uses it. Importing this module does not import rich.
"""

from __future__ import annotations

import builtins
import os
import sys

TYPE_CHECKING = False  # the warm query path imports this module: no typing at run time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import TextIO


    Seg = tuple[str, str]

# rich.control.STRIP_CONTROL_CODES: bell, backspace, vertical tab, form feed, carriage return
_STRIP = {7: None, 8: None, 11: None, 12: None, 13: None}
_TAB = 8  # rich's Console.tab_size default


class Sink:
    """A destination for rendered lines."""

    def line(self, segs: Sequence[Seg]) -> None:
        raise NotImplementedError

    def rule(self, title: str) -> None:
        """A horizontal rule with a centred title, as rich's Console.rule draws it."""
        raise NotImplementedError


class PlainSink(Sink):
    """Unstyled text to a stream (sys.stdout when none is given, looked up at each write)."""

    def __init__(self, stream: TextIO | None = None, environ: Mapping[str, str] | None = None) -> None:
        self._stream = stream
        self._environ = os.environ if environ is None else environ

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    def line(self, segs: Sequence[Seg]) -> None:
        text = "".join([t for t, _ in segs])
        self.stream.write((text if text.isprintable() else plain_text(text)) + "\n")

    def rule(self, title: str) -> None:
        self.stream.write(plain_rule(title, rule_width(self._environ), _ascii_only(self.stream)))


def plain_text(text: str) -> str:
    """`text` as rich writes it without styles: five control characters dropped, tabs expanded per line."""
    if text.isprintable():  # the common case, decided in C: no control characters, no tabs
        return text
    text = text.translate(_STRIP)
    if "\t" not in text:
        return text
    if text.isascii():
        return text.expandtabs(_TAB)  # character columns == cell columns for ASCII
    from rich.text import Text  # cell widths of wide characters: rich's own table (rare: a tab and non-ASCII)

    t = Text(text)
    t.expand_tabs(_TAB)
    return t.plain


def rule_width(environ: Mapping[str, str]) -> int:
    """The width rich's Console gives a rule: COLUMNS if it is a number, else a std stream's terminal size, else 80."""
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    width = 0
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    return width or 80


def plain_rule(title: str, width: int, ascii_only: bool = False) -> str:
    """rich.rule.Rule(title) (centred, "─") as rich writes it at `width` with no styles, newline included.

    Quirks kept: a zero width writes nothing; a rule with no room for the title (or no title) keeps "─" even
    on a non-UTF stream; a titled rule crops two cells off its right end.
    """
    if width <= 0:
        return ""
    if not (title.isascii() and title.isprintable()):
        return _rich_rule(title, width, ascii_only)
    if not title or width - 4 <= 0:
        return "─" * width + "\n"
    ch = "-" if ascii_only else "─"
    if len(title) > width - 4:
        title = title[: width - 5] + "…"
    side = (width - len(title)) // 2
    left = ch * (side - 1)
    right = ch * min(side + 1, width - len(left) - len(title))
    text = f"{left} {title} {right}"
    return (text[:width] if len(text) >= width else text + " " * (width - len(text))) + "\n"


def _rich_rule(title: str, width: int, ascii_only: bool) -> str:
    """Titles with non-ASCII or control characters: let rich measure them (never for accelerator ids)."""
    import io

    from rich.console import Console
    from rich.text import Text

    class Buf(io.StringIO):
        encoding = "ascii" if ascii_only else "utf-8"  # what rich reads

    buf = Buf()
    c = Console(file=buf, width=width, color_system=None, highlight=False, soft_wrap=True, force_terminal=False,
                legacy_windows=False)
    c.rule(Text(title))
    return buf.getvalue()


def _ascii_only(stream: TextIO) -> bool:
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower()
    return not encoding.startswith("utf")


def wants_rich(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Would a rich Console writing to `stream` consider it a terminal (and so may write escape codes)?"""
    env = os.environ if environ is None else environ
    if getattr(builtins, "get_ipython", None) is not None:
        return True  # IPython/Jupyter: rich has its own display path there
    tty_compatible = env.get("TTY_COMPATIBLE", "")
    if tty_compatible == "0":
        return False
    if tty_compatible == "1":
        return True
    force_color = env.get("FORCE_COLOR")
    if force_color is not None:
        return force_color != ""
    isatty = getattr(stream, "isatty", None)
    try:
        return False if isatty is None else bool(isatty())
    except ValueError:  # closed stream
        return False
