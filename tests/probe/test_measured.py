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


BOOT = sorted((RECORDS / "evidence").glob("*-vllm-boot.yaml"))[-1]


def test_a_boot_run_recorded_before_it_measured_anything_is_read_by_its_probe() -> None:
    from kbtool.probe.rejudge import probes_by_id

    ev = load(BOOT)
    assert "measured" not in ev.data or ev.data["measured"]  # older runs have no data.measured
    (m,) = measured.records_from(ev.model_copy(update={"data": {}}), probes_by_id()["vllm-boot"])
    ok = [c for c in ev.cases if c.outcome == "OK"]
    assert len(m.rows) == len(ok) and all(r.quantity == "kv_cache_tokens" and r.unit == "tokens" for r in m.rows)
    by_case = {r.conditions["case"]: r for r in m.rows}
    for c in ok:
        r = by_case[c.params["id"]]
        assert r.value == c.metrics["kv_cache_tokens"] and r.metrics["max_concurrency"] == c.metrics["max_concurrency"]
        assert r.conditions["vllm"] == c.metrics["release"] and r.conditions["architecture"]
    # without the probe, a run with no data.measured measures nothing
    assert measured.records_from(ev.model_copy(update={"data": {}})) == []


def test_measured_values_may_be_a_list_of_rows_with_metrics() -> None:
    ev = load(HW).model_copy(update={"data": {"measured": [
        {"quantity": "kv_cache_tokens", "value": 10, "unit": "tokens", "case": "a", "metrics": {"x": 1}},
        {"quantity": "flag", "value": True}, {"quantity": "text", "value": "n/a"}]}})
    (m,) = measured.records_from(ev)
    (r,) = m.rows  # a yes/no or a text is not a figure
    assert (r.quantity, r.value, r.unit, r.conditions, r.metrics) == ("kv_cache_tokens", 10, "tokens", {"case": "a"},
                                                                       {"x": 1})


def test_apply_copies_evidence_in_printable_form(tmp_path: Path) -> None:
    """Issue 48: evidence with C1 controls in its notes was copied into records/evidence by `apply --write`, after
    which `kb validate` flagged the file kb itself wrote and `kb query` refused to answer. The evidence writer now
    takes control characters and terminal colour codes out of every string it writes (a CuTe DSL error arrives
    coloured), so what apply copies in validates; the rest of the text is kept."""
    root = tmp_path / "records"
    shutil.copytree(RECORDS, root)
    bad = tmp_path / "in" / f"{HW.stem}-x.yaml"
    bad.parent.mkdir()
    text = HW.read_text().replace(f"id: {HW.stem}\n", f"id: {HW.stem}-x\nnotes: \"ok \\x9b2J \\x9d0;title "
                                  f"\\e[91mred\\e[0m\"\n", 1)
    bad.write_text(text)
    r = run_kb("probe", "apply", str(bad.parent), "--write", "--kb", str(root))
    assert r.code == 0, r.out + r.err
    written = root / "evidence" / bad.name
    notes = load(written).notes
    assert notes == "ok 2J 0;title red", notes
    assert run_kb("validate", "--kb", str(root)).code == 0


def test_printable_drops_colour_codes_and_controls_only() -> None:
    from kbtool.probe.evidence import printable

    raw = {"m": ["CUDADialectError: \n\x1b[91m\x1b[1merror[CUDA_LAUNCH_INVALID_CONFIG]:\x1b[0m launch\tfailed\x07"]}
    assert printable(raw) == {"m": ["CUDADialectError: \nerror[CUDA_LAUNCH_INVALID_CONFIG]: launch\tfailed"]}


def test_a_condition_the_probe_names_later_is_added_to_a_runs_rows() -> None:
    """The boot that ran Qwen3.5-9B with --enable-prefix-caching (session 15) wrote its row before vllm-boot named
    `prefix_caching` as a condition: its measured record gains the key from the probe's own reading of the run,
    so a line without the flag (Mamba state mode "none" on 0.26.0) is not answered with that boot's numbers. The
    run's values stay as it wrote them, and a row of no case is left as it is."""
    from kbtool.probe.rejudge import probes_by_id

    ev = load(RECORDS / "evidence" / "2026-12-07-nvidia-h100-sxm-vllm-boot-15.yaml")
    stored = ev.data["measured"]
    case = "qwen3.5-9b-graphs-kvfp8-u90-c128k-lmonly-mns1"
    assert all("prefix_caching" not in r for r in stored)  # the run predates the condition
    (m,) = measured.records_from(ev, probes_by_id()["vllm-boot"])
    rows = {r.conditions["case"]: r for r in m.rows}
    assert rows[case].conditions["prefix_caching"] is True
    assert all("prefix_caching" not in r.conditions for c, r in rows.items() if c != case)
    assert {c: r.value for c, r in rows.items()} == {r["case"]: r["value"] for r in stored}
    plain = [{"quantity": "q", "value": 1}]
    assert measured._with_conditions(plain, [{"quantity": "q", "value": 2, "extra": 1}]) == plain
