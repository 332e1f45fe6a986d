"""A swept release's engine-release record, drafted from its own evidence and written (`kb probe sweep` does it for
every release whose probes completed; `kb probe release-record` does it alone).

The engine drafts (Engine.draft_release: for vLLM, kbtool/solve/engines/vllm/draft.py, which replays every recorded
point with the draft before it returns it); this module writes records/engine-releases/<id>.yaml in canonical form,
atomically, and reads it back through the record model. A record read by hand (its notes do not open with
drafts.DRAFT_MARK) is never overwritten: where it disagrees with the draft, `differs` says so. Neutral: the engine
is a parameter.
"""

from __future__ import annotations

from pathlib import Path

from kbtool.errors import KbError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.engines.drafts import ReleaseDraft


def values(rec: Any) -> dict[str, Any]:
    """Every value of an engine-release record by path (defaults.X, batch, extensible_margins, startup_checks,
    planning.X, accounting.X, evidence), sources and notes left out: what a draft is compared on."""
    out: dict[str, Any] = {"engine": rec.engine, "release": rec.release, "entry_point": rec.entry_point,
                           "evidence": list(rec.evidence)}
    for part in ("defaults", "planning", "accounting"):
        block = getattr(rec, part)
        if block is None:
            out[part] = None
            continue
        for name in type(block).model_fields:
            fact = getattr(block, name)
            if fact is not None:
                out[f"{part}.{name}"] = fact.value
    out["batch"] = [t.model_dump(exclude={"source"}) for t in rec.batch]
    m = rec.extensible_margins
    out["extensible_margins"] = None if m is None else m.model_dump(exclude={"source"})
    out["startup_checks"] = [c.model_dump(exclude={"source"}) for c in rec.startup_checks]
    return out


def existing(path: Path) -> str | None:
    """'draft' (a record the sweep wrote), 'read' (one read by hand) or None (no record at `path`)."""
    from kbtool.solve.engines.drafts import DRAFT_MARK

    if not path.exists():
        return None
    import yaml

    try:
        notes = str((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("notes") or "")
    except (OSError, yaml.YAMLError):
        return "read"
    return "draft" if notes.startswith(DRAFT_MARK) else "read"


def _model(data: dict[str, Any], where: str) -> Any:
    from pydantic import ValidationError

    from kbtool.model.engine_release import EngineRelease

    try:
        return EngineRelease.model_validate(data)
    except ValidationError as exc:
        raise KbError(f"{where}: the drafted engine-release record does not validate: {exc.errors()[0]['msg']} at "
                      f"{'.'.join(str(x) for x in exc.errors()[0]['loc'])}",
                      fix="please report this; nothing was written") from exc


def draft(records: Path, lib: str, release: str, *, root: Path | None = None, write: bool = False
          ) -> ReleaseDraft | None:
    """Draft `lib`'s engine-release record of `release` from the evidence under `records` and, with `write`, write
    it (unless a record read by hand is there). None: `lib` is no engine, or it drafts no records."""
    from kbtool.kb import load_kb
    from kbtool.probe.commands import REPO_ROOT
    from kbtool.solve.engines import registry
    from kbtool.solve.imagebuild import image_of

    if lib not in registry.ENGINES:
        return None
    kb, _ = load_kb(records)
    engine = registry.ENGINES[lib]
    got = engine.draft_release(kb, image_of(kb), records, root or REPO_ROOT, release)
    if got is None:
        return None
    got.label = engine.label
    if got.record is None:
        return got
    path = records / "engine-releases" / f"{got.record['id']}.yaml"
    got.path, got.existing = str(path), existing(path)
    drafted = _model(got.record, str(path))
    if got.existing == "read":
        rec = kb.get(got.record["id"])
        if rec is not None:
            mine, theirs = values(drafted), values(rec)
            got.differs = [f"{k}: recorded {theirs.get(k)!r}, the evidence gives {mine.get(k)!r}"
                           for k in sorted(set(mine) | set(theirs))
                           if k != "evidence" and not k.startswith("accounting")  # never drafted
                           and mine.get(k) != theirs.get(k)]
        return got
    if write:
        _write(path, got.record)
        got.written = True
    return got


def _write(path: Path, data: dict[str, Any]) -> None:
    from kbtool.fmt.core import canonical
    from kbtool.store.records import load_tree
    from kbtool.store.writer import atomic_write, dump, file_lock

    text = canonical(dump(data), path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path):
        atomic_write(path, text)
    back = load_tree(path.parent.parent, [path])
    bad = [f for f in back.findings if f.severity == "error"]
    if bad:
        raise UsageError(f"{bad[0].location()} {bad[0].path}: {bad[0].message}",
                         fix="please report this; run `kb validate` for every finding")
