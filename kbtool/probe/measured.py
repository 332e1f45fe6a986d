"""Measurement records from a probe run's measured values (the hardware probe's `data.measured`).

Each numeric value becomes one `measurement` record with basis `measured`, pointing at its evidence record and
saying whether it agrees with the value the KB records. Written by `kb probe run --write` / `kb probe apply
--write` only, never rewritten (a later run makes new records).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbtool.fmt.core import canonical
from kbtool.model import Evidence, Measurement, Source
from kbtool.store.writer import atomic_write, dump, file_lock


def records_from(ev: Evidence) -> list[Measurement]:
    measured = ev.data.get("measured")
    acc = ev.environment.accelerator
    if not isinstance(measured, dict):
        return []
    out = []
    for quantity, m in sorted(measured.items()):
        if not isinstance(m, dict) or isinstance(m.get("value"), bool):
            continue
        value = m.get("value")
        if not isinstance(value, int | float):
            continue
        conditions = {k: v for k, v in m.items() if k not in ("value", "unit", "basis") and v is not None}
        out.append(Measurement(
            id=f"{ev.id}-{quantity.replace('_', '-')}",
            kind="measurement",
            name=f"{quantity.replace('_', ' ')} measured on {ev.environment.gpu}",
            quantity=quantity,
            value=value,
            unit=str(m.get("unit") or "1"),
            basis="measured",
            accelerator=acc,
            conditions={"probe": f"{ev.probe.id} v{ev.probe.version}", **conditions},
            evidence=ev.id,
            sources=[Source(type="probe", ref=f"evidence/{ev.id}")],
        ))
    return out


def write(records: Path, evidence: list[Evidence]) -> list[Path]:
    """Write the measurement records that do not exist yet; returns the new paths."""
    written = []
    for ev in evidence:
        for m in records_from(ev):
            path = records / "measurements" / f"{m.id}.yaml"
            if path.exists():
                continue
            data: dict[str, Any] = m.model_dump(mode="json", by_alias=True, exclude_defaults=True)
            text = canonical(dump({"id": data.pop("id"), "kind": "measurement", **data}), path)
            path.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(path):
                atomic_write(path, text, exclusive=True)
            written.append(path)
    return written
