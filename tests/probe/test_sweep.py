"""`kb probe sweep` (kbtool/probe/sweep.py): which releases, which are skipped, and --new, without installing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbtool.errors import UsageError
from kbtool.probe import sweep
from tests.util import RECORDS

DOC = {"releases": {
    "0.19.0": [{"yanked": False}], "0.19.1": [{"yanked": False}], "0.20.0rc1": [{"yanked": False}],
    "0.20.0": [{"yanked": True}], "0.21.0": [{"yanked": False}], "0.22.0.dev3": [{"yanked": False}],
    "0.33.0": [{"yanked": False}], "0.34.0": [{"yanked": False}], "0.35.0": []}}


def test_registry_leaves_out_yanked_pre_and_empty_releases() -> None:
    got = sweep.registry_releases("vllm", fetch=lambda url: json.dumps(DOC).encode())
    assert got == ["0.19.0", "0.19.1", "0.21.0", "0.33.0", "0.34.0"]
    assert not sweep.is_pre("0.7.2.post1") and sweep.is_pre("0.8.0rc2")


def test_range_only_and_new() -> None:
    rel = sweep.parse_registry(DOC)
    assert sweep.choose(rel, "0.19.1", "0.33.0", None) == ["0.19.1", "0.21.0", "0.33.0"]
    assert sweep.choose(rel, None, None, ["0.33.0", "0.19.0"]) == ["0.33.0", "0.19.0"]  # the order given
    assert sweep.choose(rel, None, None, None, newer_than="0.33.0") == ["0.34.0"]
    with pytest.raises(UsageError, match=r"not a final release on the registry: 0\.20\.0"):
        sweep.choose(rel, None, None, ["0.20.0"])


def test_recorded_releases_are_skipped_unless_forced() -> None:
    have = sweep.recorded(RECORDS, "vllm")
    assert ("0.33.0", "vllm-selector") in have and ("0.19.1", "vllm-options") in have
    tasks, skipped = sweep.plan(RECORDS, "vllm", ["0.33.0", "0.35.0"], probes=["vllm-selector"])
    assert [t.release for t in tasks] == ["0.35.0"] and skipped == ["0.33.0"]
    forced, _ = sweep.plan(RECORDS, "vllm", ["0.33.0"], force=True, probes=["vllm-selector"])
    assert [(t.release, t.probes) for t in forced] == [("0.33.0", ["vllm-selector"])]
    assert sweep.newest_recorded(RECORDS, "vllm") == "0.34.0"  # swept with its recorded override


def test_a_failed_install_is_that_releases_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(lib: str, release: str, venv: Path, python: str, log: Path, **_: object) -> None:
        raise sweep.ProbeError(f"installing vllm=={release} failed (exit 1); see {log}")

    monkeypatch.setattr(sweep, "install", broken)
    res = sweep.sweep(RECORDS, "vllm", [sweep.Task("0.34.0", ["vllm-selector"])], workdir=tmp_path)
    assert [(r.release, r.status) for r in res] == [("0.34.0", "failed")]
    assert "installing vllm==0.34.0 failed" in str(res[0].why)
    state = json.loads((tmp_path / sweep.STATE).read_text())
    assert state["0.34.0"]["status"] == "failed"


def _evidence(folder: Path, release: str, outcome: str, day: str = "2026-12-05") -> str:
    eid = f"{day}-no-gpu-vllm-{release.replace('.', '-')}-vllm-selector"
    (folder / f"{eid}.yaml").write_text(
        f"id: {eid}\nkind: evidence\nprobe: {{id: vllm-selector, version: 1}}\n"
        f"environment: {{gpu: no GPU, compute_capability: n/a, libraries: {{vllm: '{release}'}}}}\n"
        f"cases:\n- params: {{cc: '8.0'}}\n  outcome: OK\n- params: {{cc: '9.0'}}\n  outcome: {outcome}\n")
    return eid


def test_a_run_that_did_not_complete_is_offered_again(tmp_path: Path) -> None:
    """An ERROR/TIMEOUT evidence record is not a record of the release: `--new` and a plan run it again (issue 46:
    while an ERROR record of 0.34.0 existed, `--new --dry-run` printed nothing)."""
    (tmp_path / "evidence").mkdir()
    _evidence(tmp_path / "evidence", "0.33.0", "OK")
    bad = _evidence(tmp_path / "evidence", "0.34.0", "ERROR")
    assert sweep.recorded(tmp_path, "vllm") == {("0.33.0", "vllm-selector"): [
        "2026-12-05-no-gpu-vllm-0-33-0-vllm-selector"]}
    assert sweep.incomplete(tmp_path, "vllm") == {("0.34.0", "vllm-selector"): [bad]}
    assert sweep.newest_recorded(tmp_path, "vllm") == "0.33.0"
    assert sweep.new_releases(tmp_path, "vllm", ["0.19.0", "0.33.0", "0.34.0"]) == ["0.34.0"]
    tasks, skipped = sweep.plan(tmp_path, "vllm", ["0.33.0", "0.34.0"], probes=["vllm-selector"])
    assert [(t.release, t.retry) for t in tasks] == [("0.34.0", [bad])] and skipped == ["0.33.0"]
    # a failed older release is offered again by --new too, and a complete re-run settles it
    _evidence(tmp_path / "evidence", "0.19.0", "TIMEOUT")
    assert sweep.new_releases(tmp_path, "vllm", ["0.19.0", "0.33.0", "0.34.0"]) == ["0.19.0", "0.34.0"]
    _evidence(tmp_path / "evidence", "0.34.0", "OK", day="2026-12-06")
    assert sweep.new_releases(tmp_path, "vllm", ["0.19.0", "0.33.0", "0.34.0"]) == ["0.19.0"]


def test_cli_dry_run_says_nothing_to_do_and_lists_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from kbtool.cli import app

    (tmp_path / "evidence").mkdir()
    _evidence(tmp_path / "evidence", "0.33.0", "OK")
    monkeypatch.setattr(sweep, "registry_releases", lambda lib: ["0.32.0", "0.33.0"])
    args = ["probe", "sweep", "--new", "--dry-run", "--probes", "vllm-selector", "--kb", str(tmp_path)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and "nothing to do" in res.output
    bad = _evidence(tmp_path / "evidence", "0.32.0", "ERROR")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and f"would run 0.32.0: vllm-selector (again: {bad} did not complete)" in res.output


def test_a_release_between_recorded_ones_is_offered(tmp_path: Path) -> None:
    """Issue 46: SGLang 0.5.19-0.5.22 lie between the recorded 0.5.18 and 0.5.23, and `--new` (newer than the
    newest recorded) never offered them. A release no run has touched between two recorded ones is a gap."""
    (tmp_path / "evidence").mkdir()
    for r in ("0.32.0", "0.34.0"):
        _evidence(tmp_path / "evidence", r, "OK")
    registry = ["0.31.0", "0.32.0", "0.33.0", "0.33.1", "0.34.0", "0.35.0"]
    assert sweep.gaps(tmp_path, "vllm", registry) == ["0.33.0", "0.33.1"]  # not 0.31.0: older than any recorded
    assert sweep.new_releases(tmp_path, "vllm", registry) == ["0.33.0", "0.33.1", "0.35.0"]
    tasks, _ = sweep.plan(tmp_path, "vllm", ["0.33.0", "0.35.0"], probes=["vllm-selector"])
    assert [(t.release, t.gap) for t in tasks] == [("0.33.0", True), ("0.35.0", False)]
    bad = _evidence(tmp_path / "evidence", "0.33.0", "ERROR")  # touched: a retry now, not a gap
    assert sweep.gaps(tmp_path, "vllm", registry) == ["0.33.1"]
    tasks, _ = sweep.plan(tmp_path, "vllm", ["0.33.0"], probes=["vllm-selector"])
    assert [(t.release, t.gap, t.retry) for t in tasks] == [("0.33.0", False, [bad])]


def test_sglang_dry_run_lists_the_unswept_releases_with_their_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang 0.5.17-0.5.23 are all recorded (0.5.22 last): `--new` has nothing to do; forcing 0.5.22 again plans it
    with the cuda-tile override probes/sweep-overrides.yaml records for it."""
    from typer.testing import CliRunner

    from kbtool.cli import app

    registry = ["0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
    monkeypatch.setattr(sweep, "registry_releases", lambda lib: registry)
    res = CliRunner().invoke(app, ["probe", "sweep", "--lib", "sglang", "--new", "--dry-run", "--kb", str(RECORDS)])
    assert res.exit_code == 0, res.output
    assert "nothing to do" in res.output and "would run" not in res.output
    res = CliRunner().invoke(app, ["probe", "sweep", "--lib", "sglang", "--releases", "0.5.22", "--force", "--dry-run",
                                   "--kb", str(RECORDS)])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.output.splitlines() if line.startswith("would run")]
    assert [line.split()[2] for line in lines] == ["0.5.22"]
    assert all("with override cuda-tile ; sys_platform == 'never'" in line for line in lines)


