"""KB601 (kbtool/checks/style.py): a file not in `kb fmt`'s canonical form is a warning with the fix."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kbtool.checks.style import find_not_canonical
from kbtool.cli import app
from kbtool.validate import validate
from tests.fmt.conftest import write
from tests.fmt.test_core import MESSY, WANT

runner = CliRunner()


def test_kb601_warns_with_the_fix_and_is_not_an_error(tmp_path: Path) -> None:
    p = write(tmp_path, "records/claims/x.yaml", MESSY)
    f = find_not_canonical(p, MESSY, "records/claims/x.yaml")
    assert f is not None and f.code == "KB601" and f.severity == "warning"
    assert f.fix is not None and "run `kb fmt`" in f.fix
    assert find_not_canonical(p, WANT, "records/claims/x.yaml") is None


def test_validate_reports_kb601_only_until_fmt_runs(tmp_path: Path) -> None:
    root = tmp_path / "records"
    write(tmp_path, "records/claims/x.yaml", MESSY)
    assert [f.code for f in validate(root, style=True).findings if f.code == "KB601"] == ["KB601"]
    runner.invoke(app, ["fmt", "--kb", str(root)])
    assert [f.code for f in validate(root, style=True).findings if f.code == "KB601"] == []
