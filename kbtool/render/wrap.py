"""Word wrapping for the text answer: textwrap.wrap's lines without importing textwrap.

`kb query` prints a wrapped answer on every run; textwrap imports `re` (and with it enum, functools and
collections), about a fifth of a warm query's own time. `wrap` gives the lines textwrap.wrap gives with
break_long_words=False and break_on_hyphens=False (and its other defaults: tabs expanded to 8 columns, every
ASCII whitespace character read as a space, spaces dropped at line ends and at the start of continuation
lines), which tests/render/test_wrap.py checks against textwrap itself on generated text.
"""

from __future__ import annotations

_SPACES = str.maketrans("\n\x0b\x0c\r", "    ")  # textwrap's _whitespace less the tab (expanded first)


def _chunks(text: str) -> list[str]:
    """The words and the runs of spaces between them, in order (textwrap's wordsep_simple_re split)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        j = text.find(" ", i)
        if j < 0:
            out.append(text[i:])
            break
        if j > i:
            out.append(text[i:j])
        k = j + 1
        while k < n and text[k] == " ":
            k += 1
        out.append(text[j:k])
        i = k
    return out


def wrap(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> list[str]:
    """`text` in lines of at most `width` columns where its words allow (a longer word gets a line of its own,
    unbroken); the first line starts with `initial_indent`, the others with `subsequent_indent`."""
    if width <= 0:
        raise ValueError(f"invalid width {width!r} (must be > 0)")
    chunks = _chunks(text.expandtabs(8).translate(_SPACES))
    chunks.reverse()
    lines: list[str] = []
    while chunks:
        line: list[str] = []
        size = 0
        indent = subsequent_indent if lines else initial_indent
        room = width - len(indent)
        if lines and chunks[-1].strip() == "":
            del chunks[-1]
        while chunks and size + len(chunks[-1]) <= room:
            size += len(chunks[-1])
            line.append(chunks.pop())
        if chunks and len(chunks[-1]) > room and not line:
            line.append(chunks.pop())  # a word longer than the line: alone, unbroken
        if line and line[-1].strip() == "":
            del line[-1]
        if line:
            lines.append(indent + "".join(line))
    return lines