def test_recorded_override_for_0_34_0_and_the_command_lines(tmp_path: Path) -> None:
    assert sweep.release_overrides("vllm", "0.34.0") == ["flashinfer-python==0.7.4"]
    assert sweep.release_overrides("vllm", "0.33.0") == []
    assert sweep.release_overrides("vllm", "0.34.0", ["flashinfer_python==0.7.5", "triton==3.8.0"]) == [
        "flashinfer_python==0.7.5", "triton==3.8.0"]  # --override wins for the same distribution
    tasks, _ = sweep.plan(RECORDS, "vllm", ["0.34.0"], force=True, probes=["vllm-selector"])
    assert tasks[0].overrides == ["flashinfer-python==0.7.4"]


def _fake_uv(tmp_path: Path, fail: bool) -> Path:
    uv = tmp_path / "uv"
    body = ('echo "$@" >> "$(dirname "$0")/calls"\n'
            'case "$1" in venv) mkdir -p "${@: -1}/bin";; esac\n')
    if fail:
        body += ('case "$2" in install) echo "  x No solution found when resolving dependencies:"; '
                 'echo "  Because there is no version of flashinfer-python==0.7.3 and vllm==0.34.0 depends on '
                 'flashinfer-python==0.7.3, we can conclude that vllm==0.34.0 cannot be used."; exit 1;; esac\n')
    uv.write_text("#!/bin/bash\n" + body)
    uv.chmod(0o755)
    return uv


