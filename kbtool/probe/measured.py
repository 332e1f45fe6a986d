"""Measurement records from a probe run's measured values (`data.measured`: the hardware probe's, a boot's pool).

A run's numeric values become one `measurement` record with basis `measured`, pointing at its evidence record,
one row per value saying whether it agrees with the value the KB records. Written by `kb probe run --write` /
`kb probe apply --write` only, never rewritten (a later run makes new records).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbtool.fmt.core import canonical
from kbtool.model import Evidence, Measurement, Source
from kbtool.model.measurement import Row
from kbtool.probe.rejudge import observations
from kbtool.store.writer import atomic_write, dump, file_lock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from kbtool.probe.spec import Judge


def records_from(ev: Evidence, probe: Judge | None = None) -> list[Measurement]:
    """The probe run's measured values as one record (none when the run measured no number). A run recorded before
    its probe measured anything is read again by the probe's own `summarize`, where the probe is given; a run's
    row of one case gains the conditions the probe names now and the run did not write (vllm-boot's
    `prefix_caching`, named after some boots ran), its values as the run wrote them."""
    measured: Any = ev.data.get("measured")
    if probe is not None and probe.summarize is not None:
        env = ev.environment.model_dump(mode="json")
        fresh = probe.summarize(observations(ev), env).get("measured")
        measured = fresh if measured is None else _with_conditions(measured, fresh)
    if isinstance(measured, dict):  # {quantity: {value, unit, condition: ...}}
        measured = [{"quantity": q, **m} for q, m in sorted(measured.items()) if isinstance(m, dict)]
    if not isinstance(measured, list):
        return []
    rows = []
    for m in measured:
        value = m.get("value")
        if not isinstance(m, dict) or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        conditions = {k: v for k, v in m.items()
                      if k not in ("quantity", "value", "unit", "basis", "metrics") and v is not None}
        rows.append(Row(quantity=str(m["quantity"]), value=value, unit=str(m.get("unit") or "1"),
                        conditions=conditions, metrics=dict(m.get("metrics") or {})))
    if not rows:
        return []
    return [Measurement(
        id=f"{ev.id}-measured",
        kind="measurement",
        name=f"values measured by probe {ev.probe.id} v{ev.probe.version} on {ev.environment.gpu}",
        basis="measured",
        accelerator=ev.environment.accelerator,
        conditions={"probe": f"{ev.probe.id} v{ev.probe.version}"},
        evidence=ev.id,
        rows=rows,
        sources=[Source(type="probe", ref=f"evidence/{ev.id}")],
    )]


def _with_conditions(stored: Any, fresh: Any) -> Any:
    """`stored` rows (a list of dicts), each row of a case given the keys its `fresh` row of the same case and
    quantity has and it lacks; anything else as stored."""
    if not isinstance(stored, list) or not isinstance(fresh, list):
        return stored
    by_case = {(f.get("case"), f.get("quantity")): f for f in fresh if isinstance(f, dict) and f.get("case")}
    out = []
    for row in stored:
        f = by_case.get((row.get("case"), row.get("quantity"))) if isinstance(row, dict) else None
        out.append(row if f is None else {**row, **{k: v for k, v in f.items() if k not in row}})
    return out


def planned(records: Path, evidence: list[Evidence],
            probes: Mapping[str, Judge] | None = None) -> list[tuple[Path, str]]:
    """The measurement records that do not exist yet, as (path, text): everything computed, nothing written (`kb
    probe apply` plans them before it writes a claim, so a probe that fails here leaves the tree as it was)."""
    out = []
    for ev in evidence:
        for m in records_from(ev, (probes or {}).get(ev.probe.id)):
            path = records / "measurements" / f"{m.id}.yaml"
            if path.exists():
                continue
            data: dict[str, Any] = m.model_dump(mode="json", by_alias=True, exclude_defaults=True)
            out.append((path, canonical(dump({"id": data.pop("id"), "kind": "measurement", **data}), path)))
    return out


def write_planned(plans: list[tuple[Path, str]]) -> list[Path]:
    """Write planned measurement records (one that appeared meanwhile is left as it is); returns the new paths."""
    written = []
    for path, text in plans:
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(path):
            atomic_write(path, text, exclusive=True)
        written.append(path)
    return written


def write(records: Path, evidence: list[Evidence], probes: Mapping[str, Judge] | None = None) -> list[Path]:
    """Write the measurement records that do not exist yet; returns the new paths."""
    return write_planned(planned(records, evidence, probes))
