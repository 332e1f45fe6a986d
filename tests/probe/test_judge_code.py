"""The code a judge runs (kbtool/probe/judge_code.py): the judge module and what it imports from kbtool/,
transitively, read from the text; a type checker's import is not followed; the digest moves with that code only; the
probe program (probes/<name>.py) is not part of it, the data folder beside it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbtool.probe.judge_code import KBTOOL, JudgeCode


def _rel(paths: list[Path]) -> set[str]:
    return {p.relative_to(KBTOOL.parent).as_posix() for p in paths}


def test_the_vllm_selector_judge_reaches_the_selection_not_the_verdict() -> None:
    files = _rel(JudgeCode().files("vllm-selector"))
    assert {"kbtool/probe/judges/vllm_selector.py", "kbtool/solve/engines/vllm/selection.py",
            "kbtool/probe/rejudge.py"} <= files
    assert not any(f.startswith("probes/") for f in files)  # the program that ran the cases judges nothing
    assert not any(f.startswith(("kbtool/render/", "kbtool/solve/decision.py", "kbtool/solve/solver.py"))
                   for f in files)


def test_an_unknown_probe_has_no_code() -> None:
    assert JudgeCode().digest("no-such-probe") is None


def _tree(tmp: Path, judge_text: str) -> tuple[Path, Path]:
    top = tmp / "kbtool"
    judges = top / "probe" / "judges"
    judges.mkdir(parents=True)
    for d in (top, top / "probe", judges):
        (d / "__init__.py").write_text("")
    (top / "_helper.py").write_text("X = 1\n")
    (top / "_other.py").write_text("Y = 2\n")
    (judges / "p.py").write_text(judge_text)
    data = tmp / "probes"
    (data / "p").mkdir(parents=True)
    (data / "p" / "model.json").write_text("{}")
    (data / "p.py").write_text("def run(case): ...\n")
    return top, data


def test_imports_are_followed_and_type_checking_ones_are_not(tmp_path: Path) -> None:
    top, data = _tree(tmp_path, 'from kbtool import _helper\nTYPE_CHECKING = False\nif TYPE_CHECKING:\n'
                                '    from kbtool._other import Y\nSPEC = ProbeSpec(\n    id="p-probe",\n)\n'
                                'def judge(obs, env):\n    from ... import _helper\n    return {}\n')
    j = JudgeCode(top, data)
    names = {p.relative_to(tmp_path).as_posix() for p in j.files("p-probe")}
    assert {"kbtool/_helper.py", "kbtool/probe/judges/p.py", "probes/p/model.json"} <= names
    assert "kbtool/_other.py" not in names and "probes/p.py" not in names
    before = j.digest("p-probe")
    (top / "_other.py").write_text("Y = 3\n")  # not the judge's code
    (data / "p.py").write_text("def run(case): return 1\n")  # the program, not the judge
    assert JudgeCode(top, data).digest("p-probe") == before
    (top / "_helper.py").write_text("X = 2\n")  # the judge's code
    assert JudgeCode(top, data).digest("p-probe") != before
    (top / "_helper.py").write_text("X = 1\n")
    (data / "p" / "model.json").write_text("{ }")  # the data it reads
    assert JudgeCode(top, data).digest("p-probe") != before


def test_a_type_checking_block_ends_where_its_indent_does(tmp_path: Path) -> None:
    """Blank lines inside an indented `if TYPE_CHECKING:` block keep it open; the first line at the `if`'s own
    indent or less closes it, and an import there is followed again."""
    top, data = _tree(tmp_path, 'SPEC = ProbeSpec(\n    id="p-probe",\n)\n'
                                'def judge(obs, env):\n    if TYPE_CHECKING:\n        from kbtool._other import Y\n\n'
                                '        from kbtool import _other\n    from kbtool import _helper\n    return {}\n')
    names = {p.relative_to(tmp_path).as_posix() for p in JudgeCode(top, data).files("p-probe")}
    assert "kbtool/_helper.py" in names and "kbtool/_other.py" not in names


def test_a_second_run_reads_only_the_files_edited_since(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file's digest and imports are kept in the cache folder by size and mtime (Facts): a run after no edit
    reads no file and gives the same digest; an edit is read, and moves the digest of the judge it reaches."""
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    top, data = _tree(tmp_path, 'from kbtool import _helper\nSPEC = ProbeSpec(\n    id="p-probe",\n)\n')
    first = JudgeCode(top, data)
    digest = first.digest("p-probe")
    assert first.src.facts.read > 0
    again = JudgeCode(top, data)
    assert again.digest("p-probe") == digest and again.src.facts.read == 0
    (top / "_helper.py").write_text("X = 22\n")  # the judge's code, another size
    edited = JudgeCode(top, data)
    assert edited.digest("p-probe") != digest and edited.src.facts.read == 1
    (top / "_helper.py").write_text("X = 1\n")
    os.utime(top / "_helper.py", ns=(1, 1))  # same size as the first run, another mtime: read again
    assert JudgeCode(top, data).digest("p-probe") == digest