def test_a_failed_install_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "_uv", lambda: str(_fake_uv(tmp_path, fail=True)))
    with pytest.raises(sweep.ProbeError) as exc:
        sweep.install("vllm", "0.34.0", tmp_path / "vllm-0.34.0", "python3", tmp_path / "log")
    text = str(exc.value)
    assert "installing vllm==0.34.0 failed (exit 1)" in text
    assert "there is no version of flashinfer-python==0.7.3" in text  # the cause, not only "see log"
    assert "--override" in text


def test_an_install_is_byte_compiled_and_records_its_overrides(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from kbtool.probe import engine

    monkeypatch.setattr(sweep, "_uv", lambda: str(_fake_uv(tmp_path, fail=False)))
    venv = tmp_path / "vllm-0.34.0"
    sweep.install("vllm", "0.34.0", venv, "python3", tmp_path / "log", overrides=["flashinfer-python==0.7.4"])
    install = next(ln for ln in (tmp_path / "calls").read_text().splitlines() if ln.startswith("pip install"))
    assert "--compile-bytecode" in install.split() and "--override" in install.split()
    assert (tmp_path / "overrides-vllm-0.34.0.txt").read_text() == "flashinfer-python==0.7.4\n"
    assert engine.install_overrides(str(venv / "bin" / "python")) == ["flashinfer-python==0.7.4"]
    env = engine.environment({}, python=str(venv / "bin" / "python"))  # no interpreter there: versions empty
    assert env["install_overrides"] == ["flashinfer-python==0.7.4"]


def test_the_grid_writes_bytecode_and_evidence_keeps_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbtool.probe import evidence
    from probes import vllm_selector

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = vllm_selector.grid_env_vars()
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["CUDA_VISIBLE_DEVICES"] == ""
    model = evidence.environment_model({"gpu": "no GPU (vllm 0.34.0)", "compute_capability": "n/a",
                                        "install_overrides": ["flashinfer-python==0.7.4"]})
    assert model.install_overrides == ["flashinfer-python==0.7.4"]


def test_a_sweep_ends_with_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The closing report is kb diff's comparison against the release recorded before (here the shipped 0.34.0
    evidence stands in for what the sweep wrote); text and JSON."""
    from typer.testing import CliRunner

    from kbtool.cli import app

    monkeypatch.setattr(sweep, "registry_releases", lambda lib: ["0.33.0", "0.34.0"])
    monkeypatch.setattr(sweep, "plan", lambda *a, **k: ([sweep.Task("0.34.0", ["vllm-selector"])], []))
    done = sweep.ReleaseResult("0.34.0", "ok", {"vllm-selector": "ok"}, ["records/evidence/x.yaml"])
    monkeypatch.setattr(sweep, "sweep", lambda *a, **k: [done])
    res = CliRunner().invoke(app, ["probe", "sweep", "--releases", "0.34.0"])
    assert res.exit_code == 0, res.output
    text = res.output.split("what changed", 1)[1]
    assert "vLLM 0.33.0 -> 0.34.0" in text and "block_size: 16 -> 64" in text
    res = CliRunner().invoke(app, ["probe", "sweep", "--releases", "0.34.0", "--json"])
    got = json.loads(res.output)["changes"]
    assert [(d["a"], d["b"]) for d in got["diffs"]] == [("0.33.0", "0.34.0")]
    monkeypatch.setattr(sweep, "sweep", lambda *a, **k: [sweep.ReleaseResult("0.34.0", "failed")])
    res = CliRunner().invoke(app, ["probe", "sweep", "--releases", "0.34.0", "--json"])
    assert json.loads(res.output)["changes"] is None  # no evidence written: nothing to compare


def _wheel(folder: Path, name: str, version: str) -> None:
    """A pure-Python wheel of two modules, built by hand (no network, no build backend)."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": "X = 1\n", f"{name}/mod.py": "def f():\n    return 2\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: kb-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    rows = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},"
            f"{len(t.encode())}" for p, t in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*rows, f"{info}/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as z:
        for p, t in files.items():
            z.writestr(p, t)


