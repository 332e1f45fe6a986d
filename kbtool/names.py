"""The one id/alias resolver: a name (an id or alias, any case) to the id it names, or a "did you mean" error.

Both the loaded KB (kbtool/kb.py) and the query image (kbtool/solve/image.py) resolve through it. Plain
standard library only: the query path imports it.
"""

from __future__ import annotations

from kbtool.errors import NotFoundError


def resolve_name(pool: dict[str, str], name: str, kind: str | None = None, flag: str | None = None) -> str:
    """The id `name` names in `pool` ({lowercase id or alias: id}); a miss raises with the three nearest ids."""
    key = name.strip().lower()
    rid = pool.get(key)
    if rid is not None:
        return rid
    import difflib

    ranked = difflib.get_close_matches(key, list(pool), n=len(pool), cutoff=0.3)
    ids = list(dict.fromkeys(pool[a] for a in ranked))[:3]
    hint = f"did you mean {', '.join(ids)}?" if ids else f"run `kb list --kind {kind or 'KIND'}`"
    raise NotFoundError(f"{flag + ': ' if flag else ''}unknown {kind or 'record'} '{name}'", fix=hint)
