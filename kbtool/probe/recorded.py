"""Recorded files an evidence record names with their digest, read only as the bytes its run wrote.

An engine probe's case keeps its raw grid beside the records (tests/data/vllm/<release>/cc<cc>.json.gz) and names
it in its metrics with the sha256 of the bytes it wrote (`raw`, `sha256`). The path is per release, not per run: a
later run of the same release (a newer grid version, probe v5's has_sliding_window axis) writes its grid to the
same path. Judging the older record against that file would judge cases it never ran, and its verdicts would
change silently (issue 46's re-sweep changed 15 records' verdicts so).

So the grid a run replaces is kept by its digest, beside the path (`<folder>/superseded/<sha256>-<name>`: the
probe program's keep_or_copy and `kb probe campaign` do it before they overwrite a grid), and a judge reads a
recorded file through `verified`: the named path while it holds the record's digest, else the kept copy of that
digest; when neither holds it, GridSuperseded, and kbtool.probe.rejudge keeps the record's own verdicts (the judge
of its day, against the grid it ran) and says why ("grid superseded, not re-judged").
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from kbtool.errors import ProbeError

SUPERSEDED = "grid superseded, not re-judged"
"""How a record whose recorded grid is gone is reported (seed entries, `kb probe seed`)."""

STORE = "superseded"
"""The folder, beside a recorded grid, that holds the grids later runs replaced, by digest."""


class GridSuperseded(ProbeError):
    """Neither a recorded file nor a kept copy holds the bytes the evidence's run wrote (a later run of the release
    replaced it, and no copy was kept): the record cannot be judged again, and its own verdicts stand."""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kept_copy(path: Path, sha256: str) -> Path:
    """Where the grid of digest `sha256` that once stood at `path` is kept after a later run replaced it."""
    return path.parent / STORE / f"{sha256}-{path.name}"


def _holds(path: Path, sha256: str) -> bool:
    try:
        return path.is_file() and digest(path) == sha256
    except OSError:
        return False


def verified(path: Path, sha256: object, named: str | None = None) -> Path:
    """The file holding what the case's run wrote: `path` while its sha256 is the recorded one, else the kept copy
    of that digest; GridSuperseded when neither holds it. A case that names no digest (observations built in a
    test; every recorded run of the probes that keep grids names one) is read as it is. `named`: the path as the
    record gives it, for the message."""
    if not sha256:
        return path
    want = str(sha256)
    if _holds(path, want):
        return path
    kept = kept_copy(path, want)
    if _holds(kept, want):
        return kept
    raise GridSuperseded(
        f"{named or path}: not the grid this record's run wrote (sha256 {want[:12]}; a later run of the release "
        f"replaced it and no copy is kept under {STORE}/): {SUPERSEDED}",
        fix="the record keeps its own verdicts; a copy of its grid at "
            f"{kept_copy(Path(named or path), want)} lets it be judged again")


def resolved(path: Path, sha256: object) -> Path:
    """The file `verified` reads, or `path` where it would refuse (what a judge names as its input)."""
    try:
        return verified(path, sha256)
    except GridSuperseded:
        return path


def keep_superseded(dest: Path) -> Path | None:
    """Before a recorded grid at `dest` is replaced by other bytes: a copy of it under its digest (kept_copy), so
    the evidence of the run that wrote it still reads it. The copy's path, or None when there was no file."""
    if not dest.is_file():
        return None
    kept = kept_copy(dest, digest(dest))
    if not _holds(kept, kept.name.split("-", 1)[0]):
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(kept.name + ".part")
        shutil.copyfile(dest, tmp)
        tmp.replace(kept)
    return kept
