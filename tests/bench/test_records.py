from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kbtool.bench import records
from kbtool.bench.commands import transfer_report, winners_report
from kbtool.errors import NotFoundError
from kbtool.kb import KB
from kbtool.measure.rank import rank
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


def test_records_validate_and_carry_the_fingerprint(root: Path) -> None:
    loaded = load_tree(root)
    assert [f.text() for f in loaded.findings] == []
    ms = [r for r in loaded.records if r.kind == "measurement"]
    assert len(ms) == 12
    rec = next(m for m in ms if m.id == "2026-12-01-nvidia-h200-sxm-bench-decode-b1-kv16384-h32-hkv8-d128-bf16-eager"
               "-sdpa-flash")
    assert rec.value == 90.0 and rec.unit == "us" and rec.samples == [90.0, 90.5, 89.9]
    assert rec.environment is not None and rec.environment.gpu == "NVIDIA H200"
    assert rec.kernel == "torch-sdpa-flash" and rec.accelerator == "nvidia-h200-sxm"
    # byte model: 2*1*8*16384*128*2 bytes in 90 us, as a fraction of the 4000 GB/s copy bandwidth
    assert rec.metrics["bandwidth_gbs"] == pytest.approx(67.108864e6 / 90e-6 / 1e9, abs=0.1)
    assert rec.metrics["bandwidth_fraction"] == pytest.approx(rec.metrics["bandwidth_gbs"] / 4000, abs=1e-3)
    refused = next(m for m in ms if m.outcome == "UNSUPPORTED")
    assert refused.quantity == "outcome" and refused.value == "UNSUPPORTED" and refused.message


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
    assert all(m.startswith("2026-12-01-nvidia-h200-sxm-bench-") for m in r["measurements"])
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


def test_same_day_rerun_replaces_files(tmp_path: Path) -> None:
    res = h.result("nvidia-h200-sxm", H200_ROWS[:1])
    folder = tmp_path / "m"
    first = records.write(res, folder)
    res.attempts[0].samples = [1.0, 1.0, 1.0]
    assert records.write(res, folder) == first
    assert len(list(folder.glob("*.yaml"))) == 1


def test_attempts_the_budget_never_reached_get_no_record(tmp_path: Path) -> None:
    res = h.result("nvidia-h200-sxm", H200_ROWS[:2])
    res.attempts[1].outcomes = []  # the time budget ran out before this attempt started
    res.attempts[1].samples = []
    paths = records.write(res, tmp_path / "m")
    assert [p.name for p in paths] == [p.name for p in records.write(h.result("nvidia-h200-sxm", H200_ROWS[:1]),
                                                                     tmp_path / "n")]
    assert res.attempts[1].outcome == "NOT_RUN"
