"""A probe run's measured hardware values become one measurement record (basis measured) citing its evidence."""

from __future__ import annotations

import shutil
from pathlib import Path

from kbtool.probe import measured
from kbtool.probe.evidence import load
from tests.util import RECORDS, run_kb

(HW,) = sorted((RECORDS / "evidence").glob("*-hardware.yaml"))[:1]


def test_records_from_hardware_evidence() -> None:
    (m,) = measured.records_from(load(HW))
    rows = {r.quantity: r for r in m.rows}
    assert {"sm_count", "memory", "l2"} <= set(rows)
    assert "fp8_tensor_core_matmul" not in rows  # a yes/no observation is not a measurement
    assert m.id == f"{HW.stem}-measured" and m.basis == "measured" and m.evidence == HW.stem and m.accelerator
    assert m.sources[0].ref == f"evidence/{HW.stem}" and m.conditions == {"probe": "hardware v1"}
    assert rows["sm_count"].value == 132 and "agrees" in rows["sm_count"].conditions


def test_apply_writes_it_once_and_it_validates(tmp_path: Path) -> None:
    root = tmp_path / "records"
    shutil.copytree(RECORDS, root)
    path = root / "measurements" / f"{HW.stem}-measured.yaml"
    shipped = path.read_bytes()  # the shipped record is what apply writes
    path.unlink()
    first = run_kb("probe", "apply", str(HW), "--write", "--kb", str(root))
    assert first.code == 0, first.err
    assert "1 measurement record(s) written" in first.out
    assert path.read_bytes() == shipped
    assert run_kb("probe", "apply", str(HW), "--write", "--kb", str(root)).code == 0
    assert path.read_bytes() == shipped
    v = run_kb("validate", "--kb", str(root), "--strict", str(path))
    assert v.code == 0, v.out
