"""Keep full-line comments with the key they stand above when keys are reordered.

ruamel stores a comment line that stands above a key as the trailing comment of whatever ended just before it
(often the deepest last value of the previous key). Before reordering, such lines are moved to the key they
precede; lines after the last key are moved back to the end after reordering.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

_MAP_SLOT, _SEQ_SLOT = 2, 0


def _flow(node: Any) -> bool:
    return bool(node.fa.flow_style())


def _tail(container: Any, key: Any) -> tuple[Any, Any, int]:
    """(container, key, slot) of the comment that follows the value at container[key]."""
    value = container[key]
    if isinstance(value, CommentedMap) and value and not _flow(value):
        return _tail(value, list(value)[-1])
    if isinstance(value, CommentedSeq) and value and not _flow(value):
        return _tail(value, len(value) - 1)
    return container, key, _MAP_SLOT if isinstance(container, CommentedMap) else _SEQ_SLOT


def _token(container: Any, key: Any, slot: int) -> CommentToken | None:
    entry = container.ca.items.get(key)
    if not entry or len(entry) <= slot:
        return None
    tok = entry[slot]
    return tok if isinstance(tok, CommentToken) else None


def take_following(container: Any, key: Any) -> str:
    """Remove and return the full-line comments after the value at container[key] (end of line kept)."""
    c, k, slot = _tail(container, key)
    tok = _token(c, k, slot)
    if tok is None:
        return ""
    value = tok.value
    if value.startswith("#"):
        eol, _, rest = value.partition("\n")
        eol += "\n"
    else:
        eol, rest = "\n", value[1:] if value.startswith("\n") else value
    if not rest:
        return ""
    if eol == "\n":
        c.ca.items[k][slot] = None
    else:
        tok.value = eol
    return rest


def put_following(container: Any, key: Any, text: str) -> None:
    """Append full-line comments after the value at container[key]."""
    if not text:
        return
    c, k, slot = _tail(container, key)
    tok = _token(c, k, slot)
    if tok is not None:
        tok.value = tok.value + text if tok.value.endswith("\n") else tok.value + "\n" + text
        return
    entry = c.ca.items.setdefault(k, [None, None, None, None])
    entry[slot] = CommentToken("\n" + text, CommentMark(0), None)


def put_before(mapping: CommentedMap, key: Any, text: str) -> None:
    """Set full-line comments to stand just above `key` (indented like the mapping's keys)."""
    if not text:
        return
    column = mapping.lc.col or 0
    entry = mapping.ca.items.setdefault(key, [None, None, None, None])
    tokens = list(entry[1] or [])
    for line in text.splitlines():
        body = line.strip()
        tokens.append(CommentToken(body + "\n", CommentMark(column if body else 0), None))
    entry[1] = tokens
