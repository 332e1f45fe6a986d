"""The code a judge runs (kbtool/probe/judge_code.py): the probe module and what it imports from kbtool/ and probes/,
transitively, read from the text; a type checker's import is not followed; the digest moves with that code only."""

from __future__ import annotations

from pathlib import Path

from kbtool.probe.judge_code import KBTOOL, JudgeCode


def _rel(paths: list[Path]) -> set[str]:
    return {p.relative_to(KBTOOL.parent).as_posix() for p in paths}


def test_the_vllm_selector_judge_reaches_the_selection_not_the_verdict() -> None:
    files = _rel(JudgeCode().files("vllm-selector"))
    assert {"probes/vllm_selector.py", "kbtool/solve/engines/vllm/selection.py", "kbtool/probe/rejudge.py"} <= files
    assert not any(f.startswith(("kbtool/render/", "kbtool/solve/decision.py", "kbtool/solve/solver.py"))
                   for f in files)


def test_an_unknown_probe_has_no_code() -> None:
    assert JudgeCode().digest("no-such-probe") is None


def _tree(tmp: Path, probe_text: str) -> Path:
    probes = tmp / "probes"
    probes.mkdir()
    (probes / "__init__.py").write_text("")
    (probes / "_helper.py").write_text("X = 1\n")
    (probes / "_other.py").write_text("Y = 2\n")
    (probes / "p.py").write_text(probe_text)
    return probes


def test_imports_are_followed_and_type_checking_ones_are_not(tmp_path: Path) -> None:
    probes = _tree(tmp_path, 'from probes import _helper\nTYPE_CHECKING = False\nif TYPE_CHECKING:\n'
                             '    from probes._other import Y\nSPEC = ProbeSpec(\n    id="p-probe",\n)\n'
                             'def judge(obs, env):\n    from . import _helper\n    return {}\n')
    j = JudgeCode(probes)
    names = {p.name for p in j.files("p-probe") if p.parent == probes}
    assert names == {"__init__.py", "_helper.py", "p.py"}
    before = j.digest("p-probe")
    (probes / "_other.py").write_text("Y = 3\n")  # not the judge's code
    assert JudgeCode(probes).digest("p-probe") == before
    (probes / "_helper.py").write_text("X = 2\n")  # the judge's code
    assert JudgeCode(probes).digest("p-probe") != before
