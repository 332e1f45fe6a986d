"""Nothing raw to a terminal: the one escaping function every string from a record, a config, an engine's
output or the user passes before it is printed.

C0 controls (but tab and newline), DEL, ESC, the C1 controls U+0080-U+009F (U+009B CSI and U+009D OSC act as
ESC[ and ESC] on many terminals) and the bidirectional overrides are shown as visible escapes (`\\x1b`,
`\\x9b`, `\\u202e`), so `ESC]0;title` or `ESC[2J` in a record name reaches the screen as text, never as a
command. The query path imports this module: no imports beyond re.
"""

from __future__ import annotations

import re

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""The characters `escape` rewrites (tab and newline are kept; a carriage return is escaped)."""


def _visible(m: re.Match[str]) -> str:
    n = ord(m.group())
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def escape(text: str) -> str:
    """`text` with every control character (see CONTROL) written as a visible escape."""
    if text.isprintable():  # the common case, decided in C
        return text
    return CONTROL.sub(_visible, text)


def has_control(text: str) -> bool:
    """Whether `text` holds a character `escape` would rewrite (what `kb validate` KB108 flags)."""
    return CONTROL.search(text) is not None
