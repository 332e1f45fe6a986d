"""Measured hardware values become measurement records (basis measured) that cite their evidence."""

from __future__ import annotations

import shutil
from pathlib import Path

from kbtool.probe import measured
from kbtool.probe.evidence import load
from tests.util import RECORDS, run_kb

(HW,) = sorted((RECORDS / "evidence").glob("*-hardware.yaml"))[:1]


def test_records_from_hardware_evidence() -> None:
    recs = {m.quantity: m for m in measured.records_from(load(HW))}
    assert {"sm_count", "memory", "l2"} <= set(recs)
    assert "fp8_tensor_core_matmul" not in recs  # a yes/no observation is not a measurement
    for m in recs.values():
        assert m.basis == "measured" and m.evidence == HW.stem and m.accelerator
        assert m.sources[0].ref == f"evidence/{HW.stem}"


def test_apply_writes_them_once_and_they_validate(tmp_path: Path) -> None:
    root = tmp_path / "records"
    shutil.copytree(RECORDS, root)
    for p in (root / "measurements").glob(f"{HW.stem}-*.yaml"):
        p.unlink()
    first = run_kb("probe", "apply", str(HW), "--write", "--kb", str(root))
    assert first.code == 0, first.err
    made = sorted((root / "measurements").glob(f"{HW.stem}-*.yaml"))
    assert len(made) >= 3 and "measurement record(s) written" in first.out
    before = {p: p.read_bytes() for p in made}
    assert run_kb("probe", "apply", str(HW), "--write", "--kb", str(root)).code == 0
    assert {p: p.read_bytes() for p in made} == before
    v = run_kb("validate", "--kb", str(root), "--strict", *map(str, made))
    assert v.code == 0, v.out
