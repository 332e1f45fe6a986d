"""`kb fmt`, `kb new`, KB601 and the CLI conventions, through the typer app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbtool.cli import app
from kbtool.validate import validate

from .conftest import write
from .test_core import MESSY, WANT

runner = CliRunner()


def test_fmt_check_prints_a_diff_and_exits_1(tmp_path: Path) -> None:
    p = write(tmp_path, "records/claims/x.yaml", MESSY)
    r = runner.invoke(app, ["fmt", "--check", "--kb", str(tmp_path / "records")])
    assert r.exit_code == 1
    assert "--- a/records/claims/x.yaml" in r.stdout and "+# yaml-language-server:" in r.stdout
    assert p.read_text() == MESSY


def test_fmt_writes_and_then_check_passes(tmp_path: Path) -> None:
    p = write(tmp_path, "records/claims/x.yaml", MESSY)
    assert runner.invoke(app, ["fmt", "--kb", str(tmp_path / "records")]).exit_code == 0
    assert p.read_text() == WANT
    assert runner.invoke(app, ["fmt", "--check", "--kb", str(tmp_path / "records")]).exit_code == 0


def test_fmt_json(tmp_path: Path) -> None:
    write(tmp_path, "records/claims/x.yaml", MESSY)
    r = runner.invoke(app, ["fmt", "--check", "--json", "--kb", str(tmp_path / "records")])
    payload = json.loads(r.stdout)
    assert r.exit_code == 1 and payload["ok"] is False
    assert [(f["file"], f["status"]) for f in payload["files"]] == [("records/claims/x.yaml", "changed")]


def test_fmt_reports_unreadable_files_and_exits_1(tmp_path: Path) -> None:
    write(tmp_path, "records/claims/x.yaml", "id: [unclosed\n")
    r = runner.invoke(app, ["fmt", "--kb", str(tmp_path / "records")])
    assert r.exit_code == 1
    assert "cannot format records/claims/x.yaml:2" in r.stderr


def test_new_scaffolds_a_canonical_record_with_comments(tmp_path: Path) -> None:
    root = tmp_path / "records"
    root.mkdir()
    r = runner.invoke(app, ["new", "claim", "my-claim", "--kb", str(root)])
    assert r.exit_code == 0, r.output
    p = root / "claims" / "my-claim.yaml"
    text = p.read_text()
    assert text.startswith("# yaml-language-server: $schema=../../schema/claim.schema.json\n")
    assert "id: my-claim\nkind: claim\n" in text
    assert "effect: reject" in text and "# What the solver does with it (fails: the engine accepts it, then fails at " \
        "first use) (one of: reject | caveat | fails | supports)" in text
    assert runner.invoke(app, ["fmt", "--check", "--kb", str(root)]).exit_code == 0
    again = runner.invoke(app, ["new", "claim", "my-claim", "--kb", str(root)])
    assert again.exit_code == 2 and "already exists" in again.stderr


@pytest.mark.parametrize("kind", ["architecture", "accelerator", "hardware-parameter", "kernel", "engine-backend",
                                  "claim", "model", "measurement", "topic"])
def test_every_kind_scaffolds_and_only_todo_placeholders_fail_schema(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "records"
    root.mkdir()
    assert runner.invoke(app, ["new", kind, "x", "--kb", str(root)]).exit_code == 0
    findings = validate(root, style=True).findings
    assert not [f for f in findings if f.code in ("KB100", "KB601")]


def test_new_refuses_evidence_and_unknown_kinds(tmp_path: Path) -> None:
    r = runner.invoke(app, ["new", "evidence", "x", "--kb", str(tmp_path)])
    assert r.exit_code == 2 and "kb probe run" in r.stderr
    r = runner.invoke(app, ["new", "gizmo", "x", "--kb", str(tmp_path)])
    assert r.exit_code == 2 and "unknown kind 'gizmo'" in r.stderr


def test_help_lists_every_command_on_one_untruncated_line() -> None:
    r = runner.invoke(app, ["--help"], env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert r.exit_code == 0
    commands = r.stdout.split("Commands:\n", 1)[1].splitlines()
    names = [c.split()[0] for c in commands if c.strip()]
    assert {"validate", "fmt", "new", "schema"} <= set(names)
    for line in commands:
        if line.strip():
            assert len(line.split(None, 1)) == 2, f"no description: {line!r}"
            assert not line.rstrip().endswith("..."), f"truncated: {line!r}"
    assert "--version" in r.stdout and "--install-completion" in r.stdout


def test_no_color_output_has_no_escape_codes(tmp_path: Path) -> None:
    write(tmp_path, "records/claims/x.yaml", MESSY)
    r = runner.invoke(app, ["validate", "--kb", str(tmp_path / "records")], env={"NO_COLOR": "1"},
                      color=True)
    assert "\x1b[" not in r.output


def test_validate_of_one_file_checks_only_that_file_for_kb601(tmp_path: Path) -> None:
    root = tmp_path / "records"
    a = write(tmp_path, "records/claims/a.yaml", MESSY.replace("id: x", "id: a"))
    write(tmp_path, "records/claims/b.yaml", MESSY.replace("id: x", "id: b"))
    assert [f.file for f in validate(root, [a], style=True).findings if f.code == "KB601"] == ["records/claims/a.yaml"]
    assert len([f for f in validate(root, style=True).findings if f.code == "KB601"]) == 2


def test_validate_reports_kb601_only_with_style(tmp_path: Path) -> None:
    root = tmp_path / "records"
    write(tmp_path, "records/claims/x.yaml", MESSY)
    assert not [f for f in validate(root).findings if f.code == "KB601"]
    assert [f.code for f in validate(root, style=True).findings if f.code == "KB601"] == ["KB601"]
    assert "KB601" in runner.invoke(app, ["validate", "--style", "--kb", str(root)]).output
    assert "KB601" not in runner.invoke(app, ["validate", "--kb", str(root)]).output


def test_fmt_refuses_a_file_too_large_to_format_quickly(tmp_path: Path) -> None:
    """A condition of 20,000 alternatives (issue 48): refused from its size before the round-trip parser, which
    costs about a millisecond a line, so fmt answers at once and leaves the file as it was."""
    alternatives = "".join(f"  - var: head_dim\n    eq: {i}\n" for i in range(20_000))
    text = MESSY.replace("id:", f"requires:\n  any:\n{alternatives}id:", 1)
    p = write(tmp_path, "records/claims/x.yaml", text)
    r = runner.invoke(app, ["fmt", "--kb", str(tmp_path / "records")])
    assert r.exit_code == 1
    assert "records/claims/x.yaml: 40,0" in r.output and "more than kb fmt formats" in r.output
    assert p.read_text() == text


def test_fmt_leaves_records_kb_writes_itself(tmp_path: Path) -> None:
    p = write(tmp_path, "records/measurements/m.yaml", MESSY)
    r = runner.invoke(app, ["fmt", "--kb", str(tmp_path / "records")])
    assert r.exit_code == 0 and "1 skipped" in r.output
    assert p.read_text() == MESSY
