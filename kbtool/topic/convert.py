"""Convert between seed 001's record format (as YAML or JSON with its own field names) and topic records.

Import keeps every field: ids kb spells differently (`tmem_capacity` -> `tmem-capacity`, or an alias such
as `nvidia-gb200-nvl72` -> `nvidia-gb200`) are recorded in `id_map`, so export writes the source's spelling
back. The prose of `arithmetic_intensity` and `notes` is split into unlinked statements for an editor to
attach claims to.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from kbtool.errors import InvalidRecordError, UsageError, WriteError
from kbtool.kb import KB
from kbtool.model.common import ID_PATTERN, Basis, Source, Strict
from kbtool.model.topic import ParameterRow, StatedVerification, Statement, Topic, XrefGroup
from kbtool.store import roundtrip
from kbtool.topic.derive import Derived

FORMAT_KEYS = ("id", "area", "title", "verification", "updated", "class", "bound_by", "arithmetic_intensity",
               "scales_with", "hardware_parameters", "workarounds", "notes", "cross_references",
               "affected_by_hardware")
MAX_BYTES = 1 << 20
_ID = re.compile(ID_PATTERN)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\[(\"'])")


class FormatVerification(Strict):
    status: str = Field(description="e.g. verified")
    level: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)


class FormatRow(Strict):
    parameter: str
    effect: str
    basis: Basis = Basis.recorded
    values_for: list[str] = Field(default_factory=list)
    magnitude: str | None = None


class FormatGroup(Strict):
    group: str
    count: int | None = Field(default=None, ge=0)
    ids: list[str] = Field(default_factory=list)


class SeedTopic(Strict):
    """A topic in seed 001's format, with that format's field names."""

    id: str
    area: str | None = None
    title: str | None = None
    verification: FormatVerification | None = None
    updated: str | None = None
    class_: str | None = Field(default=None, alias="class")
    bound_by: str | None = None
    arithmetic_intensity: str | None = None
    scales_with: list[str] = Field(default_factory=list)
    hardware_parameters: list[FormatRow] = Field(default_factory=list)
    workarounds: list[str] = Field(default_factory=list)
    notes: str | None = None
    cross_references: list[FormatGroup] = Field(default_factory=list)
    affected_by_hardware: list[str] = Field(default_factory=list)


# ---- reading ------------------------------------------------------------------------------------


def read_format(path: Path) -> dict[str, Any]:
    """Read a YAML or JSON file in seed 001's format. Bad input raises InvalidRecordError, never a traceback."""
    if not path.is_file():
        raise UsageError(f"no such file: {path}", fix="give the path of a .yaml, .yml or .json file")
    if path.stat().st_size > MAX_BYTES:
        raise InvalidRecordError(f"{path}: larger than {MAX_BYTES} bytes", fix="split the file")
    if path.suffix.lower() == ".json":
        from kbtool.store.untrusted import UntrustedInputError, load_json

        try:
            data: Any = load_json(path)
        except UntrustedInputError as e:
            raise InvalidRecordError(str(e.args[0]), fix=e.fix) from None
    else:
        from kbtool.store.reader import read_document

        doc, problems = read_document(path, str(path))
        if doc is None:
            first = problems[0] if problems else None
            raise InvalidRecordError(first.text() if first else f"{path}: unreadable",
                                     fix=first.fix if first else None)
        data = doc.data
    if not isinstance(data, dict):
        raise InvalidRecordError(f"{path}: expected a mapping of the format's fields at the top level",
                                 fix=f"use the keys {', '.join(FORMAT_KEYS)}")
    return data


def parse_format(data: dict[str, Any], name: str = "<input>") -> SeedTopic:
    try:
        return SeedTopic.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "$"
        raise InvalidRecordError(f"{name}: {where}: {err['msg']} ({len(e.errors())} problem(s))",
                                 fix=f"the format's fields are {', '.join(FORMAT_KEYS)}") from None


# ---- import -------------------------------------------------------------------------------------


def kb_id(raw: str, kb: KB | None = None) -> str:
    """The kb spelling of an id from the source: an alias kb knows, else lowercase with '-' for '_'."""
    if kb is not None:
        hit = kb.aliases.get(raw.strip().lower())
        if hit:
            return hit
    out = raw.strip().lower().replace("_", "-").replace(" ", "-")
    if not _ID.match(out):
        raise InvalidRecordError(f"'{raw}' cannot be made a kb id", fix="use lowercase letters, digits and '-'")
    return out


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.replace("\n\n", " ")) if s.strip()]


