"""Help texts name only files that exist: every path-like reference (`x.md`, `records/...`, `schema/*.json`,
`kbtool/...py`) in `kb --help`, each command's and group's help, and `kb query --help` is a file of this repository.
A help text that points at a design.md the repository does not hold fails here."""

from __future__ import annotations

import re
import subprocess
import sys

from typer.main import get_command
from typer.testing import CliRunner

from kbtool.cli import app
from tests.util import ROOT

OUTPUTS = {"probe-run.json"}  # files a command writes, named in its help: not files of the repository
FILE_REF = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:md|py|ya?ml|json|toml))\b")


def _commands(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for name, cmd in getattr(group, "commands", {}).items():
        out += _commands(cmd, (*prefix, name)) if hasattr(cmd, "commands") else [(*prefix, name)]
    return out


def _helps() -> dict[str, str]:
    runner, out = CliRunner(), {}
    for path in _commands(get_command(app)):
        if path == ("query",):
            continue  # kb query parses its own flags (kbtool/query_cli.py): asked below, as a user does
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
        out[" ".join(("kb", *path))] = r.output
    r = subprocess.run([sys.executable, "-m", "kbtool", "query", "--help"], capture_output=True, text=True,
                       env={"COLUMNS": "400", "PATH": ""}, cwd=ROOT, check=False)
    out["kb query"] = r.stdout + r.stderr
    return out


def stale(text: str) -> list[str]:
    """The file references in `text` that name no file of the repository (a bare name may live in any folder)."""
    bad = []
    for ref in FILE_REF.findall(text):
        if "/" in ref:  # a one-letter capital segment is a placeholder: tests/data/vllm/X/outcomes.json
            pattern = "/".join("*" if re.fullmatch(r"[A-Z]", part) else part for part in ref.split("/"))
            found = (ROOT / ref).exists() or any(ROOT.glob(pattern))
        else:
            found = any(p for p in ROOT.rglob(ref) if ".venv" not in p.parts and ".ci-venv" not in p.parts)
        if not found and ref not in OUTPUTS and not ref.startswith("."):  # ".schema.json": a suffix
            bad.append(ref)
    return bad


def test_help_texts_name_files_that_exist() -> None:
    helps = _helps()
    assert len(helps) > 20 and "kb query" in helps and "--json" in helps["kb query"]
    found = {cmd: stale(text) for cmd, text in helps.items()}
    assert {cmd: refs for cmd, refs in found.items() if refs} == {}


def test_a_missing_file_is_caught() -> None:
    assert stale("Print the answer as JSON (design.md §4).") == ["design.md"]
    assert stale("see schema/query-answer.schema.json and README.md") == []


def test_the_allowed_output_names_are_still_named() -> None:
    helps = "\n".join(_helps().values())
    assert {n for n in OUTPUTS if n not in helps} == set()  # a stale allow-list entry is itself an error
