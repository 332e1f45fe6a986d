"""`kb probe run` / `kb probe apply` end to end on the CPU (synthetic probes, a copy of real claims)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kbtool.errors import UsageError
from kbtool.model import Evidence
from kbtool.probe import commands
from kbtool.probe.spec import load_probe
from kbtool.store.writer import splice_verification

HERE = Path(__file__).parent
REAL = Path(__file__).resolve().parents[2] / "records" / "claims"
GPU_ENV = {"gpu": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "memory_bytes": 150754820096,
           "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0+cu130", "python": "3.12.3",
           "libraries": {"cudnn": "92300"}, "accelerator": "nvidia-h200-sxm", "architecture": "sm90"}
CLAIMS = ["torch-sdpa-flash-head-dim", "fa2-head-dim-max-256"]


@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "records"
    (root / "claims").mkdir(parents=True)
    for c in CLAIMS:  # real claim files, with their verification reset to what a first probe run finds
        text = splice_verification((REAL / f"{c}.yaml").read_text(), {"status": "unverified"})
        (root / "claims" / f"{c}.yaml").write_text(text)
    probes = [load_probe(str(HERE / "fixtures" / f)) for f in ("cpu_probe.py", "missing_probe.py")]
    monkeypatch.setattr(commands, "discover", lambda: probes)
    return root


def test_without_a_gpu_nothing_runs(records: Path) -> None:
    before = {p: p.read_bytes() for p in records.rglob("*.yaml")}
    report = commands.run(records=records, write=True, env={"gpu": None, "reason": "no driver", "libraries": {}})
    assert not report.gpu and report.runs == [] and report.written == []
    assert {p: p.read_bytes() for p in records.rglob("*.yaml")} == before


def test_fit_says_why() -> None:
    probe = load_probe(str(HERE / "fixtures" / "missing_probe.py"))
    assert commands.fit(probe, GPU_ENV).why == "not installed: no-such-kernel-lib"
    assert commands.fit(probe, {"gpu": None}).why == "no CUDA GPU"


def test_select() -> None:
    probes = [load_probe(str(HERE / "fixtures" / "cpu_probe.py"))]
    assert commands.select(probes, None, "torch-sdpa-flash-head-dim") == probes
    assert commands.select(probes, None, None, exclude=["cpu-gate"]) == []
    with pytest.raises(UsageError):
        commands.select(probes, "nope", None)
    with pytest.raises(UsageError):
        commands.select(probes, None, "no-such-claim")


def test_run_write_then_apply_elsewhere(records: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(records, elsewhere)
    out = tmp_path / "out"
    text_before = (records / "claims" / "torch-sdpa-flash-head-dim.yaml").read_text()

    report = commands.run(records=records, write=True, out=out, env=GPU_ENV)
    [ran, skipped] = report.runs
    assert ran.status == "ran" and [r.outcome for r in ran.results] == ["OK", "OK", "OK", "UNSUPPORTED"]
    assert skipped.status == "skipped"
    ev_files = sorted(out.glob("*.yaml"))
    assert [p.name for p in ev_files] == [f"{report.runs[0].evidence.id}.yaml"]
    ev = Evidence.model_validate(yaml.safe_load(ev_files[0].read_text()))
    assert ev.id.endswith("-nvidia-h200-sxm-cpu-gate") and ev.verdicts[0].verdict == "confirmed"
    assert ev.environment.architecture == "sm90" and ev.cases[3].message.startswith("RuntimeError: No available")

    got = {u.claim: u.new_status for u in report.updates}
    assert got == {"torch-sdpa-flash-head-dim": "verified", "fa2-head-dim-max-256": "untestable"}
    claim = yaml.safe_load((records / "claims" / "torch-sdpa-flash-head-dim.yaml").read_text())
    assert claim["verification"]["status"] == "verified" and claim["verification"]["evidence"] == [ev.id]
    text_after = (records / "claims" / "torch-sdpa-flash-head-dim.yaml").read_text()
    assert text_after.split("verification:")[0] == text_before.split("verification:")[0]
    untestable = yaml.safe_load((records / "claims" / "fa2-head-dim-max-256.yaml").read_text())["verification"]
    assert untestable["status"] == "untestable" and "no-such-kernel-lib not installed" in untestable["reason"]

    # the same evidence folder applied to another copy of the claims gives the same files, and imports the
    # evidence record the claims cite
    updates, _, written = commands.apply(elsewhere, [out], write=True)
    assert {u.claim: u.new_status for u in updates} == got and len(written) == 3
    assert (elsewhere / "evidence" / ev_files[0].name).read_text() == ev_files[0].read_text()
    for c in CLAIMS:
        assert (elsewhere / "claims" / f"{c}.yaml").read_text() == (records / "claims" / f"{c}.yaml").read_text()

    # a second apply changes nothing
    _again, _, written = commands.apply(elsewhere, [out], write=True)
    assert written == []


def test_apply_never_cites_another_runs_record_under_the_same_id(records: Path, tmp_path: Path) -> None:
    """Evidence from a host whose id is already taken here by a different run is imported under id-2, and the
    claims cite that; applying the same folder again imports nothing more."""
    out, earlier = tmp_path / "out", tmp_path / "earlier"
    first = commands.run(records=records, out=earlier, env=GPU_ENV).runs[0].evidence
    second = commands.run(records=records, out=out, env={**GPU_ENV, "driver": "999.0"}).runs[0].evidence
    assert first is not None and second is not None and first.id == second.id and first != second
    (records / "evidence").mkdir()
    shutil.copy(earlier / f"{first.id}.yaml", records / "evidence")  # another run's record holds the id
    _, _, written = commands.apply(records, [out], write=True)
    imported = records / "evidence" / f"{first.id}-2.yaml"
    assert imported in written and (records / "evidence" / f"{first.id}.yaml").read_text() == \
        (earlier / f"{first.id}.yaml").read_text()  # the earlier record is untouched
    cited = yaml.safe_load((records / "claims" / "torch-sdpa-flash-head-dim.yaml").read_text())["verification"]
    assert f"{first.id}-2" in cited["evidence"]
    assert yaml.safe_load(imported.read_text())["environment"]["driver"] == "999.0"
    _, _, again = commands.apply(records, [out], write=True)
    assert again == [] and sorted(p.name for p in (records / "evidence").iterdir()) == \
        [f"{first.id}-2.yaml", f"{first.id}.yaml"]


def test_a_second_run_the_same_day_gets_a_new_evidence_id(records: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = commands.run(records=records, out=out, env=GPU_ENV).runs[0].evidence
    second = commands.run(records=records, out=out, env=GPU_ENV).runs[0].evidence
    assert first is not None and second is not None and second.id == f"{first.id}-2"


def test_apply_refuses_to_write_from_a_tree_with_a_broken_claim(records: Path, tmp_path: Path) -> None:
    """A claim file that does not load would leave the judge a partial tree: nothing is written, the file is named."""
    out = tmp_path / "out"
    commands.run(records=records, out=out, env=GPU_ENV)
    (records / "claims" / "broken.yaml").write_text("id: broken\nwhen:\n  all:\n  - {var: a, eq: 1}\n  var: b\n")
    before = {p: p.read_bytes() for p in (records / "claims").glob("*.yaml")}
    with pytest.raises(UsageError, match=r"broken\.yaml"):
        commands.apply(records, [out], write=True)
    assert {p: p.read_bytes() for p in (records / "claims").glob("*.yaml")} == before
    updates, _, written = commands.apply(records, [out], write=False)  # a dry run still reports
    assert written == [] and updates


def test_apply_lists_changes_first_and_unchanged_only_on_request(records: Path, tmp_path: Path) -> None:
    """Issue 46: `kb probe apply` printed a 2,569-line table in which its 10 changes were hard to find."""
    from typer.testing import CliRunner

    from kbtool.cli import app

    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(records, elsewhere)
    out = tmp_path / "out"
    commands.run(records=records, write=False, out=out, env=GPU_ENV)
    updates, _, _ = commands.apply(elsewhere, [out], write=False)
    assert {u.claim: u.changes for u in updates} == {"torch-sdpa-flash-head-dim": True, "fa2-head-dim-max-256": True}
    res = CliRunner().invoke(app, ["probe", "apply", str(out), "--write", "--kb", str(elsewhere)])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == "2 change(s)" and "torch-sdpa-flash" in res.output
    again = CliRunner().invoke(app, ["probe", "apply", str(out), "--kb", str(elsewhere)])
    assert again.exit_code == 0 and again.output.splitlines()[0].startswith("No changes")
    assert "1 claim(s) unchanged, 1 skipped (--unchanged lists them)." in again.output
    assert "torch-sdpa-flash" not in again.output
    listed = CliRunner().invoke(app, ["probe", "apply", str(out), "--unchanged", "--kb", str(elsewhere)])
    assert "unchanged" in listed.output and "torch-sdpa-flash" in listed.output
