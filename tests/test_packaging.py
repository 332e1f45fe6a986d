"""The wheel works outside the checkout: records and schemas ship as package data (slow: builds and installs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.install]


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: int = 600) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("KB_RECORDS", "VIRTUAL_ENV", "PYTHONPATH")}
    return subprocess.run(args, cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/ of a fresh venv with the wheel (not editable) installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"),
                  str(ROOT)], tmp)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp / "dist").glob("kbtool-*.whl"))
    venv.EnvBuilder(with_pip=True).create(tmp / "venv")
    bindir = tmp / "venv" / "bin"
    inst = _run([str(bindir / "python"), "-m", "pip", "install", "-q", str(wheel)], tmp)
    if inst.returncode != 0 and "No matching distribution" in inst.stderr:
        pytest.skip("the package index cannot be reached to install the dependencies")
    assert inst.returncode == 0, inst.stderr[-2000:]
    return bindir


def test_wheel_ships_records_and_schemas(installed: Path) -> None:
    out = _run([str(installed / "python"), "-c", "import kbtool.paths as p; print(p.records_dir()); "
                "print(p.schema_dir())"], Path("/tmp"))
    records, schema = (Path(x) for x in out.stdout.split())
    assert "site-packages" in str(records) and (records / "claims").is_dir()
    assert (schema / "claim.schema.json").is_file() and (schema / "claim.md").is_file()


@pytest.mark.usefixtures("shipped_verdicts")
def test_version_and_validate_work_from_tmp(installed: Path) -> None:
    v = _run([str(installed / "kb"), "--version"], Path("/tmp"))
    assert v.returncode == 0 and v.stdout.startswith("kb ")
    r = _run([str(installed / "kb"), "validate", "--json"], Path("/tmp"))  # the session's cache: same sources
    payload = json.loads(r.stdout)
    assert r.returncode == 0 and payload["ok"] and payload["records"] > 50, r.stdout[-2000:]


def test_query_answers_from_tmp(installed: Path) -> None:
    helptext = _run([str(installed / "kb"), "--help"], Path("/tmp")).stdout
    if " query " not in helptext:
        pytest.skip("`kb query` is not in this build yet")
    r = _run([str(installed / "kb"), "query", "--gpu", "h100", "--ctx", "128k", "--kv", "fp8", "--json"], Path("/tmp"))
    assert r.returncode in (0, 1), r.stderr[-2000:]
    assert json.loads(r.stdout)["verdict"] in ("yes", "no", "conditional", "unknown")


def test_kb_records_and_kb_flag_select_another_tree(installed: Path, tmp_path: Path) -> None:
    bad = tmp_path / "other" / "claims"
    bad.mkdir(parents=True)
    (bad / "broken.yaml").write_text("id: [unclosed\n")
    for env, extra in (({"KB_RECORDS": str(tmp_path / "other")}, []), ({}, ["--kb", str(tmp_path / "other")])):
        r = _run([str(installed / "kb"), "validate", *extra], Path("/tmp"), env=env)
        assert r.returncode == 1 and "broken.yaml" in r.stdout
