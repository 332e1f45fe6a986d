"""Claim text: a version scope as words, and `{var}` placeholders in reason messages (found and filled).

Shared by the image builder (kbtool/solve/imagebuild.py keeps each claim's scope text and the variables its message
reads) and the gates (kbtool/solve/gates.py fills messages). No regex: `kb query` starts faster without re.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from kbtool.solve.conditions import Env


def scope_text(scope: Iterable[tuple[str, str | None, str | None, str | None]]) -> str | None:
    """`flashinfer >= 0.2, < 0.6.18`: a claim's version scope as text (the image keeps it per claim)."""
    parts = []
    for library, introduced, fixed, last_affected in scope:
        rng = []
        if introduced:
            rng.append(f">= {introduced}")
        if fixed:
            rng.append(f"< {fixed}")
        if last_affected:
            rng.append(f"<= {last_affected}")
        parts.append(f"{library} {', '.join(rng)}".strip())
    return "; ".join(parts) or None


_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz_")
_REST = _FIRST | frozenset("0123456789-")


def _spans(template: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each `{name}` placeholder, leftmost first; a name is [a-z_][a-z0-9_-]*.
    (A scanner rather than a regex: `kb query` starts faster without importing re.)"""
    out = []
    i = template.find("{")
    while i >= 0:
        j = template.find("}", i + 1)
        if j < 0:
            break
        name = template[i + 1:j]
        if name and name[0] in _FIRST and all(ch in _REST for ch in name):
            out.append((i, j + 1, name))
            i = template.find("{", j + 1)
        else:
            i = template.find("{", i + 1)
    return out


def placeholders(template: str) -> set[str]:
    """The variables a message template fills in."""
    return {name for _, _, name in _spans(template)}


def _show(name: str, v: object) -> str:
    if v is None:
        return "not given"
    if isinstance(v, bool):
        return str(v).lower()
    if name.endswith("_bytes") and isinstance(v, int):
        return f"{v / 2**30:,.1f} GiB"
    return str(v)


def fill(template: str, env: Env) -> str:
    """Fill {var} placeholders from the environment; a missing input shows as 'not given', a byte count in GiB."""
    parts, at = [], 0
    for start, end, name in _spans(template):
        parts += [template[at:start], _show(name, env.get(name))]
        at = end
    return "".join(parts) + template[at:] if parts else template