def import_topic(data: dict[str, Any], *, source: Source, topic_id: str | None = None, kb: KB | None = None,
                 name: str = "<input>") -> Topic:
    """Turn a topic in seed 001's format into a topic record with unlinked statements."""
    fmt = parse_format(data, name)
    id_map: dict[str, str] = {}

    def conv(raw: str) -> str:
        new = kb_id(raw, kb)
        if new != raw:
            id_map[new] = raw
        return new

    rows = [ParameterRow(parameter=conv(r.parameter), effect=r.effect, basis=r.basis,
                         values_for=[conv(a) for a in r.values_for], magnitude=r.magnitude)
            for r in fmt.hardware_parameters]
    groups = [XrefGroup(group=g.group, count=g.count, ids=[conv(x) for x in g.ids]) for g in fmt.cross_references]
    statements = [Statement(text=s, origin=key)
                  for key in ("arithmetic_intensity", "notes") for s in sentences(getattr(fmt, key) or "")]
    stated = None
    if fmt.verification or fmt.updated:
        v = fmt.verification
        stated = StatedVerification(status=v.status if v else "unknown", level=v.level if v else None,
                                    confidence=v.confidence if v else None, updated=fmt.updated)
    rid = topic_id or kb_id(fmt.id.rsplit("/", 1)[-1])
    return Topic(
        id=rid, kind="topic", name=fmt.title or fmt.id, sources=[source], original_id=fmt.id, area=fmt.area,
        title=fmt.title, topic_class=fmt.class_, bound_by=fmt.bound_by,
        arithmetic_intensity=fmt.arithmetic_intensity, scales_with=list(fmt.scales_with),
        hardware_parameters=rows, workarounds=list(fmt.workarounds), notes=fmt.notes,
        affected_accelerators=[conv(a) for a in fmt.affected_by_hardware], cross_references=groups,
        statements=statements, stated=stated, id_map=id_map,
    )


# ---- export -------------------------------------------------------------------------------------


def export_topic(topic: Topic, derived: Derived | None = None) -> dict[str, Any]:
    """The topic in seed 001's format. With `derived`, the verification is kb's derived one."""
    back = topic.id_map

    def orig(x: str) -> str:
        return back.get(x, x)

    out: dict[str, Any] = {"id": topic.original_id or topic.id, "area": topic.area, "title": topic.title}
    if derived is not None:
        out["verification"] = {"status": derived.status, "level": derived.level, "confidence": derived.confidence}
    elif topic.stated is not None:
        s = topic.stated
        out["verification"] = {"status": s.status, "level": s.level, "confidence": s.confidence}
    out["updated"] = topic.stated.updated if topic.stated else None
    out.update({"class": topic.topic_class, "bound_by": topic.bound_by,
                "arithmetic_intensity": topic.arithmetic_intensity, "scales_with": list(topic.scales_with)})
    out["hardware_parameters"] = [
        {"parameter": orig(r.parameter), "effect": r.effect, "basis": str(r.basis),
         "values_for": [orig(a) for a in r.values_for], "magnitude": r.magnitude}
        for r in topic.hardware_parameters]
    out["workarounds"] = list(topic.workarounds)
    out["notes"] = topic.notes
    out["cross_references"] = [{"group": g.group, "count": g.count, "ids": [orig(x) for x in g.ids]}
                               for g in topic.cross_references]
    out["affected_by_hardware"] = [orig(a) for a in topic.affected_accelerators]
    pruned: dict[str, Any] = _prune(out)
    return pruned


def _prune(value: Any) -> Any:
    """Drop None values and empty lists/dicts, recursively (the format omits absent fields)."""
    if isinstance(value, dict):
        kept = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


# ---- text and files -----------------------------------------------------------------------------


def dump(data: Any, fmt: str = "yaml") -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110))


def record_data(topic: Topic) -> dict[str, Any]:
    data: dict[str, Any] = topic.model_dump(by_alias=True, exclude_defaults=True, mode="json")
    head: dict[str, Any] = {k: data.pop(k) for k in ("id", "kind", "name", "aliases") if k in data}
    tail: dict[str, Any] = {k: data.pop(k) for k in ("notes", "sources") if k in data}
    return {**head, **data, **tail}


def write_record(topic: Topic, records: Path, force: bool = False) -> Path:
    """Write records/topics/<id>.yaml atomically; refuse to overwrite unless `force`."""
    dest = records / "topics" / f"{topic.id}.yaml"
    if dest.exists() and not force:
        raise WriteError(f"{dest} exists", fix="pass --force to replace it, or --id to pick another id")
    from kbtool.fmt.core import canonical
    from kbtool.store.writer import atomic_write, file_lock

    text = roundtrip.dump(record_data(topic))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(dest):
        atomic_write(dest, canonical(text, dest, str(dest)))
    return dest
