"""The scheduled sweep (.github/workflows/sweep.yml) runs kb commands that exist, with options they take."""

from __future__ import annotations

import shlex

import yaml
from typer.testing import CliRunner

from kbtool.cli import app
from tests.util import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "sweep.yml"


def kb_commands() -> list[list[str]]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    out = []
    for step in doc["jobs"]["sweep"]["steps"]:
        for line in str(step.get("run") or "").splitlines():
            line = line.split("||")[0].strip()
            if line.startswith("kb "):
                out.append(shlex.split(line)[1:])
    return out


def test_the_workflow_is_a_daily_schedule_that_sweeps_applies_and_validates() -> None:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert doc[True]["schedule"][0]["cron"].endswith("* * *")  # YAML 1.1 reads the key `on` as True
    cmds = [c[:2] for c in kb_commands()]
    assert cmds == [["probe", "sweep"]] * 4 + [["probe", "apply"], ["probe", "events"], ["validate"]]
    swept = [c[c.index("--lib") + 1] for c in kb_commands() if c[:2] == ["probe", "sweep"]]
    assert swept == ["vllm", "sglang", "vllm", "sglang"], "both engines' CPU-side probes, dry run first"
    paths = str(doc["jobs"]["sweep"]["steps"][-1]["with"]["add-paths"]).split()
    assert {"records/", "tests/data/vllm/", "tests/data/sglang/"} <= set(paths), "the raw grids go with the evidence"


def test_every_option_it_passes_exists() -> None:
    for cmd in kb_commands():
        words = [w for w in cmd if not w.startswith("$")]
        names = [w for w in words if w.startswith("--")]
        sub = [w for w in words if not w.startswith("-")][:2 if words[0] == "probe" else 1]
        res = CliRunner().invoke(app, [*sub, "--help"], terminal_width=200)
        assert res.exit_code == 0, res.output
        for n in names:
            assert n in res.output, f"{' '.join(cmd)}: `kb {' '.join(sub)}` has no option {n}"
