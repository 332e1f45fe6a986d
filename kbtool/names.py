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


# ---- names a driver or a compute capability gives ----------------------------------------------


def name_tokens(text: str) -> tuple[str, ...]:
    """The words of a name, casefolded; every run of characters that is neither letter nor digit (spaces, dashes,
    underscores, brackets) separates two words: "NVIDIA A100-SXM4-80GB" -> ("nvidia", "a100", "sxm4", "80gb")."""
    return tuple("".join(c if c.isalnum() else " " for c in text.casefold()).split())


def _within(phrase: tuple[str, ...], words: tuple[str, ...]) -> bool:
    """Whether `phrase` occurs in `words` as whole consecutive words."""
    n = len(phrase)
    return 0 < n <= len(words) and any(words[i:i + n] == phrase for i in range(len(words) - n + 1))


def match_device(device: str | None, records: list[tuple[str, list[str], list[str]]]) -> str | None:
    """The record a driver-reported device name ("NVIDIA H100 80GB HBM3") names, or None.

    `records` is (id, names, device_names) per accelerator: its id, name and aliases, and the exact names drivers
    report for it. An exact device name wins (words compared, see name_tokens). Otherwise the record whose id, name
    or alias occurs in the device name as whole words, the longest such phrase, unless
    - two records tie on it;
    - it is part of a longer name of another record (a bare "H100", with "H100 PCIe" and "H100 NVL" in the KB);
    - or the device name has a word that another record's names have and this record's do not ("40GB" in
      "A100-PCIE-40GB" against the 80 GB PCIe card).
    Records come from the KB (records/accelerators/*.yaml): kb keeps no GPU names of its own."""
    if not device:
        return None
    words = name_tokens(device)
    exact = {r for r, _names, devices in records for d in devices if name_tokens(d) == words}
    if exact:
        return exact.pop() if len(exact) == 1 else None
    phrases = {r: {name_tokens(n) for n in [*names, *devices]} - {()} for r, names, devices in records}
    best: dict[str, tuple[str, ...]] = {}
    for r, _names, _devices in records:
        own = [p for p in phrases[r] if _within(p, words)]
        if own:
            best[r] = max(own, key=len)
    if not best:
        return None
    longest = max(len(p) for p in best.values())
    top = [r for r, p in best.items() if len(p) == longest]
    if len(top) != 1:
        return None
    rid, phrase = top[0], best[top[0]]
    others = [p for r, ps in phrases.items() if r != rid for p in ps]
    if any(len(p) > len(phrase) and _within(phrase, p) for p in others):
        return None
    mine = {w for p in phrases[rid] for w in p}
    theirs = {w for p in others for w in p}
    if any(w in theirs and w not in mine for w in words):
        return None
    return rid


def architecture_of(cc: str | float | None, ccs: dict[str, str | None]) -> str | None:
    """The architecture id whose compute capability is `cc` ("9.0" or 9.0), from `ccs` {architecture id: its
    compute_capability} as the architecture records give it (records/architectures/*.yaml); None if no record has
    it, or more than one."""
    if cc is None or cc == "":
        return None
    key = f"{cc:.1f}" if isinstance(cc, float | int) else str(cc).strip()
    ids = [a for a, c in ccs.items() if c == key]
    return ids[0] if len(ids) == 1 else None