@pytest.mark.slow
def test_the_pip_fallback_byte_compiles_under_pythondontwritebytecode(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Without uv the sweep installs with pip. In a container that sets PYTHONDONTWRITEBYTECODE=1 and configures
    pip not to compile (PIP_COMPILE=false), the environment must still hold bytecode, or every grid point imports
    from source again (issue 46). A real venv and a real pip, offline (a hand-built wheel found by --find-links)."""
    import sys

    _wheel(tmp_path / "wheels", "kbfake", "1.0.0")
    monkeypatch.setitem(sweep.LIBRARIES, "kbfake", ("kbfake", (), "KB_KBFAKE_PYTHON"))
    monkeypatch.setattr(sweep, "_uv", lambda: None)
    for var, value in (("PYTHONDONTWRITEBYTECODE", "1"), ("PIP_COMPILE", "false"), ("PIP_NO_INDEX", "1"),
                       ("PIP_FIND_LINKS", str(tmp_path / "wheels")), ("PIP_DISABLE_PIP_VERSION_CHECK", "1")):
        monkeypatch.setenv(var, value)
    venv = tmp_path / "kbfake-1.0.0"
    sweep.install("kbfake", "1.0.0", venv, sys.executable, tmp_path / "log")
    installed = list(venv.glob("lib/python*/site-packages/kbfake/*.py"))
    compiled = list(venv.glob("lib/python*/site-packages/kbfake/__pycache__/*.pyc"))
    assert len(installed) == 2, (tmp_path / "log").read_text()
    assert sorted(p.name.split(".")[0] for p in compiled) == ["__init__", "mod"], "the pip fallback left no bytecode"
    assert json.loads((venv / sweep.INSTALL_NOTE).read_text()) == {"release": "1.0.0", "overrides": []}


def test_the_flag_table_is_written_under_the_releases_interpreter(tmp_path: Path) -> None:
    """write_tables runs probes/_serve_flags.py with the release's own interpreter (here a stand-in that records
    its arguments and writes the table) into tests/data/<lib>/<release>/flags.json."""
    python = tmp_path / "python"
    python.write_text('#!/bin/bash\necho "$@" > "$(dirname "$0")/args"\necho \'{"engine": "vllm"}\' > "$3"\n')
    python.chmod(0o755)
    from kbtool.probe.commands import REPO_ROOT

    got = sweep.write_tables("vllm", "0.99.0", python, REPO_ROOT, tmp_path / "log", data=tmp_path / "data")
    assert got == {"flags": "ok"}
    assert json.loads((tmp_path / "data" / "vllm" / "0.99.0" / "flags.json").read_text()) == {"engine": "vllm"}
    args = (tmp_path / "args").read_text().split()
    assert args[0].endswith("probes/_serve_flags.py") and args[1] == "vllm"
    python.write_text("#!/bin/bash\necho 'ModuleNotFoundError: No module named vllm'\nexit 1\n")
    got = sweep.write_tables("vllm", "0.98.0", python, REPO_ROOT, tmp_path / "log", data=tmp_path / "data")
    assert got["flags"].startswith("failed: exit 1") and "No module named vllm" in got["flags"]
    assert sweep.write_tables("flashinfer", "0.7.4", python, REPO_ROOT, tmp_path / "log") == {}


def test_a_swept_release_gets_its_record_drafted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After its probes (stand-ins here: 0.34.0's evidence is already in the copied tree, its record removed), the
    sweep writes the release's tables and drafts its engine-release record; the state file and the text say so."""
    import shutil

    from kbtool.probe.commands import REPO_ROOT
    from kbtool.render import probe as render

    records = tmp_path / "records"
    shutil.copytree(RECORDS, records)
    (records / "engine-releases" / "vllm-0.34.0.yaml").unlink()
    monkeypatch.setattr(sweep, "install", lambda lib, rel, venv, *a, **k: (venv / "bin").mkdir(parents=True))
    monkeypatch.setattr(sweep, "run_probe", lambda *a, **k: (True, "ok", []))
    tables: list[str] = []
    monkeypatch.setattr(sweep, "write_tables", lambda lib, rel, *a, **k: tables.append(rel) or {"flags": "ok"})
    res = sweep.sweep(records, "vllm", [sweep.Task("0.34.0", ["vllm-engine-config"])], workdir=tmp_path / "w",
                      root=REPO_ROOT)[0]
    assert res.status == "ok" and tables == ["0.34.0"] and res.tables == {"flags": "ok"}
    assert res.record is not None and res.record["written"] and res.record["unresolved"] == []
    assert (records / "engine-releases" / "vllm-0.34.0.yaml").is_file()
    state = json.loads((tmp_path / "w" / sweep.STATE).read_text())
    assert ["block_size", 16, 64] in state["0.34.0"]["record"]["changed"]
    printed: list[str] = []
    monkeypatch.setattr(render.out, "print", lambda text, **k: printed.append(str(text)))
    render.sweep_text([sweep.Task("0.34.0", [])], [], [res], 1.0, False)
    assert any(p.startswith("0.34.0 engine-release record drafted:") for p in printed), printed
    assert "  changed block_size: 16 -> 64 (cites the probe's evidence; code line not read yet)" in printed
