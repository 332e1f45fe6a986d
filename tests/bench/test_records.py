from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kbtool.bench import records
from kbtool.bench.commands import transfer_report, winners_report
from kbtool.errors import NotFoundError, ProbeError
from kbtool.kb import KB
from kbtool.measure.rank import rank
from kbtool.measure.table import cases
from kbtool.store.records import load_tree
from tests.bench import helpers as h
from tests.util import run_kb

H100_ROWS = [
    (h.decode(1, 512), "flashinfer-decode", [78.0, 78.5, 77.9]),
    (h.decode(1, 512), "sdpa-flash", [102.0, 101.0, 103.0]),
    (h.decode(1, 16384), "flashinfer-decode", [860.0, 858.0, 861.0]),
    (h.decode(1, 16384), "sdpa-flash", [104.0, 103.5, 104.2]),
    (h.prefill(4, 256), "sdpa-cudnn", [36.0, 36.3, 36.1]),
    (h.prefill(4, 256), "fa4", [84.0, 84.2, 83.9]),
]
H200_ROWS = [
    (h.decode(1, 512), "flashinfer-decode", [70.0, 70.2, 70.1]),
    (h.decode(1, 512), "sdpa-flash", [71.0, 70.5, 71.3]),
    (h.decode(1, 16384), "flashinfer-decode", [700.0, 702.0, 699.0]),
    (h.decode(1, 16384), "sdpa-flash", [90.0, 90.5, 89.9]),
    (h.prefill(4, 256), "sdpa-cudnn", "UNSUPPORTED"),
    (h.prefill(4, 256), "fa4", [60.0, 60.1, 59.8]),
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return h.tree(tmp_path, [h.result("nvidia-h100-sxm", H100_ROWS), h.result("nvidia-h200-sxm", H200_ROWS)])


def test_one_record_per_run_with_the_environment_once(root: Path) -> None:
    loaded = load_tree(root)
    assert [f.text() for f in loaded.findings] == []
    ms = {r.id: r for r in loaded.records if r.kind == "measurement"}
    assert sorted(ms) == ["2026-12-01-nvidia-h100-sxm-bench-test", "2026-12-01-nvidia-h200-sxm-bench-test"]
    run = ms["2026-12-01-nvidia-h200-sxm-bench-test"]
    assert len(run.rows) == 6 and run.accelerator == "nvidia-h200-sxm" and run.basis == "measured"
    assert run.environment is not None and run.environment.gpu == "NVIDIA H200"
    assert run.metrics == {"grid": "test", "copy_bandwidth_gbs": 4000.0} and run.started == "2026-12-01T10:00:00Z"
    # the environment, grid and copy bandwidth are said once, on the record, not on every row
    assert all(r.accelerator is None and "grid" not in r.metrics and "copy_bandwidth_gbs" not in r.metrics
               for r in run.rows)
    text = (root / "measurements" / f"{run.id}.yaml").read_text()
    assert text.count("compute_capability:") == 1 and text.count("copy_bandwidth_gbs:") == 1
    by = {c.id: c for c in cases(run)}
    rec = by[f"{run.id}#decode-b1-kv16384-h32-hkv8-d128-bf16-eager-sdpa-flash"]
    assert rec.value == 90.0 and rec.unit == "us" and rec.samples == [90.0, 90.5, 89.9]
    assert rec.kernel == "torch-sdpa-flash" and rec.accelerator == "nvidia-h200-sxm" and rec.record == run.id
    # byte model: 2*1*8*16384*128*2 bytes in 90 us, as a fraction of the 4000 GB/s copy bandwidth
    assert rec.metrics["bandwidth_gbs"] == pytest.approx(67.108864e6 / 90e-6 / 1e9, abs=0.1)
    assert rec.metrics["bandwidth_fraction"] == pytest.approx(rec.metrics["bandwidth_gbs"] / 4000, abs=1e-3)
    assert rec.metrics["copy_bandwidth_gbs"] == 4000.0  # the run's value, filled in for readers
    refused = next(c for c in by.values() if c.outcome == "UNSUPPORTED")
    assert refused.value == "UNSUPPORTED" and refused.unit == "class" and refused.message
    assert next(r for r in run.rows if r.outcome == "UNSUPPORTED").quantity == "outcome"


def test_files_validate_with_kb_validate(root: Path) -> None:
    res = run_kb("validate", "--kb", str(root))
    assert res.code == 0, res.out


def test_winners_report(root: Path) -> None:
    kb = KB.from_load(load_tree(root))
    rep = winners_report(kb, "h200")
    dec = rep["gpus"][0]["phases"]["decode"]
    by = {r["config"]: r for r in dec["results"]}
    assert by["decode-b1-kv16384-h32-hkv8-d128-bf16-eager"]["winner"] == "sdpa-flash"
    assert by["decode-b1-kv512-h32-hkv8-d128-bf16-eager"]["verdict"] == "no-clear-winner"
    assert dec["share"] == 0.5
    assert rep["gpus"][0]["phases"]["prefill"]["results"][0]["verdict"] == "single"
    with pytest.raises(NotFoundError):
        winners_report(kb, "b200")


def test_transfer_report_counts_cant_run_picks(root: Path) -> None:
    kb = KB.from_load(load_tree(root))
    rep = transfer_report(kb, "h100", "h200")
    dec, pre = rep["phases"]["decode"], rep["phases"]["prefill"]
    assert dec["winner_changes_all"] == 0 and dec["compared_all"] == 2
    assert dec["cost_median"] == 1.0
    assert pre["cannot_run"] == [{"config": "prefill-b4-n256-h16-hkv16-d128-bf16-full", "pick": "sdpa-cudnn"}]
    assert pre["costs"] == []


def test_rank_for_the_solver(root: Path) -> None:
    kb = KB.from_load(load_tree(root))
    r = rank(kb, "h200", {"phase": "decode", "batch": 1, "ctx": 16384, "head_dim": 128})
    assert r is not None
    assert r["verdict"] == "separated" and r["winner"] == "sdpa-flash" and r["exact"]
    assert [x["kernel"] for x in r["ranking"]] == ["torch-sdpa-flash", "flashinfer-fa2"]
    assert all(m.startswith("2026-12-01-nvidia-h200-sxm-bench-test#decode-b1-kv16384-") for m in r["measurements"])
    near = rank(kb, "h200", {"phase": "decode", "batch": 1, "ctx": 12000})
    assert near is not None and near["nearest"] == {"length": 16384} and not near["exact"]
    # restricting to kernels that passed the gates
    only = rank(kb, "h200", {"phase": "decode", "batch": 1, "ctx": 512}, kernels=["flashinfer-fa2"])
    assert only is not None and only["verdict"] == "single" and only["winner"] is None
    assert rank(kb, "h200", {"phase": "decode", "head_dim": 64}) is None
    pre = rank(kb, "h200", {"phase": "prefill", "batch": 4, "ctx": 256})
    assert pre is not None and pre["cannot_run"][0]["outcome"] == "UNSUPPORTED"


def test_rank_module_is_pure_python() -> None:
    code = "import sys, kbtool.measure.rank; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_cli_winners_and_transfer(root: Path) -> None:
    res = run_kb("bench", "winners", "--gpu", "h200", "--kb", str(root))
    assert res.code == 0, res.err
    assert "nvidia-h200-sxm decode: 1 of 2 configurations with >= 2 backends have a clear winner (50.0%)" in res.out
    res = run_kb("bench", "transfer", "--from", "h100", "--to", "h200", "--kb", str(root))
    assert res.code == 0, res.err
    assert "source pick cannot run on target: 1" in res.out
    res = run_kb("bench", "transfer", "--from", "h100", "--to", "b200", "--kb", str(root))
    assert res.code == 2 and "no bench measurements for nvidia-b200" in res.err


def test_same_day_rerun_replaces_the_file(tmp_path: Path) -> None:
    res = h.result("nvidia-h200-sxm", H200_ROWS[:1])
    folder = tmp_path / "m"
    first = records.write(records.build(res), folder)
    res.attempts[0].samples = [1.0, 1.0, 1.0]
    assert records.write(records.build(res), folder) == first
    assert [p.name for p in folder.glob("*.yaml")] == [first.name]
    assert "value: 1.0" in first.read_text()


def test_attempts_the_budget_never_reached_get_no_row() -> None:
    res = h.result("nvidia-h200-sxm", H200_ROWS[:2])
    res.attempts[1].outcomes = []  # the time budget ran out before this attempt started
    res.attempts[1].samples = []
    rec = records.build(res)
    assert [r.conditions["backend"] for r in rec.rows] == ["flashinfer-decode"]
    assert res.attempts[1].outcome == "NOT_RUN"
    res.attempts[0].outcomes = []
    with pytest.raises(ProbeError, match="nothing to record"):
        records.build(res)


def test_a_row_takes_the_record_values_it_leaves_out() -> None:
    from kbtool.model import Measurement

    m = Measurement.model_validate({
        "id": "t", "kind": "measurement", "name": "t", "accelerator": "nvidia-h200-sxm", "phase": "decode",
        "conditions": {"dtype": "bf16", "batch": 1}, "metrics": {"grid": "g"},
        "rows": [{"quantity": "latency", "value": 1.0, "unit": "us", "conditions": {"batch": 4}},
                 {"quantity": "latency", "value": 2, "unit": "ms", "accelerator": "x", "metrics": {"grid": "h"}}],
        "sources": [{"type": "seed", "seed": "000_b54199f3c91f5781.txt"}]})
    a, b = m.cells()
    assert (a.accelerator, a.phase, a.conditions, a.metrics) == (
        "nvidia-h200-sxm", "decode", {"dtype": "bf16", "batch": 4}, {"grid": "g"})
    assert (b.unit, b.accelerator, b.conditions["batch"], b.metrics) == ("ms", "x", 1, {"grid": "h"})
    assert m.rows[0].accelerator is None  # the record's rows are left as written
    assert m.refs() == [("measured_on", "nvidia-h200-sxm"), ("measured_on", "x")]


def test_a_row_without_a_unit_does_not_validate() -> None:
    from pydantic import ValidationError

    from kbtool.model import Measurement

    with pytest.raises(ValidationError, match=r"rows\.0\.unit"):
        Measurement.model_validate({"id": "t", "kind": "measurement", "name": "t",
                                    "rows": [{"quantity": "q", "value": 1}],
                                    "sources": [{"type": "seed", "seed": "000_b54199f3c91f5781.txt"}]})


def test_a_dangling_kernel_in_a_row_is_located(root: Path) -> None:
    path = root / "measurements" / "2026-12-01-nvidia-h200-sxm-bench-test.yaml"
    text = path.read_text()
    path.write_text(text.replace("kernel: flashinfer-fa2", "kernel: flashinfer-fa9", 1))
    res = run_kb("validate", "--kb", str(root))
    assert res.code == 1
    assert "$.rows[0].kernel: 'flashinfer-fa9' is not a known record" in res.out, res.out


def test_shipped_measurements_are_one_record_per_run_and_table() -> None:
    from kbtool.model import Measurement
    from tests.util import RECORDS

    loaded = load_tree(RECORDS)
    ms = [r for r in loaded.records if isinstance(r, Measurement)]
    runs = [m for m in ms if cases(m)]
    assert runs and all(m.environment is not None and len(m.rows) > 1 for m in runs)
    # one bench record per (date, GPU, grid): no two runs share all three
    assert len({(m.id[:10], m.accelerator, m.metrics.get("grid")) for m in runs}) == len(runs)
    # the seed-000 tables: one record per section they were read from
    seed = [m for m in ms if m.id.startswith("seed-000-")]
    sections = [tuple(s.section for s in m.sources) for m in seed]
    assert len(set(sections)) == len(seed) and all(len(m.rows) >= 1 for m in seed)
    # images stay out of records/, and every plot a record lists exists
    assert not [p for p in RECORDS.rglob("*") if p.suffix.lower() in (".png", ".svg", ".jpg")]
    for m in ms:
        for a in m.artifacts:
            assert (RECORDS.parent / a).is_file(), f"{m.id}: {a} is missing"


def test_run_command_writes_one_record_and_its_plots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`kb bench run` end to end with the GPU part replaced by a made-up run: one record, plots in docs/figures/."""
    pytest.importorskip("matplotlib")
    from kbtool.bench import commands, runner

    root = h.tree(tmp_path, [])
    monkeypatch.setattr(runner, "run_bench", lambda *a, **k: h.result("nvidia-h200-sxm", H200_ROWS))
    summary = commands.run_command(quick=True, out=None, records_root=root)
    rec_path = root / "measurements" / "2026-12-01-nvidia-h200-sxm-bench-test.yaml"
    assert summary["record"] == str(rec_path) and summary["cases"] == 6
    assert [p.name for p in (root / "measurements").iterdir()] == [rec_path.name]  # no PNG beside the record
    (run,) = [r for r in load_tree(root).records if r.kind == "measurement"]
    assert run.artifacts and all(a.startswith("docs/figures/2026-12-01-nvidia-h200-sxm-bench-test-")
                                 for a in run.artifacts)
    for a in run.artifacts:
        assert (tmp_path / a).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert run_kb("validate", "--kb", str(root)).code == 0
