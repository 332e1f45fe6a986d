"""Where rendered lines go: plain text, or plain text with ANSI styles for a terminal. Never imports rich.

A line is a list of (text, style) segments; the style is a space-separated set of names ("bold", "dim",
"green", "bold red", ...) or "" for none. `for_stream` picks the sink: a terminal (isatty, TERM not "dumb")
gets ANSI styles, with colours unless NO_COLOR is set (bold and dim stay); FORCE_COLOR set non-empty forces
ANSI on any stream. Control characters in the text are dropped (user and record text is printed as text,
never as escape codes); tabs are expanded to 8 columns. Rules span the terminal's width (COLUMNS, else the
size of a std stream, else 80).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # the query path imports this module: no typing at run time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import TextIO

    Seg = tuple[str, str]

_SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
        "cyan": "36", "white": "37"}
_COLOURS = frozenset(("red", "green", "yellow", "blue", "magenta", "cyan", "white"))


def clean(text: str) -> str:
    """`text` with control characters (C0, DEL, ESC, C1) shown as visible escapes (kbtool.escape) and tabs
    expanded: safe to print anywhere."""
    if text.isprintable():  # the common case, decided in C
        return text
    from kbtool.escape import escape

    return escape(text.expandtabs(8))


class Sink:
    """Unstyled lines to a stream (sys.stdout when none is given, looked up at each write)."""

    def __init__(self, stream: TextIO | None = None, environ: Mapping[str, str] | None = None) -> None:
        self._stream = stream
        self._environ = os.environ if environ is None else environ

    @property
    def stream(self) -> TextIO:
        import sys

        return self._stream if self._stream is not None else sys.stdout

    def style(self, text: str, style: str) -> str:  # noqa: ARG002  (a plain sink prints no style)
        return text

    def line(self, segs: Sequence[Seg]) -> None:
        self.stream.write("".join([self.style(clean(t), s) for t, s in segs]) + "\n")

    def rule(self, title: str) -> None:
        """A horizontal rule with a centred title."""
        self.stream.write(plain_rule(clean(title), rule_width(self._environ), _ascii_only(self.stream)))


PlainSink = Sink


class AnsiSink(Sink):
    """Lines with ANSI SGR styles; colours only when `colour` (NO_COLOR keeps bold and dim)."""

    def __init__(self, stream: TextIO | None = None, environ: Mapping[str, str] | None = None,
                 colour: bool = True) -> None:
        super().__init__(stream, environ)
        self.colour = colour

    def style(self, text: str, style: str) -> str:
        codes = [_SGR[n] for n in style.split() if n in _SGR and (self.colour or n not in _COLOURS)]
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes and text else text


def for_stream(stream: TextIO, environ: Mapping[str, str] | None = None) -> Sink:
    """The sink for `stream`: ANSI styles on a terminal (or with FORCE_COLOR), plain text otherwise."""
    env = os.environ if environ is None else environ
    force = env.get("FORCE_COLOR")
    if force or (force is None and _isatty(stream) and env.get("TERM") != "dumb"):
        return AnsiSink(stream, env, colour=not env.get("NO_COLOR"))
    return Sink(stream, env)


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def rule_width(environ: Mapping[str, str]) -> int:
    """COLUMNS if it is a number, else a std stream's terminal size, else 80."""
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    for fd in (1, 2, 0):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80


def plain_rule(title: str, width: int, ascii_only: bool = False) -> str:
    """A rule of `width` cells ("─", or "-" on a non-UTF stream) with `title` centred, newline included."""
    if width <= 0:
        return ""
    ch = "-" if ascii_only else "─"
    if not title or width - 4 <= 0:
        return ch * width + "\n"
    if len(title) > width - 4:
        title = title[: width - 5] + "…"
    side = (width - len(title)) // 2
    left = ch * (side - 1)
    right = ch * min(side + 1, width - len(left) - len(title))
    text = f"{left} {title} {right}"
    return (text[:width] if len(text) >= width else text + " " * (width - len(text))) + "\n"


def _ascii_only(stream: TextIO) -> bool:
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower()
    return not encoding.startswith("utf")
