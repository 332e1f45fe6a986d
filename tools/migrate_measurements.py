"""One-off: regroup records/measurements/ (one figure per file) into one record per run or seed table.

    python tools/migrate_measurements.py [records]     # from the repository root; re-runnable

Files already in the new shape (with `rows`) are left alone, so a tree that gained old-shape files later
(a branch that ran an older `kb probe run --write` or `kb bench run`) can be migrated again.

- bench records (`kb bench run`, one per attempt) -> one record per (date, GPU, grid), rows in id order;
- the hardware probe's measured values -> one record per evidence record, built by kbtool.probe.measured;
- seed-000 records -> one record per seed section (the table they were read from), rows in id order; what
  every row shares is said once on the record.
Every old figure is checked to be in the new records (value, unit, quantity, conditions, ...) before any file
is removed. PNGs move to docs/figures/ and the bench run's record lists its plots under `artifacts`.
Deleted after the migration commit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from kbtool.bench.records import record_id, text
from kbtool.measure.table import cases
from kbtool.model import Measurement
from kbtool.probe import measured
from kbtool.probe.evidence import load

SEED_TABLES = {  # seed section -> new record id
    "Experimental setup (GPU table)": "seed-000-gpu-table",
    "Experimental setup": "seed-000-experimental-setup",
    "Prefill (Figure 3 text)": "seed-000-prefill-figure-3",
    "Prefill (Figure 4 text)": "seed-000-prefill-figure-4",
    "Decode (Figure 5 and Figure 6 text)": "seed-000-decode-figures-5-6",
    "Summary figures and Main results": "seed-000-main-results",
    "Supplementary material: Dispatch checks": "seed-000-dispatch-checks",
    "Supplementary material: Run outcomes": "seed-000-run-outcomes",
    "Supplementary material: Figure 7 table (winner change per GPU pair)": "seed-000-winner-change-per-gpu-pair",
}
ROW_KEYS = ("quantity", "value", "unit", "accelerator", "kernel", "phase", "conditions", "samples", "outcome",
            "message", "metrics")
SHARED = ("accelerator", "kernel", "phase")
RUN_METRICS = ("grid", "copy_bandwidth_gbs")  # said once per bench run


def _one(values: list[Any], what: str) -> Any:
    distinct = {repr(v) for v in values}
    if len(distinct) != 1:
        raise SystemExit(f"{what}: not one value across the group: {sorted(distinct)}")
    return values[0]


def bench_run(old: list[dict[str, Any]], pngs: list[str]) -> dict[str, Any]:
    env = _one([o["environment"] for o in old], "environment")
    acc = _one([o.get("accelerator") for o in old], "accelerator")
    sources = _one([o["sources"] for o in old], "sources")
    run: dict[str, Any] = {"grid": _one([o["metrics"]["grid"] for o in old], "grid")}
    copy = [o["metrics"]["copy_bandwidth_gbs"] for o in old if "copy_bandwidth_gbs" in o["metrics"]]
    if copy:
        run["copy_bandwidth_gbs"] = _one(copy, "copy bandwidth")
    assert not any(o.get("notes") for o in old), "bench records carry no notes"
    date = old[0]["id"][:10]
    rid = record_id(date, env, run["grid"])
    rows = []
    for o in sorted(old, key=lambda o: o["id"]):
        r = {k: o[k] for k in ROW_KEYS if k in o and k != "accelerator"}
        r["metrics"] = {k: v for k, v in o["metrics"].items() if k not in RUN_METRICS}
        rows.append(r)
    return {"id": rid, "kind": "measurement", "name": f"kb bench {run['grid']} grid on {env['gpu']}",
            "basis": "measured", "accelerator": acc, "environment": env, "metrics": run, "rows": rows,
            "artifacts": pngs, "sources": sources}


def seed_table(section: str, old: list[dict[str, Any]]) -> dict[str, Any]:
    old = sorted(old, key=lambda o: o["id"])
    basis = _one([o["basis"] for o in old], f"{section}: basis")
    sources = _one([o["sources"] for o in old], f"{section}: sources")
    rec: dict[str, Any] = {"id": SEED_TABLES[section], "kind": "measurement", "name": f"Seed 000: {section}",
                           "basis": basis}
    for key in SHARED:  # a field every row has, with one value, is said once
        values = [o.get(key) for o in old]
        if all(v is not None for v in values) and len({repr(v) for v in values}) == 1:
            rec[key] = values[0]
    conds = [o.get("conditions") or {} for o in old]
    rec["conditions"] = {k: v for k, v in conds[0].items() if all(k in c and c[k] == v for c in conds)}
    notes = [o.get("notes") for o in old]
    common = Counter(n for n in notes if n).most_common(1)
    shared_note = common[0][0] if common and all(n and n.startswith(common[0][0]) for n in notes) else None
    rows = []
    for o in old:
        r: dict[str, Any] = {"label": o["name"]}
        r.update({k: o[k] for k in ROW_KEYS if k in o and k not in rec})
        r["conditions"] = {k: v for k, v in (o.get("conditions") or {}).items() if k not in rec["conditions"]}
        note = o.get("notes")
        if shared_note and note:
            note = note[len(shared_note):].strip() or None
        if note:
            r["notes"] = note
        rows.append(r)
    rec["rows"] = rows
    rec["sources"] = sources
    if shared_note:
        rec["notes"] = shared_note
    return rec


def _cell(c: Any) -> dict[str, Any]:
    out = {k: getattr(c, k) for k in ROW_KEYS}
    out["metrics"] = {k: v for k, v in out["metrics"].items() if k not in RUN_METRICS}
    return out


def _old_cell(o: dict[str, Any]) -> dict[str, Any]:
    out = {k: o.get(k) for k in ROW_KEYS}
    out["conditions"] = o.get("conditions") or {}
    out["samples"] = o.get("samples") or []
    out["metrics"] = {k: v for k, v in (o.get("metrics") or {}).items() if k not in RUN_METRICS}
    return out


def check_same(old: list[dict[str, Any]], new: Measurement, label: bool) -> None:
    """Every old figure is a cell of the new record, equal field by field; nothing else is."""
    cells = new.cells()
    assert len(cells) == len(old), (new.id, len(cells), len(old))
    want = sorted(json.dumps(_old_cell(o), sort_keys=True) for o in old)
    got = sorted(json.dumps(_cell(c), sort_keys=True) for c in cells)
    if want != got:
        for w, g in zip(want, got, strict=True):
            if w != g:
                raise SystemExit(f"{new.id}: figure differs\n old {w}\n new {g}")
    for o in old:  # what a bench run says once, each old record said the same
        for k in RUN_METRICS:
            if k in (o.get("metrics") or {}):
                assert new.metrics[k] == o["metrics"][k], (o["id"], k)
    if label:
        assert sorted(o["name"] for o in old) == sorted(c.label or "" for c in cells)
    for o in old:  # notes survive, as the record's or the row's (or both, joined)
        if o.get("notes"):
            c = next(c for c in cells if c.label == o["name"]) if label else None
            joined = " ".join(x for x in (new.notes, c.notes if c else None) if x)
            assert joined == o["notes"], (o["id"], joined, o["notes"])


def main(root: Path) -> None:
    y = YAML(typ="safe")
    folder = root / "measurements"
    loaded = {p: y.load(p.read_text()) for p in sorted(folder.glob("*.yaml"))}
    old = {p: d for p, d in loaded.items() if "rows" not in d}  # records already in the new shape stay
    bench: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    hardware: dict[str, list[dict[str, Any]]] = defaultdict(list)
    seed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in old.values():
        if d.get("outcome") and "backend" in (d.get("conditions") or {}):
            bench[(d["id"][:10], d["accelerator"], d["metrics"]["grid"])].append(d)
        elif d.get("evidence"):
            hardware[d["evidence"]].append(d)
        elif d["id"].startswith("seed-000-"):
            seed[_one([s.get("section") for s in d["sources"]], d["id"])].append(d)
        else:
            raise SystemExit(f"{d['id']}: which group?")
    docs = root.parent / "docs" / "figures"
    moves: list[tuple[Path, Path]] = [(png, docs / png.name) for png in sorted((root / "evidence").glob("*.png"))]
    new: list[tuple[Measurement, list[dict[str, Any]], bool]] = []
    for (date, acc, grid), group in sorted(bench.items()):
        rid = f"{date}-{acc}-bench-{grid}"
        pngs = []
        for png in sorted(folder.glob(f"{date}-{acc}-bench-*.png")):
            dest = docs / png.name.replace(f"{date}-{acc}-bench-", f"{rid}-")
            moves.append((png, dest))
            pngs.append(dest.relative_to(root.parent).as_posix())
        rec = Measurement.model_validate(bench_run(group, pngs))
        assert len(cases(rec)) == len(group)
        new.append((rec, group, False))
    for ev_id, group in sorted(hardware.items()):
        (rec,) = measured.records_from(load(root / "evidence" / f"{ev_id}.yaml"))
        for o in group:  # the old per-value records said the probe in conditions; the new record says it once
            assert o["conditions"].get("probe") == rec.conditions["probe"]
        new.append((rec, group, False))
    for section, group in sorted(seed.items()):
        new.append((Measurement.model_validate(seed_table(section, group)), group, True))
    for rec, group, label in new:
        check_same(group, rec, label)
    assert sum(len(g) for _, g, _ in new) == len(old)
    for p in old:
        subprocess.run(["git", "rm", "-q", str(p)], check=True)
    for rec, _, _ in new:
        path = folder / f"{rec.id}.yaml"
        path.write_text(text(rec, path))
    docs.mkdir(parents=True, exist_ok=True)
    for png, dest in moves:  # the bench plots, and the evidence plot no evidence record names
        subprocess.run(["git", "mv", str(png), str(dest)], check=True)
    print(f"{len(old)} measurement records -> {len(new)}: "
          + ", ".join(f"{r.id} ({len(r.rows)} rows)" for r, _, _ in new))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "records"))
